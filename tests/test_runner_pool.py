"""The warm pool against the REAL sandbox."""

import asyncio
import os
import signal
import socket

import pytest
import pytest_asyncio

from runner import references
from runner.errors import InvalidRequest, RunnerBusy
from runner.grading import Check, ExerciseChecks
from runner.limits import Limits
from tests.runner_cases.everyday import EVERYDAY
from tests.runner_cases.helpers import start_pool

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pool():
    p = await start_pool(pool_size=2, queue=4)
    yield p
    await p.close()


async def test_self_check_proved_isolation(pool):
    assert pool.pids_limit_proven
    st = pool.stats()
    assert st["torch"] and st["cgroup_version"] in (1, 2)


async def test_trivial(pool):
    r = await pool.run("print(1 + 1)")
    assert (r.status, r.stdout, r.stderr, r.exit_code, r.signal, r.truncated) == ("ok", "2\n", "", 0, None, False)
    assert r.duration_ms >= 0


async def test_torch_and_autograd(pool):
    r = await pool.run(
        "import torch\nx = torch.tensor(3.0, requires_grad=True)\n(x ** 2).backward()\nprint(x.grad.item())"
    )
    assert r.status == "ok" and r.stdout == "6.0\n"


async def test_exception_traceback_is_trimmed(pool):
    r = await pool.run("def f(x):\n    return x / 0\n\nf(1)\n")
    assert r.status == "error" and r.exit_code == 1
    assert 'File "<snippet>", line 4, in <module>' in r.stderr
    assert 'File "<snippet>", line 2, in f' in r.stderr
    assert "runner" not in r.stderr and "zygote" not in r.stderr
    assert r.stderr.rstrip().endswith("ZeroDivisionError: division by zero")


async def test_torch_error_keeps_only_learner_frames(pool):
    r = await pool.run("import torch\ntorch.ones(2, 3) @ torch.ones(4, 5)\n")
    assert r.status == "error" and "<snippet>" in r.stderr and "site-packages" not in r.stderr
    assert "RuntimeError" in r.stderr


async def test_syntax_error(pool):
    r = await pool.run("x = (\n")
    assert r.status == "error" and "SyntaxError" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "code,status,exit_code",
    [
        ("import sys; sys.exit(0)", "ok", 0),
        ("import sys; sys.exit(3)", "error", 3),
        ("import os; os._exit(5)", "error", 5),
        ("raise SystemExit('bye')", "error", 1),
    ],
)
async def test_exit_codes(pool, code, status, exit_code):
    r = await pool.run(code)
    assert (r.status, r.exit_code) == (status, exit_code)


async def test_each_limit_has_its_status(pool):
    r = await pool.run("import time; time.sleep(30)", limits={"wall_time_s": 0.5})
    assert r.status == "timeout"
    r = await pool.run("while True: pass", limits={"cpu_time_s": 1, "wall_time_s": 60})
    assert r.status == "cpu_limit" and r.signal in (signal.SIGXCPU, signal.SIGKILL)
    r = await pool.run(
        "b = bytearray(600 * 2**20)\nb[::4096] = b'x' * len(b[::4096])", limits={"memory_bytes": 128 * 2**20}
    )
    assert r.status == "memory_limit"
    r = await pool.run("print('x' * 100000)", limits={"output_bytes": 1000})
    assert r.status == "output_limit" and r.truncated and len(r.stdout) == 1000
    r = await pool.run("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert r.status == "killed" and r.signal == signal.SIGKILL and r.exit_code is None


async def test_output_before_a_timeout_is_kept(pool):
    r = await pool.run("print('before', end='')\nwhile True: pass", limits={"wall_time_s": 1})
    assert r.status == "timeout" and r.stdout == "before"


async def test_reseeded_per_job(pool):
    code = "import random, torch\nprint(random.random(), torch.rand(1).item())"
    a, b = await pool.run(code, seed=42), await pool.run(code, seed=42)
    c, d = await pool.run(code), await pool.run(code)
    assert a.stdout == b.stdout
    assert c.stdout != d.stdout


async def test_parallel_jobs(pool):
    rs = await asyncio.gather(*[pool.run(f"print({i} * 2)") for i in range(6)])
    assert [r.stdout for r in rs] == [f"{i * 2}\n" for i in range(6)]


async def test_busy_when_queue_is_full(pool):
    slow = [asyncio.ensure_future(pool.run("import time; time.sleep(1.5)")) for _ in range(6)]
    await asyncio.sleep(0.2)
    with pytest.raises(RunnerBusy):
        await pool.run("print(1)")
    rs = await asyncio.gather(*slow)
    assert all(r.status == "ok" for r in rs)
    assert (await pool.run("print(1)")).stdout == "1\n"


@pytest.mark.parametrize("size", [100, 10_000, 60_000])
async def test_code_of_any_size_runs_whichever_way_its_spec_travels(pool, size):
    # A short spec travels inside the job's message, a long one (past INLINE_SPEC_BYTES) in a memfd; non-ASCII
    # code is six times longer in JSON than in characters (60,000 é: 120,000 bytes, near the 128 KiB limit).
    comment = "# " + "é" * size + "\n"
    r = await pool.run(comment + "print('ran')", seed=3)
    assert (r.status, r.stdout) == ("ok", "ran\n"), r


async def test_bad_requests(pool):
    with pytest.raises(InvalidRequest):
        await pool.run("x" * (Limits().code_bytes + 1))
    with pytest.raises(InvalidRequest):
        await pool.run("print(1)", limits={"bogus": 1})
    with pytest.raises(InvalidRequest):
        await pool.run(b"print(1)")


async def test_runs_as_unprivileged_uid(pool):
    r = await pool.run(
        "import os\nprint(os.getuid(), os.geteuid(), os.getpid())\n"
        "print(open('/proc/self/status').read().split('CapEff:')[1].split()[0])"
    )
    uid, euid, pid = r.stdout.split()[:3]
    assert uid == euid and pid == "2"
    if os.geteuid() == 0:
        assert uid != "0"
    assert r.stdout.split()[3] == "0000000000000000"


async def test_graded_checks(pool):
    checks = ExerciseChecks(checks=(Check("grad", "x.grad", expect=6.0), Check("leaf", "x.is_leaf", kind="true")))
    good = "import torch\nx = torch.tensor(3.0, requires_grad=True)\n(x * x).backward()\n"
    r = await pool.run(good, checks=checks)
    assert r.passed and [c.passed for c in r.checks] == [True, True]
    r = await pool.run(good, checks=ExerciseChecks(checks=(Check("grad", "x.grad", expect=6.0),)))
    assert r.passed and r.checks[0].message_key == "checks.passed"
    r = await pool.run(
        good.replace("x * x", "x * x * x"), checks=ExerciseChecks(checks=(Check("grad", "x.grad", expect=6.0),))
    )
    assert not r.passed and r.checks[0].message_key == "checks.mismatch"


async def test_graded_with_reference_and_seed(pool):
    ref = "import torch\nx = torch.randn(4, requires_grad=True)\n(x.sin().sum()).backward()\n"
    checks = ExerciseChecks(checks=(Check("g", "x.grad"),), reference=ref)
    r = await pool.run(ref.replace("x.sin().sum()", "torch.sin(x).sum()"), checks=checks)
    assert r.passed
    r = await pool.run(ref.replace("sin", "cos"), checks=checks)
    assert not r.passed


async def test_graded_runs_take_references_computed_ahead_each_on_a_seed_of_its_own(pool):
    ref = "import torch\nx = torch.randn(4, requires_grad=True)\n(x.sin().sum()).backward()\n"
    checks = ExerciseChecks(checks=(Check("g", "x.grad"),), reference=ref)
    answer = ref + "print(torch.initial_seed())"
    first = await pool.run(answer, checks=checks)  # none ready yet: its reference runs on demand
    assert first.passed
    for _ in range(200):  # then some are computed ahead, while the pool is idle
        if pool.stats()["references_ready"]:
            break
        await asyncio.sleep(0.05)
    taken = pool.stats()["references_taken"]
    runs = [await pool.run(answer, checks=checks) for _ in range(3)]
    assert all(r.passed for r in runs), runs
    assert pool.stats()["references_taken"] > taken
    seeds = [r.stdout for r in (first, *runs)]
    assert len(set(seeds)) == len(seeds)  # no seed twice
    wrong = await pool.run(ref.replace("sin", "cos"), checks=checks)  # a ready seed grades as strictly
    assert not wrong.passed and wrong.checks[0].message_key == "checks.mismatch"
    # The next tests count slots and processes: the refills end first.
    for _ in range(400):
        if pool.stats()["references_ready"] >= references.SEEDS_PER_EXERCISE and not pool.stats()["running"]:
            break
        await asyncio.sleep(0.05)


async def test_a_run_that_names_its_seed_computes_its_reference_on_that_seed(pool):
    ref = "import torch\nx = torch.randn(4, requires_grad=True)\n(x.sin().sum()).backward()\n"
    checks = ExerciseChecks(checks=(Check("g", "x.grad"),), reference=ref)
    taken = pool.stats()["references_taken"]
    r = await pool.run(ref + "print(torch.initial_seed())", checks=checks, seed=1234)
    assert r.passed and r.stdout == "1234\n"
    assert pool.stats()["references_taken"] == taken


async def test_zygote_restarts_after_it_dies(pool):
    os.killpg(pool.zygote.proc.pid, signal.SIGKILL)
    await asyncio.sleep(0.2)
    for _ in range(3):
        try:
            r = await pool.run("print('back')")
            break
        except Exception:  # the job that met the dead zygote fails as machinery
            continue
    assert r.stdout == "back\n"


async def test_cancelled_request_cleans_up(pool):
    task = asyncio.ensure_future(pool.run("import time\nprint('x', flush=True)\ntime.sleep(30)"))
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    r = await pool.run("print('next')")
    assert r.stdout == "next\n"
    busy = {id(x.cgroup) for x in pool._ready}
    for _ in range(100):
        if all(not c.pids() for c in pool.tree.slots if id(c) not in busy):
            break
        await asyncio.sleep(0.05)
        busy = {id(x.cgroup) for x in pool._ready}
    assert all(not c.pids() for c in pool.tree.slots if id(c) not in busy)


def _sandbox_processes(pool) -> set[int]:
    """Host pids of every process under the zygote's launcher (bwrap, the zygote, nsforge, prepared jobs)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    out, stack = set(), [pool.zygote.proc.pid]
    while stack:
        p = stack.pop()
        out.add(p)
        stack.extend(children.get(p, []))
    return out


async def _idle(pool):
    for _ in range(200):
        if len(pool._ready) == pool._target_ready and pool._preparing == 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the pool never finished preparing its sandboxes")


@pytest.mark.parametrize("tmpfs_bytes", [float("nan"), "big", -1, 10**30])
async def test_a_spawn_the_zygote_cannot_honour_never_leaves_a_second_zygote(pool, tmpfs_bytes):
    """A forked child must never return into the zygote's loop (NaN once made it a second zygote)."""
    z = await pool._ensure_zygote()
    await _idle(pool)
    before = _sandbox_processes(pool)
    sup, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with sup:
        answer = z.expect("spawn", "bogus")
        try:
            await z.send({"op": "spawn", "job": "bogus", "tmpfs_bytes": tmpfs_bytes}, [child.fileno()])
        finally:
            child.close()
        msg = await asyncio.wait_for(answer, 10)
    assert msg["op"] == "spawn_failed" and "tmpfs_bytes" in msg["error"]
    await asyncio.sleep(0.3)
    await _idle(pool)
    assert _sandbox_processes(pool) == before
    assert (await pool.run("print('still one zygote')")).stdout == "still one zygote\n"


@pytest.mark.parametrize(
    "limits",
    [{"tmpfs_bytes": float("nan")}, {"output_bytes": float("nan")}, {"cpu_time_s": float("inf")}, {"wall_time_s": "1"}],
)
async def test_non_finite_limits_are_refused_before_anything_runs(pool, limits):
    with pytest.raises(InvalidRequest, match=next(iter(limits))):
        await pool.run("print(1)", limits=limits)


@pytest.mark.parametrize("name", sorted(EVERYDAY))
async def test_everyday_python_runs_under_the_seccomp_allow_list(pool, name):
    r = await pool.run(EVERYDAY[name], limits={"wall_time_s": 30, "cpu_time_s": 20})
    assert r.status == "ok", (name, r)
    assert "Function not implemented" not in r.stderr and "not permitted" not in r.stderr, (name, r.stderr)


async def test_the_reference_cache_keys_on_the_checks_ids_too(pool):
    # A lesson reload that swapped two checks' ids once kept the old reference values until a restart, so a
    # wrong answer passed: the values come back by id, and the cache keyed only on the expressions.
    reference = "x = 1\ny = 2\n"
    first = ExerciseChecks((Check("a", "x", kind="equal"), Check("b", "y", kind="equal")), reference=reference)
    assert (await pool.run(reference, checks=first, seed=7)).passed
    swapped = ExerciseChecks((Check("b", "x", kind="equal"), Check("a", "y", kind="equal")), reference=reference)
    wrong = "x = 2\ny = 1\n"  # right for the old ids' values, wrong for the expressions now under them
    result = await pool.run(wrong, checks=swapped, seed=7)
    assert not result.passed and [(c.id, c.passed) for c in result.checks] == [("b", False), ("a", False)]
    assert (await pool.run(reference, checks=swapped, seed=7)).passed
