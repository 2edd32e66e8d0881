"""The Docker backend: the container it asks for (no engine needed) and, when an
engine is reachable, a real job."""

import asyncio
import dataclasses
import json
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from runner import docker_backend as D
from runner import grading, seccomp
from runner.backend import classify
from runner.config import RunnerConfig
from runner.errors import InvalidRequest, SandboxUnavailable
from runner.limits import Limits
from tests import engine

DOCKER = D.DockerConfig.from_config(RunnerConfig(backend="docker"))


def cfg(**kw):
    return D.container_config(Limits(**kw) if kw else Limits(), DOCKER, 63400)


def test_container_is_locked_down():
    c = cfg()
    assert c["network_mode"] == "none" and c["network_disabled"] is True
    assert c["read_only"] is True
    assert c["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in c["security_opt"]
    assert c["user"] == "63400:63400"  # its slot's uid, which no host process uses (see below)
    assert set(c["tmpfs"]) == {"/sandbox", "/tmp", "/dev/shm"}
    assert c["working_dir"] == "/sandbox"
    assert c["ipc_mode"] == "none"
    assert "TELEGRAM_BOT_TOKEN" not in c["environment"]


def test_limits_are_mapped():
    c = cfg(
        memory_bytes=100 * 2**20,
        max_processes=9,
        cpu_time_s=2.5,
        file_size_bytes=1000,
        open_files=50,
        tmpfs_bytes=4096 * 16,
    )
    assert c["mem_limit"] == c["memswap_limit"] == 100 * 2**20
    assert c["pids_limit"] == 9
    ul = {u["name"]: (u["soft"], u["hard"]) for u in c["ulimits"]}
    assert (
        ul["cpu"] == (D.STARTUP_CPU_S + 3, D.STARTUP_CPU_S + 4)
        and ul["fsize"] == (1000, 1000)
        and ul["nofile"] == (50, 50)
    )
    assert ul["core"] == (0, 0)
    assert "size=65536" in c["tmpfs"]["/tmp"]


def test_code_and_nonce_travel_on_stdin_never_in_argv():
    c = cfg()
    assert c["command"] == ["python3", "-I", "-B", "-c", D.BOOT]
    assert c["stdin_open"] is True and c["detach"] is False  # the SDK's way to ask for StdinOnce
    job = json.loads(D.job_input("print(1)", 7, {"nonce": "n0nce"}, Limits(cpu_time_s=2.5)))
    assert job == {
        "code": "print(1)",
        "seed": 7,
        "spec": {"nonce": "n0nce"},
        "marker": D.REPORT_MARKER,
        "ready": D.READY_MARKER,
        "cpu_s": 3,
    }


def test_a_job_has_an_init_and_a_bounded_log():
    c = cfg()
    assert c["init"] is True
    assert c["log_config"] == {"type": "local", "config": {"max-size": "1m", "max-file": "1", "compress": "false"}}


def _frames(*parts: tuple[int, bytes]) -> bytes:
    return b"".join(D.FRAME_HEADER.pack(kind, len(data)) + data for kind, data in parts)


def _read(stream: bytes, budget: int, chunk: int = 3) -> tuple[bytes, bytes, bool, bool]:
    # The container side of a socketpair writes ``stream`` in small pieces, splitting headers and frames.
    ours, theirs = socket.socketpair()
    with ours, theirs:
        for i in range(0, len(stream), chunk):
            theirs.sendall(stream[i : i + chunk])
        theirs.shutdown(socket.SHUT_WR)
        return D.read_frames(ours, time.monotonic(), 5, budget)[:4]


def test_frames_are_split_into_stdout_and_stderr_however_they_arrive():
    ready = (2, D.READY_MARKER.encode())
    stream = _frames(ready, (1, b"hello "), (2, b"oops\n"), (1, b"world\n"), (2, b""))
    assert _read(stream, 1000) == (b"hello world\n", b"oops\n", False, False)
    assert _read(stream, 1000, chunk=1) == (b"hello world\n", b"oops\n", False, False)


def test_output_past_the_budget_ends_the_read_and_keeps_only_the_budget():
    flood = _frames((2, D.READY_MARKER.encode()), *[(1, b"x" * 1000)] * 50)
    out, err, timed_out, overflow = _read(flood, 2500, chunk=4096)
    assert overflow and not timed_out and out == b"x" * 2500 and err == b""


def test_the_wall_clock_starts_when_the_job_is_ready_and_a_silent_job_past_it_is_a_timeout():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(_frames((2, D.READY_MARKER.encode())))
        started = time.monotonic() - 100  # a start-up far longer than the job's wall limit does not count
        out, err, timed_out, overflow, began = D.read_frames(ours, started, 0.05, 100)
    assert (out, err, timed_out, overflow) == (b"", b"", True, False)
    assert began - started >= 100


@pytest.mark.parametrize(
    "args,status",
    [
        ((0, False, False, False, ""), "ok"),
        ((1, False, False, False, "Traceback\nValueError: x"), "error"),
        ((1, False, False, False, "MemoryError"), "memory_limit"),
        ((137, True, False, False, ""), "memory_limit"),
        ((137, False, False, False, ""), "killed"),
        ((152, False, False, False, ""), "cpu_limit"),  # SIGXCPU: the CPU limit
        ((None, False, True, False, ""), "timeout"),
        ((0, False, False, True, ""), "output_limit"),
    ],
)
def test_what_docker_reports_gets_the_sandbox_backends_status(args, status):
    assert classify(D.job_end(*args), Limits()) == status


def test_a_signal_shows_as_a_signal_not_an_exit_code():
    end = D.job_end(137, False, False, False, "")
    assert (end.exit_code, end.signal) == (None, 9)
    end = D.job_end(3, False, False, False, "")
    assert (end.exit_code, end.signal) == (3, None)


def test_its_config_comes_from_the_runner_config():
    runner = RunnerConfig.from_env(
        {"RUNNER_DOCKER_IMAGE": "img:1", "DOCKER_HOST": "unix:///x", "RUNNER_POOL": "3", "RUNNER_QUEUE": "5"}
    )
    c = D.DockerConfig.from_config(runner)
    assert (c.image, c.base_url, c.pool_size, c.queue) == ("img:1", "unix:///x", 3, 5)
    b = D.DockerBackend(c)
    assert {k: b.stats()[k] for k in ("size", "queue", "image", "docker_host")} == {
        "size": 3,
        "queue": 5,
        "image": "img:1",
        "docker_host": "unix:///x",
    }


async def test_checks_of_the_wrong_type_are_refused():
    b = D.DockerBackend(DOCKER)
    b.client = object()
    with pytest.raises(InvalidRequest):
        await b.run("x", checks=object())


# Graded jobs. The program the container runs is run here directly (no engine needed): what is
# under test is the report it leaves after the learner's stderr and the verdict made outside.

CHECKS = grading.ExerciseChecks(
    (
        grading.Check(id="grad-value", expr="x.grad", kind="close", expect=4.0),
        grading.Check(id="grads", expr="grads", kind="close", expect=[4.0, 4.0]),
    )
)
SOLUTION = """import torch
x = torch.tensor(2.0, requires_grad=True)
grads = []
for step in range(2):
    x.grad = None
    (x ** 2).backward()
    grads.append(x.grad.item())
import sys; print("some stderr", file=sys.stderr)
"""


def _container_program(code: str) -> tuple[bytes, bytes | None, str]:
    nonce = grading.new_nonce()
    command = D.container_config(Limits(), dataclasses.replace(DOCKER, python=sys.executable), 63400)["command"]
    job = D.job_input(code, 1, grading.job_spec(CHECKS, nonce))
    done = subprocess.run(command, input=job, capture_output=True, timeout=120, cwd=tempfile.gettempdir())
    assert D.BOOT in command and done.returncode in (0, 1)
    assert done.stderr.startswith(D.READY_MARKER.encode())  # torch imported, the learner's code next
    stderr, report = D.split_report(done.stderr.removeprefix(D.READY_MARKER.encode()))
    return stderr, report, nonce


def test_split_report_needs_exactly_one_marker():
    marker = D.REPORT_MARKER.encode()
    assert D.split_report(b"oops\n" + marker + b"{}") == (b"oops", b"{}")
    assert D.split_report(b"no report") == (b"no report", None)
    assert D.split_report(marker + b"{}" + b"\n" + marker + b"{}")[1] is None


def test_a_graded_container_job_reports_values_the_runner_grades_outside():
    stderr, report, nonce = _container_program(SOLUTION)
    assert stderr == b"some stderr\n"  # exactly what the learner wrote
    outcomes, passed = grading.verify(CHECKS, "ok", report, nonce)
    assert passed and [o.passed for o in outcomes] == [True, True]
    assert b"4.0" in report and b"expect" not in report  # values travel out, expectations never in


def test_a_wrong_answer_in_a_container_fails_its_check():
    _stderr, report, nonce = _container_program(SOLUTION.replace("    x.grad = None\n", ""))
    outcomes, passed = grading.verify(CHECKS, "ok", report, nonce)
    assert not passed and [o.passed for o in outcomes] == [False, False]


@pytest.mark.parametrize(
    "cheat",
    [
        'import sys; print("PASSED")',
        'import sys; sys.stderr.write("\\n" + "\\x1ecoursebot-report\\x1e"); sys.stderr.flush()\n' + SOLUTION,
        "import sys; print(sys.argv, sys.stdin.read())",
        "import os\nos._exit(0)",
    ],
)
def test_cheating_in_a_container_never_passes(cheat):
    _stderr, report, nonce = _container_program(cheat)
    assert not grading.verify(CHECKS, "ok", report, nonce)[1]


def test_the_job_cannot_read_its_input_again():
    stderr, _report, _nonce = _container_program("import sys\nprint(repr(sys.stdin.read()), sys.argv, file=sys.stderr)")
    assert stderr.decode().strip() == "'' ['-c']"


@pytest.fixture
async def engine_backend():
    """The backend on this machine's engine, with the job image built from this checkout."""
    backend = D.DockerBackend(dataclasses.replace(DOCKER, image=engine.image("job")))
    await asyncio.wait_for(backend.start(), 60)
    yield backend
    await backend.close()


async def _anonymous_volumes() -> set[str]:
    """The engine's anonymous volumes (64 hex digits), the kind a job's container would leave; named ones are
    other tests' (the engine may be shared)."""
    names = (await engine.docker("docker", "volume", "ls", "-q"))[1].split()
    return {name for name in names if re.fullmatch(r"[0-9a-f]{64}", name)}


async def test_jobs_run_graded_and_bounded_in_the_job_image_on_a_real_engine(engine_backend):
    b = engine_backend
    volumes = await _anonymous_volumes()
    r = await b.run("print(6 * 7)")
    assert r.status == "ok" and r.stdout == "42\n"
    r = await b.run("import socket; socket.create_connection(('1.1.1.1', 53), timeout=1)")
    assert r.status == "error"
    r = await b.run("import os; print(os.path.exists('/app/lessons'), os.getuid())")
    first, count = b.stats()["job_uids"]
    assert r.stdout.startswith("False ") and first <= int(r.stdout.split()[1]) < first + count, r.stdout
    r = await b.run(SOLUTION, checks=CHECKS)
    assert r.passed and r.stderr == "some stderr\n"
    r = await b.run('print("PASSED")', checks=CHECKS)
    assert not r.passed
    r = await b.run("while True: pass", limits={"cpu_time_s": 1, "wall_time_s": 20})
    # The CPU limit (SIGXCPU), torch's start not counted: said by the signal, not by a wall time a busy host stretches.
    assert r.status == "cpu_limit" and r.signal == signal.SIGXCPU, r
    r = await b.run("import sys\nwhile True: sys.stdout.write('x' * 65536)", limits={"output_bytes": 4096})
    assert r.status == "output_limit" and len(r.stdout) == 4096
    r = await b.run("import time; time.sleep(30)", limits={"wall_time_s": 2})
    assert r.status == "timeout" and r.duration_ms < 25_000  # stopped, not slept out (however busy the host)
    r = await b.run("import os, time\nos.close(1); os.close(2)\ntime.sleep(30)", limits={"wall_time_s": 2})
    assert r.status == "timeout" and r.duration_ms < 25_000  # closing its output does not end a job
    assert await _anonymous_volumes() == volumes  # each job's volumes went with it
    _, left, _ = await engine.docker("docker", "ps", "-aq", "--filter", "label=coursebot.runner=job")
    assert left.strip() == ""


async def test_a_missing_image_is_refused_at_start_in_one_line():
    engine.require_engine()
    b = D.DockerBackend(dataclasses.replace(DOCKER, image="coursebot-job:does-not-exist"))
    with pytest.raises(SandboxUnavailable) as refused:
        await b.start()
    await b.close()
    assert "coursebot-job:does-not-exist is missing" in str(refused.value) and "--target job" in str(refused.value)


# --- issue 21: the job container as the sandbox's jobs: a uid of its own, the seccomp policy, /proc and /sys masked


def test_a_job_container_gets_the_sandboxes_seccomp_policy_and_a_masked_proc_and_sys():
    c = cfg()
    profile = json.loads(next(o for o in c["security_opt"] if o.startswith("seccomp="))[len("seccomp=") :])
    assert profile == seccomp.docker_profile()
    rules = {(name, rule["action"]) for rule in profile["syscalls"] for name in rule["names"] if "args" not in rule}
    for name in ("sync", "syncfs", "io_uring_setup", "ptrace", "fadvise64", "readahead", "flock", "mount"):
        assert (name, "SCMP_ACT_ERRNO") in rules, name
    assert ("read", "SCMP_ACT_ALLOW") in rules and profile["defaultErrnoRet"] == 38  # ENOSYS: glibc falls back
    masked = D.host_extras()["MaskedPaths"]
    assert "/sys" in masked and {"/proc/meminfo", "/proc/cmdline", "/proc/loadavg", "/proc/sys"} <= set(masked)
    assert not any(p == "/proc/self" or p.split("/")[-1].isdigit() for p in masked)  # its own processes stay


def _a_job_process(uids: range) -> int | None:
    """The pid of a python running as one of ``uids`` (ours: the engine is shared, other runners' jobs are not)."""
    import os

    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = open(f"/proc/{entry}/status").read()
            cmdline = open(f"/proc/{entry}/cmdline", "rb").read()
        except OSError:
            continue
        uid = int(status.split("\nUid:\t", 1)[1].split()[0])
        if uid in uids and b"python" in cmdline:
            return int(entry)
    return None


async def test_a_host_process_of_another_uid_cannot_attach_to_a_job_or_read_its_memory(engine_backend):
    """Jobs ran as the host's nobody (65534): any host process running as nobody could read and rewrite a job's
    memory, a reference solution's included. A job now runs as a uid no host process uses."""
    import os

    if os.geteuid() != 0 or not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("trying other host uids needs root and /usr/bin/python3")
    b = engine_backend
    job = asyncio.ensure_future(
        b.run(
            "import os, time\nsecret = b'S3CRET' * 1000\nprint(os.getuid(), flush=True)\ntime.sleep(8)",
            limits={"wall_time_s": 60},
        )
    )
    try:
        first, count = b.stats()["job_uids"]
        pid = None
        for _ in range(600):  # the container starts (a cold interpreter: seconds)
            pid = _a_job_process(range(first, first + count))
            if pid is not None:
                break
            await asyncio.sleep(0.05)
        assert pid is not None, "the job's container never started"
        attempt = (
            "import ctypes, os, sys\npid = int(sys.argv[1])\n"
            "try:\n    open(f'/proc/{pid}/mem', 'rb').close()\n    print('MEM OPEN')\n"
            "except OSError as e:\n    print('mem', e.errno)\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "print('attach', libc.ptrace(16, pid, None, None), ctypes.get_errno())\n"  # PTRACE_ATTACH
        )
        for uid in (65534, 12345):  # nobody (the jobs' old uid, the daemons'), and any other
            argv = ["/usr/bin/python3", "-c", attempt, str(pid)]  # one every uid may run (not the venv's, under /root)
            done = await asyncio.to_thread(subprocess.run, argv, user=uid, group=uid, capture_output=True, text=True)
            assert "MEM OPEN" not in done.stdout and "attach -1 1" in done.stdout, (uid, done.stdout, done.stderr)
    finally:
        r = await job
    assert r.status == "ok" and first <= int(r.stdout) < first + count and int(r.stdout) != 65534, r


async def test_in_a_real_job_container_sync_io_uring_and_the_hosts_proc_are_out_of_reach(engine_backend):
    probe = (
        "import ctypes, os, threading\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "def call(nr, *args):\n    return libc.syscall(nr, *args), ctypes.get_errno()\n"
        "print('sync', call(162), 'io_uring', call(425, 1, 0), 'future', call(999))\n"
        "print('meminfo', repr(open('/proc/meminfo').read()), 'sys', os.listdir('/sys'))\n"
        "print('boot_id', os.path.exists('/proc/sys/kernel/random/boot_id'))\n"
        "t = threading.Thread(target=print, args=('a thread',))\nt.start()\nt.join()\n"
    )
    r = await engine_backend.run(probe)
    assert r.status == "ok", r
    assert r.stdout.splitlines() == [
        "sync (-1, 1) io_uring (-1, 1) future (-1, 38)",  # EPERM, EPERM, ENOSYS (as in the sandbox)
        "meminfo '' sys []",
        "boot_id False",
        "a thread",  # clone3 is ENOSYS, so glibc's threads fall back to clone
    ], r.stdout
