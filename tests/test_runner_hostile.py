"""Hostile snippets against the REAL sandbox: each is contained with the right
status, and the runner keeps serving correctly after all of them.

Network cases only ever aim at this machine (127.0.0.1 listeners, Unix and
abstract sockets the test itself opens): nothing leaves the host even if the
sandbox were broken.  Fork-bomb cases run only after a BOUNDED fork test has
proved, in this very environment, that the pids limit binds.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import re
import secrets
import signal
import socket
import struct
import sys
import tempfile

import pytest
import pytest_asyncio

from runner import sandbox
from runner.client import RunnerClient, Unauthorized
from runner.grading import Check, ExerciseChecks
from runner.service import Service
from tests.runner_cases.helpers import repo_root, start_pool

pytestmark = pytest.mark.asyncio(loop_scope="module")

PROVEN = {"pids": False}
FAST = {"wall_time_s": 3, "cpu_time_s": 2}
ROOMY = {"wall_time_s": 15}  # jobs that sleep to overlap with another: never cut short on a busy machine


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env():
    os.environ["TELEGRAM_BOT_TOKEN"] = "123456:hostile-test-secret"
    tmp = tempfile.mkdtemp(prefix="coursebot-hostile-")
    planted = os.path.join(repo_root(), f".hostile-planted-{secrets.token_hex(4)}")
    with open(planted, "w") as f:
        f.write("secret")
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    unix_path = os.path.join(tmp, "runner.sock")
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(unix_path)
    unix.listen(8)
    abstract_name = f"coursebot-hostile-{secrets.token_hex(4)}"
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0" + abstract_name)
    abstract.listen(8)
    pool = await start_pool(pool_size=2, queue=8)
    yield {
        "pool": pool,
        "port": tcp.getsockname()[1],
        "unix": unix_path,
        "abstract": abstract_name,
        "planted": planted,
        "root": repo_root(),
    }
    await pool.close()
    for s in (tcp, unix, abstract):
        s.close()
    os.unlink(planted)
    os.unlink(unix_path)
    os.rmdir(tmp)
    del os.environ["TELEGRAM_BOT_TOKEN"]


async def run(env, code, limits=None, **kw):
    return await env["pool"].run(
        code.format(**{k: v for k, v in env.items() if k != "pool"}), limits={**FAST, **(limits or {})}, **kw
    )


async def cgroups_drained(pool, timeout=5.0):
    for _ in range(int(timeout / 0.05)):
        if all(not c.pids() for c in pool.tree.slots if c not in _held(pool)):
            return True
        await asyncio.sleep(0.05)
    return False


def _held(pool):
    # cells holding a prepared (idle, waiting) sandbox are busy by design
    return [r.cgroup for r in pool._ready]


# --- the bounded proof comes first ------------------------------------------


async def test_bounded_fork_test_proves_pids_limit(env):
    r = await run(
        env,
        "import os, time\nn = 0\nkids = []\nfor _ in range(200):\n"
        "    try:\n        pid = os.fork()\n    except OSError:\n        continue\n"
        "    if pid == 0:\n        time.sleep(0.5)\n        os._exit(0)\n"
        "    kids.append(pid)\nfor k in kids:\n    os.waitpid(k, 0)\nprint(len(kids))",
        limits={"max_processes": 16, "wall_time_s": 15, "cpu_time_s": 10},
    )
    assert r.status == "ok", r
    assert 0 < int(r.stdout) <= 15
    PROVEN["pids"] = True


def _need_proof():
    if not PROVEN["pids"]:
        pytest.skip("the bounded fork test did not prove that the pids limit binds here")


async def test_fork_bomb(env):
    _need_proof()
    r = await run(
        env,
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        limits={"max_processes": 16, "wall_time_s": 2},
    )
    assert r.status in ("timeout", "cpu_limit", "killed")
    assert await cgroups_drained(env["pool"])


async def test_fork_bomb_with_threads(env):
    _need_proof()
    r = await run(
        env,
        "import threading, time\n"
        "def spawn():\n    while True:\n        try:\n"
        "            threading.Thread(target=spawn, daemon=True).start()\n"
        "        except RuntimeError:\n            time.sleep(0.01)\nspawn()\n",
        limits={"max_processes": 16, "wall_time_s": 2},
    )
    assert r.status in ("timeout", "cpu_limit", "killed", "error")
    assert await cgroups_drained(env["pool"])


async def test_setsid_daemon_does_not_outlive_its_job(env):
    r = await run(
        env,
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n"
        "    if os.fork() == 0:\n        time.sleep(60)\n    os._exit(0)\n"
        "time.sleep(0.2)\nprint('parent done')\n",
    )
    assert r.status == "ok" and r.stdout == "parent done\n"
    assert await cgroups_drained(env["pool"])


# --- the table of hostile snippets -----------------------------------------


def _top_under_root(path: str) -> set[str]:
    parts = os.path.realpath(path).split(os.sep)
    return {parts[2]} if len(parts) > 2 and parts[1] == "root" else set()


# What /root may show inside a job: only the first folder of the interpreter's and the
# virtual environment's paths (e.g. .pyenv, or .cache when the venv lives there), nothing else.
_INTERPRETER_UNDER_ROOT = _top_under_root(sys.base_prefix) | _top_under_root(sys.prefix)

CASES = [
    # name, code, allowed statuses, predicate on the result, extra limits
    # The CPU limit, not the clock's, stops a busy loop (a wall limit far out, however loaded the host is).
    ("cpu_loop", "while True:\n    pass", {"cpu_limit"}, None, {"cpu_time_s": 1, "wall_time_s": 60}),
    ("sleep", "import time\ntime.sleep(60)", {"timeout"}, None, {"wall_time_s": 1}),
    (
        "spinning_threads",
        "import threading\ndef spin():\n    while True: pass\n"
        "for _ in range(4):\n    threading.Thread(target=spin).start()\n",
        {"cpu_limit"},
        None,
        {"cpu_time_s": 1, "wall_time_s": 60},
    ),
    (
        "ignored_signals",
        "import signal\nfor s in (signal.SIGXCPU, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
        "    signal.signal(s, signal.SIG_IGN)\nwhile True: pass",
        {"cpu_limit"},
        None,
        {"cpu_time_s": 1, "wall_time_s": 60},
    ),
    ("memory_bytearray", "b = bytearray(3 * 2**30)", {"memory_limit"}, None, {"memory_bytes": 256 * 2**20}),
    (
        "memory_list_growth",
        "a = []\nwhile True:\n    a.append(' ' * 10**6)",
        {"memory_limit"},
        None,
        {"memory_bytes": 256 * 2**20},
    ),
    ("torch_empty_huge", "import torch\nx = torch.empty(10**11)", {"memory_limit"}, None, {}),
    (
        "torch_ones_16gb",
        "import torch\nx = torch.ones(4 * 10**9)",
        {"memory_limit"},
        None,
        {"memory_bytes": 256 * 2**20, "wall_time_s": 10},
    ),
    (
        "stdout_flood",
        "while True:\n    print('x' * 1000)",
        {"output_limit"},
        lambda r: r.truncated and len(r.stdout) <= 64 * 1024,
        {},
    ),
    (
        "stderr_flood",
        "import sys\nwhile True:\n    sys.stderr.write('e' * 4096)",
        {"output_limit"},
        lambda r: r.truncated,
        {},
    ),
    (
        "binary_output",
        "import sys\nsys.stdout.buffer.write(bytes(range(256)) * 4)\nsys.stdout.flush()",
        {"ok"},
        lambda r: "\ufffd" in r.stdout and len(r.stdout) > 0,
        {},
    ),
    (
        "disk_fill",
        "with open('big', 'wb') as f:\n    while True:\n        f.write(b'x' * 2**20)",
        {"error"},
        lambda r: "No space left" in r.stderr or "File too large" in r.stderr,
        {},
    ),
    (
        "flood_of_small_files",
        "import os\nfor i in range(100000):\n    open(f'/tmp/f{{i}}', 'w').close()",
        {"error"},
        lambda r: "No space left" in r.stderr,
        {},
    ),
    (
        "write_outside_tmpfs",
        "open('/usr/lib/x', 'w')",
        {"error"},
        lambda r: "Read-only" in r.stderr or "Permission" in r.stderr,
        {},
    ),
    (
        "read_root",
        "import os\nprint(sorted(os.listdir('/root')) if os.path.exists('/root') else [])\n"
        "print(os.path.exists('/root/.bashrc'), os.path.exists('/root/.ssh'))",
        {"ok"},
        lambda r: (
            r.stdout.splitlines()[1] == "False False" and set(eval(r.stdout.splitlines()[0])) <= _INTERPRETER_UNDER_ROOT
        ),
        {},
    ),
    ("etc_shadow", "print(open('/etc/shadow').read())", {"error"}, lambda r: "FileNotFoundError" in r.stderr, {}),
    (
        "etc_is_minimal",
        "import os\nprint(sorted(os.listdir('/etc')))",
        {"ok"},
        lambda r: set(eval(r.stdout)) <= {"passwd", "group", "ld.so.cache"},
        {},
    ),
    (
        "the_repo_and_data",
        "import os\nprint([os.path.exists(p) for p in ('{root}/lessons', '{root}/data', "
        "'{root}/bot', '{root}/runner', '{root}/.git', '{planted}', '/home', '/work/main/data')])",
        {"ok"},
        lambda r: "True" not in r.stdout,
        {},
    ),
    (
        "environment",
        "import os\nprint(sorted(os.environ))\nprint(open('/proc/self/environ', 'rb').read())\n"
        "print(open('/proc/1/environ', 'rb').read() if os.access('/proc/1/environ', os.R_OK) else b'')",
        {"ok", "error"},
        lambda r: "TELEGRAM" not in r.stdout and "hostile-test-secret" not in r.stdout,
        {},
    ),
    (
        "other_processes",
        "import os\nprint(sorted(p for p in os.listdir('/proc') if p.isdigit()))\n"
        "try:\n    open('/proc/1/mem', 'rb').read(1)\n    print('mem open')\n"
        "except OSError as e:\n    print(type(e).__name__)",
        {"ok"},
        lambda r: r.stdout.splitlines()[0] == "['2']" and "mem open" not in r.stdout,
        {},
    ),
    (
        "ptrace_parent",
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print(os.getppid(), libc.ptrace(16, 1, 0, 0), ctypes.get_errno())",
        {"ok"},
        lambda r: r.stdout.split()[:2] == ["0", "-1"],
        {},
    ),
    # The init ignores the signal; when the runner is root the job (its slot's uid, not the init's) may not send it.
    (
        "kill_init",
        "import os\nos.kill(1, 9)\nprint('still here')",
        {"ok", "error"},
        lambda r: r.stdout == "still here\n" or (os.geteuid() == 0 and "PermissionError" in r.stderr),
        {},
    ),
    ("kill_parent", "import os\nos.kill(os.getppid(), 9)\nprint('alive')", {"ok", "killed"}, None, {}),
    ("kill_everything", "import os\nos.kill(-1, 9)\nprint('alive')", {"ok", "killed", "error"}, None, {}),
    (
        "network_by_ip",
        "import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\nprint('CONNECTED')",
        {"error"},
        lambda r: "CONNECTED" not in r.stdout,
        {},
    ),
    (
        "network_dns",
        "import socket\nprint(socket.getaddrinfo('example.com', 80))",
        {"error"},
        lambda r: "gaierror" in r.stderr or "Error" in r.stderr,
        {},
    ),
    (
        "raw_and_netlink_sockets",
        "import socket\nfor fam, kind in ((socket.AF_INET, socket.SOCK_RAW), "
        "(socket.AF_NETLINK, socket.SOCK_RAW), (socket.AF_PACKET, socket.SOCK_RAW)):\n"
        "    try:\n        socket.socket(fam, kind)\n        print('OPENED')\n    except OSError as e:\n"
        "        print(e.errno)",
        {"ok"},
        lambda r: "OPENED" not in r.stdout,
        {},
    ),
    (
        "unix_socket_of_the_runner",
        "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('{unix}')\nprint('CONNECTED')",
        {"error"},
        lambda r: "CONNECTED" not in r.stdout,
        {},
    ),
    (
        "abstract_unix_socket",
        "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('\\0{abstract}')\nprint('CONNECTED')",
        {"error"},
        lambda r: "CONNECTED" not in r.stdout,
        {},
    ),
    (
        "run_dir",
        "import os\nprint(os.path.exists('/run'), os.path.exists('/var/run'))",
        {"ok"},
        lambda r: r.stdout == "False False\n",
        {},
    ),
    (
        "inherited_fds",
        "import os\nok = []\nfor fd in range(3, 256):\n    try:\n        os.fstat(fd)\n"
        "        ok.append(fd)\n    except OSError:\n        pass\nprint(ok)",
        {"ok"},
        lambda r: eval(r.stdout) in ([3], [3, 4]),
        {},
    ),
    (
        "write_into_inherited_fds",
        "import os\nfor fd in range(3, 256):\n    try:\n        os.write(fd, b'{{\"status\": 0}}')\n"
        "    except OSError:\n        pass\nprint('done')",
        {"ok", "error"},
        lambda r: r.stdout == "done\n",
        {},
    ),
    ("segfault", "import ctypes\nctypes.string_at(0)", {"killed"}, lambda r: r.signal == signal.SIGSEGV, {}),
    (
        "runaway_recursion",
        "def f():\n    return f()\nf()",
        {"error"},
        lambda r: "RecursionError" in r.stderr and r.stderr.count("<snippet>") < 10,
        {},
    ),
    (
        "stack_overflow",
        "import sys\nsys.setrecursionlimit(10**7)\ndef f(n):\n    return f(n + 1)\nf(0)",
        {"killed", "error", "memory_limit"},
        None,
        # ~0.6 s of CPU filling 512 MiB of stack, alone; 2 s once in CI with the other test process paging hard
        # (page faults count as CPU time): room for a busy machine, so the stack's limit is what stops it.
        {"wall_time_s": 15, "cpu_time_s": 10},
    ),
    (
        "forged_protocol_frames",
        "import sys, struct, json\nb = json.dumps({{'v': 1, 'id': 1, 'ok': True, "
        "'result': {{'status': 'ok'}}}}).encode()\nsys.stdout.buffer.write(struct.pack('>I', len(b)) + b)\n"
        "print('PASSED')",
        {"ok"},
        lambda r: "PASSED" in r.stdout,
        {},
    ),
    (
        "setuid_programs",
        "import os\nprint([os.path.exists(p) for p in ('/usr/bin/su', '/usr/bin/sudo', "
        "'/usr/bin/passwd', '/bin/mount')], bool(os.statvfs('/usr/lib').f_flag & os.ST_NOSUID),\n"
        "      open('/proc/self/status').read().split('NoNewPrivs:')[1].split()[0])\nos.setuid(0)",
        {"error"},
        lambda r: (
            r.stdout == "[False, False, False, False] True 1\n"
            and ("PermissionError" in r.stderr or "Invalid argument" in r.stderr)
        ),
        {},
    ),
    (
        "mount_unshare_chroot",
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.mount(b'tmpfs', b'/mnt', b'tmpfs', 0, None), libc.unshare(0x10000000), "
        "libc.unshare(0x00020000))\nos.chroot('/tmp')",
        {"error"},
        lambda r: r.stdout.split() == ["-1", "-1", "-1"] and "PermissionError" in r.stderr,
        {},
    ),
    (
        "keyring_and_bpf",
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.syscall(250, 0, 0, 0, 0), libc.syscall(321, 0, 0, 0), libc.syscall(425, 1, 0))",
        {"ok"},
        lambda r: r.stdout.split() == ["-1", "-1", "-1"],
        {},
    ),
    (
        "torch_set_num_threads_256",
        "import torch\ntorch.set_num_threads(256)\nprint((torch.ones(512, 512) @ torch.ones(512, 512)).sum().item())",
        {"ok", "killed", "error", "timeout"},  # held whichever way: a busy host may stop it at its wall limit
        None,
        {"max_processes": 32},
    ),
    (
        "torch_multiprocessing",
        "import torch.multiprocessing as mp\n"
        "def f(q):\n    q.put(7)\nif __name__ == '__main__':\n    ctx = mp.get_context('fork')\n"
        "    q = ctx.Queue()\n    p = ctx.Process(target=f, args=(q,))\n    p.start()\n"
        "    print(q.get(timeout=5))\n    p.join()",
        {"ok"},
        lambda r: r.stdout == "7\n",
        {"wall_time_s": 8},
    ),
    (
        "sync_storm",
        # sync() returns nothing (os.sync() cannot fail), so ask the kernel's answer through syscall().
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "rcs = set((libc.syscall(162), ctypes.get_errno()) for _ in range(1000))\nos.sync()\nprint(sorted(rcs))",
        {"ok"},
        lambda r: r.stdout == f"[(-1, {errno.EPERM})]\n",
        {},
    ),
    (
        "host_load_and_memory",
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nbuf = ctypes.create_string_buffer(256)\n"
        "print(libc.sysinfo(buf), ctypes.get_errno(), bytes(buf[:64]).count(0))",
        {"ok"},
        lambda r: r.stdout == f"-1 {errno.EPERM} 64\n",
        {},
    ),
    (
        "syscalls_newer_than_the_table",
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nout = set()\nfor nr in range(451, 480):\n"
        "    out.add((libc.syscall(nr, 0, 0, 0, 0, 0), ctypes.get_errno()))\nprint(sorted(out))",
        {"ok"},
        lambda r: r.stdout == f"[(-1, {errno.ENOSYS})]\n",
        {},
    ),
    (
        "realtime_and_nice",
        "import os, resource\n"
        "print(resource.getrlimit(resource.RLIMIT_RTPRIO), resource.getrlimit(resource.RLIMIT_NICE))\n"
        "for f in (lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)), lambda: os.nice(-5),\n"
        "          lambda: resource.setrlimit(resource.RLIMIT_RTPRIO, (1, 1))):\n"
        "    try:\n        f()\n        print('ALLOWED')\n    except (OSError, ValueError) as e:\n"
        "        print(type(e).__name__)",
        {"ok"},
        lambda r: r.stdout.splitlines()[0] == "(0, 0) (0, 0)" and "ALLOWED" not in r.stdout,
        {},
    ),
    (
        "read_stdin",
        "import sys\nprint(repr(sys.stdin.read()))\ninput()",
        {"error"},
        lambda r: r.stdout == "''\n" and "EOFError" in r.stderr,
        {},
    ),
]


@pytest.mark.parametrize("name,code,statuses,pred,limits", CASES, ids=[c[0] for c in CASES])
async def test_hostile(env, name, code, statuses, pred, limits):
    r = await run(env, code, limits)
    assert r.status in statuses, (name, r)
    if pred is not None:
        assert pred(r), (name, r)


# --- what /proc shows ----------------------------------------------------------------------------

HOST_WIDE_PROC = (
    "/proc/cmdline",
    "/proc/config.gz",
    "/proc/sys/kernel/random/boot_id",
    "/proc/loadavg",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/uptime",
    "/proc/mounts",
    "/proc/version",
    "/proc/kallsyms",
    "/proc/sys",
)


async def test_proc_shows_the_jobs_processes_and_nothing_of_the_host(env):
    r = await run(
        env,
        "import os\nprint(sorted(x for x in os.listdir('/proc') if not x.isdigit()))\n"
        f"for p in {HOST_WIDE_PROC!r}:\n    print(p, os.path.exists(p))\n"
        "print(os.getloadavg() if os.path.exists('/proc/loadavg') else 'no load')",
    )
    assert r.status == "ok", r
    lines = r.stdout.splitlines()
    assert lines[0] == "['self', 'thread-self']"
    assert lines[1:-1] == [f"{p} False" for p in HOST_WIDE_PROC]
    assert lines[-1] == "no load"


# --- CPU: accounted and bounded per job, whatever the number of its processes --------------------------


async def test_a_job_of_many_processes_is_held_to_its_cpu_limit_and_reports_what_it_burned(env):
    """RLIMIT_CPU is per process: three spinning children burned ~3x the limit and the job reported ~10 ms."""
    r = await run(
        env,
        "import os\nfor _ in range(3):\n    if os.fork() == 0:\n        while True:\n            pass\n"
        "os.wait()\nprint('a child ended')",
        limits={"cpu_time_s": 2, "wall_time_s": 20},
    )
    assert r.status == "cpu_limit", r
    assert 1900 <= r.cpu_time_ms <= 2600, r
    assert r.duration_ms < 15000, r


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="pinning two jobs apart needs two CPUs")
async def test_two_concurrent_jobs_run_on_cpus_of_their_own(env):
    code = (
        "import os, time\nbefore = sorted(os.sched_getaffinity(0))\n"
        "try:\n    os.sched_setaffinity(0, range(os.cpu_count()))\nexcept OSError:\n    pass\n"
        "time.sleep(1)\nprint(before, sorted(os.sched_getaffinity(0)))"
    )
    a, b = await asyncio.gather(*(run(env, c, ROOMY) for c in (code, code)))
    assert a.status == "ok" and b.status == "ok", (a, b)
    (a_before, a_after), (b_before, b_after) = (eval(r.stdout.replace("] [", "], [")) for r in (a, b))
    assert a_before == a_after and b_before == b_after  # a job cannot widen its own CPUs
    assert a_before and b_before and not set(a_before) & set(b_before), (a.stdout, b.stdout)


# --- covert channels between concurrent jobs --------------------------------------------------------

# A file every job can read: the interpreter's own os.py, bound read-only from the host.
SHARED_FILE = "import os\nshared = os.__file__\n"


async def test_two_concurrent_jobs_cannot_signal_through_locks_on_a_shared_file(env):
    """flock() on a shared read-only file carried bits between two jobs; every kind of lock is refused."""
    holder = SHARED_FILE + (
        "import fcntl, time\nfd = os.open(shared, os.O_RDONLY)\n"
        "for name, lock in (('flock', lambda: fcntl.flock(fd, fcntl.LOCK_SH)),\n"
        "                   ('posix', lambda: fcntl.lockf(open(shared, 'rb'), fcntl.LOCK_SH)),\n"
        "                   ('ofd', lambda: fcntl.fcntl(fd, 37, bytes(32)))):\n"
        "    try:\n        lock()\n        print(name, 'LOCKED', flush=True)\n"
        "    except OSError as e:\n        print(name, 'refused', e.errno, flush=True)\ntime.sleep(2.5)"
    )
    probe = SHARED_FILE + (
        "import fcntl, time\ntime.sleep(0.8)\nfd = os.open(shared, os.O_RDONLY)\n"
        "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n    print('flock free')\n"
        "except BlockingIOError:\n    print('flock BUSY: a bit from the other job')\n"
        "except OSError as e:\n    print('flock refused', e.errno)\n"
        "import struct\nq = struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 0, 0)\n"
        "try:\n    r = fcntl.fcntl(fd, fcntl.F_GETLK, q)\n"
        "    print('getlk', 'BUSY' if struct.unpack('hhqqi', r)[0] != fcntl.F_UNLCK else 'free')\n"
        "except OSError as e:\n    print('getlk refused', e.errno)"
    )
    a, b = await asyncio.gather(run(env, holder, ROOMY), run(env, probe, ROOMY))
    assert a.status == "ok" and b.status == "ok", (a, b)
    assert "LOCKED" not in a.stdout and a.stdout.count("refused") == 3, a
    assert "BUSY" not in b.stdout and b.stdout.count("refused") == 2, b


# --- the disk (issue 21): a job's I/O is throttled on every block device ------------------------------------------

DISK_FLOOD = """
import mmap, os, time, torch
path = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")  # hundreds of MB, shared
fd = os.open(path, os.O_RDONLY | os.O_DIRECT)  # the disk itself, every time: no page cache between
buf, size = mmap.mmap(-1, 1 << 20), os.fstat(fd).st_size
want, done, at = {want}, 0, 0
start = time.monotonic()
while done < want:
    n = os.preadv(fd, [buf], at)
    done += n
    at = (at + n) % (size - (2 << 20)) // 4096 * 4096
print(done, time.monotonic() - start)
"""


async def test_a_job_flooding_the_disk_is_held_to_its_io_limit(env):
    """One job read the shared files in a loop: host disk reads went from 20 MiB to 1.2 GiB in 4 s."""
    from runner.limits import DISK_BYTES_PER_S

    pool = env["pool"]
    if not pool.stats()["io_limited"]:
        pytest.skip("this host's cgroups have no blkio (v1) or io (v2) controller for the runner")
    for cell in pool.tree.slots:  # the rule is on every cell, for every device
        rules = (
            (cell.dirs["unified"] / "io.max").read_text()
            if pool.tree.layout.version == 2
            else (cell.dirs["blkio"] / "blkio.throttle.read_bps_device").read_text()
        )
        assert str(DISK_BYTES_PER_S) in rules, rules
    r = await run(env, DISK_FLOOD.format(want=3 * DISK_BYTES_PER_S), {"wall_time_s": 30, "cpu_time_s": 20})
    assert r.status == "ok", r
    done, seconds = r.stdout.split()
    # Three seconds' worth at the limit cannot come in much under three seconds (a busy host only slows it).
    assert int(done) == 3 * DISK_BYTES_PER_S and float(seconds) >= 2.5, r.stdout


# Kernel counters kept per user (issue 21): each slot's jobs run as a host uid of their own (runner/uids.py).
PER_SLOT_UIDS = pytest.mark.skipif(os.geteuid() != 0, reason="per-slot uids need the runner to be root (uids.py)")


def _status_of_jobs(pool) -> list[str]:
    """/proc/PID/status of every process in the pool's cgroups, read from the host."""
    out = []
    for cell in pool.tree.slots:
        for pid in cell.pids():
            with contextlib.suppress(OSError):
                out.append(open(f"/proc/{pid}/status").read())
    return out


async def _sender_ready(pool, ready, timeout=30.0) -> None:
    """Wait until some job process shows ``ready(status text)`` from the host: the sender holds its state."""
    for _ in range(int(timeout / 0.05)):
        if any(ready(text) for text in _status_of_jobs(pool)):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the sending job never got ready")


# A sender says it holds what it sends with by its process name (PR_SET_NAME), which the host reads.
READY = "import ctypes as _c\n_c.CDLL(None).prctl(15, b'sender-ready', 0, 0, 0)\n"


async def _two_jobs(env, sender, receiver):
    """The sender first; the receiver once the host sees the sender holding what it sends with."""
    sending = asyncio.ensure_future(run(env, sender, ROOMY))
    try:
        await _sender_ready(env["pool"], lambda status: status.startswith("Name:\tsender-ready\n"))
        received = await run(env, receiver, ROOMY)
    finally:
        sent = await sending
    return sent, received


async def test_two_concurrent_jobs_cannot_signal_through_queued_signals(env):
    """SigQ (signals queued per user) showed one job's count to another, and a full one failed another's sigqueue.
    Each job counts in a user namespace of its own (and, when the runner is root, as its slot's uid)."""
    # sigqueue (not kill, which the kernel lets past the limit) is what a full queue refuses.
    queue = (
        "import ctypes, os, signal\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])\n"
        "def sigqueue():\n    if libc.sigqueue(os.getpid(), signal.SIGRTMIN, ctypes.c_void_p(0)):\n"
        "        raise OSError(ctypes.get_errno(), 'sigqueue')\n"
    )
    sender = queue + (
        "import time\nn = 0\ntry:\n    while n < 200000:\n        sigqueue()\n        n += 1\n"
        "except OSError as e:\n    print('queued', n, 'then', e.errno, flush=True)\n" + READY + "time.sleep(4)"
    )
    receiver = queue + (
        "import re\nstatus = open('/proc/self/status').read()\n"
        "print('sigq', re.search(r'SigQ:\\s+(\\d+)/(\\d+)', status).groups())\n"
        "try:\n    sigqueue()\n    print('queue ok')\nexcept OSError as e:\n    print('queue FAILED', e.errno)"
    )
    sent, received = await _two_jobs(env, sender, receiver)
    assert received.status == "ok", received
    count, limit = re.search(r"sigq \('(\d+)', '(\d+)'\)", received.stdout).groups()
    assert count == "0" and "queue ok" in received.stdout, (sent.stdout, received.stdout)
    # And a job's own share is small (RLIMIT_SIGPENDING, EAGAIN past it): all of them cannot fill the sandbox's.
    assert int(limit) == 64 and sent.status == "ok" and "queued 64 then 11" in sent.stdout, sent


@PER_SLOT_UIDS
async def test_two_concurrent_jobs_cannot_signal_through_the_pipe_buffer_quota(env):
    """Pipe buffers are counted per user: one job over fs.pipe-user-pages-soft shrank every new pipe of another."""
    sender = (
        "import os, fcntl, time\npipes = []\n"
        "try:\n    while len(pipes) < 120:\n        r, w = os.pipe()\n        pipes.append((r, w))\n"
        "        fcntl.fcntl(w, 1031, 1 << 20)\n"
        "except OSError as e:\n    print('pipes', len(pipes), 'then', e.errno, flush=True)\n" + READY + "time.sleep(4)"
    )
    receiver = (
        "import os, fcntl\nr, w = os.pipe()\nprint('size', fcntl.fcntl(w, 1032))\n"
        "try:\n    fcntl.fcntl(w, 1031, 1 << 20)\n    print('grow ok')\n"
        "except OSError as e:\n    print('grow FAILED', e.errno)"
    )
    sent, received = await _two_jobs(env, sender, receiver)
    assert sent.status == "ok" and "pipes" in sent.stdout, sent  # it went over the quota (F_SETPIPE_SZ refused)
    assert received.status == "ok" and received.stdout == "size 65536\ngrow ok\n", (sent.stdout, received.stdout)


async def test_a_job_can_neither_evict_nor_probe_shared_files_in_the_page_cache(env):
    """fadvise(DONTNEED) evicted a shared file's pages and preadv2(RWF_NOWAIT) told whether they were cached:
    a channel between jobs (and a window on what the host reads). Both are refused; mincore tells nothing."""
    shared = os.path.join(os.path.dirname(os.__file__), "turtle.py")  # a stdlib file no job reads
    with open(shared, "rb") as f:
        f.read()  # in the page cache now, as after another job or the host read it
    evict = (
        f"import ctypes, os, mmap\nfd = os.open({shared!r}, os.O_RDONLY)\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "try:\n    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)\n    print('EVICTED')\n"
        "except OSError as e:\n    print('fadvise refused', e.errno)\n"
        "if libc.readahead(fd, ctypes.c_long(0), ctypes.c_size_t(4096)):\n"
        "    print('readahead refused', ctypes.get_errno())\nelse:\n    print('READ AHEAD')\n"
        "m = mmap.mmap(fd, 4096, prot=mmap.PROT_READ)\n"
        "for advice in (21, 20, 3):  # MADV_PAGEOUT, MADV_COLD, MADV_WILLNEED\n"
        "    try:\n        m.madvise(advice)\n        print('MADVISED', advice)\n"
        "    except OSError as e:\n        print('madvise refused', e.errno)\n"
    )
    probe = (
        f"import os, ctypes, mmap\nfd = os.open({shared!r}, os.O_RDONLY)\nbuf = bytearray(4096)\n"
        "try:\n    os.preadv(fd, [buf], 0, os.RWF_NOWAIT)\n    print('PROBED cached')\n"
        "except BlockingIOError:\n    print('PROBED not cached')\n"
        "except OSError as e:\n    print('nowait refused', e.errno)\n"
        # mincore on a mapping never touched: for a file it may not write, the kernel says every page is resident.
        "libc = ctypes.CDLL(None, use_errno=True)\nlibc.mmap.restype = ctypes.c_void_p\n"
        "c = ctypes\nlibc.mmap.argtypes = [c.c_void_p, c.c_size_t, c.c_int, c.c_int, c.c_int, c.c_long]\n"
        "at = libc.mmap(None, 4096, 1, 1, fd, 0)\nvec = ctypes.create_string_buffer(1)\n"
        "print('mincore', libc.mincore(ctypes.c_void_p(at), 4096, vec), vec.raw[0] & 1)\n"
    )
    evicted = await run(env, evict)
    assert evicted.status == "ok", evicted
    assert "EVICTED" not in evicted.stdout and "MADVISED" not in evicted.stdout, evicted.stdout
    assert "READ AHEAD" not in evicted.stdout and evicted.stdout.count("refused 1\n") == 5, evicted.stdout  # EPERM
    # The host sends the bit (it may evict): cached, then not. What a job can probe must not tell the two apart.
    cached = await run(env, probe)
    fd = os.open(shared, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    not_cached = await run(env, probe)
    for probed in (cached, not_cached):
        assert probed.status == "ok" and "PROBED" not in probed.stdout and "nowait refused 1" in probed.stdout, probed
    assert cached.stdout == not_cached.stdout, (cached.stdout, not_cached.stdout)  # mincore says "resident" to both


async def test_a_job_cannot_watch_shared_files_for_other_jobs_or_the_host(env):
    """inotify on the read-only binds showed which files other jobs and host processes open.

    One job tries every way to watch the interpreter's library directory and reads what it can for two
    seconds, while a concurrent job opens files there.
    """
    watcher = (
        "import ctypes, fcntl, os, select, time\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "lib = os.path.dirname(os.__file__)\nwatches = []\n"
        "for name, call in (('inotify_init1', lambda: libc.inotify_init1(os.O_NONBLOCK)),\n"
        "                   ('inotify_init', lambda: libc.syscall(253)),\n"
        "                   ('fanotify_init', lambda: libc.syscall(300, 0, 0))):\n"
        "    fd = call()\n    print(name, fd, ctypes.get_errno())\n    if fd >= 0:\n"
        "        libc.inotify_add_watch(fd, lib.encode(), 0x20 | 0x1)  # IN_OPEN | IN_ACCESS\n"
        "        watches.append(fd)\n"
        "d = os.open(lib, os.O_RDONLY)\n"
        "try:\n    fcntl.fcntl(d, fcntl.F_NOTIFY, fcntl.DN_ACCESS | fcntl.DN_MULTISHOT)\n"
        "    print('dnotify WATCHING')\nexcept OSError as e:\n    print('dnotify refused', e.errno)\n"
        "seen = 0\nend = time.time() + 2\nwhile watches and time.time() < end:\n"
        "    for fd in select.select(watches, [], [], 0.1)[0]:\n        seen += len(os.read(fd, 4096))\n"
        "print('events', seen)"
    )
    opener = (
        "import os, time\nlib = os.path.dirname(os.__file__)\nnames = sorted(os.listdir(lib))[:50]\n"
        "end = time.time() + 2.5\nwhile time.time() < end:\n    for n in names:\n        try:\n"
        "            os.close(os.open(os.path.join(lib, n), os.O_RDONLY))\n        except OSError:\n"
        "            pass\n    time.sleep(0.05)\nprint('opened')"
    )
    r, other = await asyncio.gather(run(env, watcher, ROOMY), run(env, opener, ROOMY))
    assert r.status == "ok" and other.stdout == "opened\n", (r, other)
    assert r.stdout.splitlines() == [
        f"inotify_init1 -1 {errno.EPERM}",
        f"inotify_init -1 {errno.EPERM}",
        f"fanotify_init -1 {errno.EPERM}",
        f"dnotify refused {errno.EPERM}",
        "events 0",
    ]


# --- terminals -----------------------------------------------------------------------------------


async def test_a_job_gets_only_a_few_terminals_of_its_own(env):
    """One job once held 3,071 of the host's 3,072 pseudo-terminals; bounded here at 64 tries."""
    r = await run(
        env,
        "import os\nheld = []\nfor _ in range(64):\n    try:\n        held.append(os.openpty())\n"
        "    except OSError as e:\n        print('refused', e.errno)\n        break\nprint(len(held))",
    )
    assert r.status == "ok", r
    assert r.stdout.splitlines()[0].startswith("refused")
    assert int(r.stdout.splitlines()[-1]) == sandbox.JOB_PTYS


async def test_two_concurrent_jobs_cannot_talk_through_a_terminal(env):
    holder = (
        "import os, time\nm, s = os.openpty()\nos.set_blocking(m, False)\nprint(os.ttyname(s), flush=True)\n"
        "time.sleep(2.5)\ntry:\n    print('got', os.read(m, 100))\nexcept BlockingIOError:\n    print('nothing')"
    )
    intruder = (
        "import os, time\ntime.sleep(0.8)\nnames = sorted(os.listdir('/dev/pts'))\nprint(names)\n"
        "for n in names:\n    if n.isdigit():\n        try:\n            fd = os.open('/dev/pts/' + n, os.O_WRONLY)\n"
        "            os.write(fd, b'hi from the other job\\n')\n            print('wrote', n)\n"
        "        except OSError as e:\n            print('refused', n, e.errno)"
    )
    a, b = await asyncio.gather(run(env, holder, ROOMY), run(env, intruder, ROOMY))
    assert a.status == "ok" and b.status == "ok", (a, b)
    assert a.stdout.splitlines()[-1] == "nothing", a
    assert "wrote" not in b.stdout and b.stdout.splitlines()[0] == "['ptmx']", b


# --- floods on the descriptors the runner reads besides stdout and stderr ------------------------


@pytest.mark.parametrize("fd,name", [(3, "done"), (4, "report")])
async def test_a_flood_on_a_control_descriptor_ends_the_job_and_the_runner_reads_a_bounded_amount(env, fd, name):
    """Reading and discarding a flood burned the runner's CPU, outside every job's cgroup, until the wall limit."""
    pool = env["pool"]
    checks = ExerciseChecks(checks=(Check("x", "x", kind="equal", expect=1),))  # fd 4 exists in graded runs only
    before = pool.stats()["job_bytes_read"]
    r = await pool.run(
        f"import os\nx = 1\nchunk = b'{{' * 65536\nwhile True:\n    os.write({fd}, chunk)",
        limits={"wall_time_s": 20, "cpu_time_s": 15},
        checks=checks,
    )
    read = pool.stats()["job_bytes_read"] - before
    assert r.status == "output_limit" and not r.passed, (name, r)
    # What the budgets allow (output, "done", report) and at most one chunk more per stream.
    assert read <= 64 * 1024 + 4096 + (1 << 20) + 4 * 65536, (name, read)


@pytest.mark.parametrize("fd,name", [(2, "stderr"), (3, "done"), (4, "report")])
async def test_a_one_byte_trickle_wakes_the_runner_a_bounded_number_of_times(env, fd, name):
    """Each byte woke the runner once: a trickle cost it 15-30% of a core per job, outside every cgroup."""
    from runner.pool import FREE_WAKEUPS, TRICKLE_PAUSE_S

    pool = env["pool"]
    checks = ExerciseChecks(checks=(Check("x", "x", kind="equal", expect=1),))
    before = pool.stats()["job_wakeups"]
    r = await pool.run(
        f"import os, time\nx = 1\nend = time.monotonic() + 2\nwhile time.monotonic() < end:\n"
        f"    os.write({fd}, b' ')\n    time.sleep(0.0002)\n",
        limits={"wall_time_s": 20, "cpu_time_s": 15},
        checks=checks,
    )
    wakeups = pool.stats()["job_wakeups"] - before
    assert r.status in ("ok", "output_limit"), (name, r)
    # The free wake-ups, then one per pause for each of the job's four streams (with one to spare each).
    bound = FREE_WAKEUPS + 4 * (r.duration_ms / 1000 / TRICKLE_PAUSE_S + 2)
    assert wakeups <= bound, (name, wakeups, bound)


# --- hostile callers: the runner's API, in front of the real pool ---------------------------------------


async def test_hostile_callers_are_refused_cleanly_and_the_runner_keeps_serving(env, tmp_path):
    token = secrets.token_hex(16)
    svc = Service(env["pool"], token=token)
    path = str(tmp_path / "runner.sock")
    await svc.listen(f"unix://{path}")
    await svc.listen("tcp://127.0.0.1:0")
    tcp = next(a for a in svc.addresses() if a.startswith("tcp://"))

    async def exchange(body: bytes) -> dict:
        r, w = await asyncio.open_unix_connection(path)
        try:
            w.write(struct.pack(">I", len(body)) + body)
            await w.drain()
            header = await asyncio.wait_for(r.readexactly(4), 10)
            return json.loads(await r.readexactly(struct.unpack(">I", header)[0]))
        finally:
            w.close()

    try:
        run_with = b'{"v": 1, "id": 1, "op": "run", "code": "print(1)", "limits": {"%s": %s}}'
        for field, value, error in [
            (b"tmpfs_bytes", b"NaN", "ProtocolError"),  # not JSON
            (b"tmpfs_bytes", b"1e400", "InvalidRequest"),  # JSON, but infinite
            (b"output_bytes", b"-Infinity", "ProtocolError"),
            (b"output_bytes", b'"NaN"', "InvalidRequest"),
            (b"cpu_time_s", b"[1]", "InvalidRequest"),
        ]:
            reply = await exchange(run_with % (field, value))
            assert reply["ok"] is False and reply["error"]["type"] == error, (field, value, reply)
        deep = b'{"v": 1, "id": 2, "op": "run", "code": "x", "checks": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
        assert (await exchange(deep))["error"]["type"] == "ProtocolError"
        with pytest.raises(Unauthorized):
            await RunnerClient.connect(tcp, token="not-the-token-0123456789")
        async with RunnerClient.connect(tcp, token=token) as client:
            assert (await client.run("print('still serving')")).stdout == "still serving\n"
    finally:
        await svc.close()


async def test_files_do_not_persist_between_jobs(env):
    r = await run(
        env,
        "import os\nfor p in ('marker', '/tmp/marker', '/dev/shm/marker'):\n"
        "    open(p, 'w').write('x')\nprint(os.getcwd())",
    )
    assert r.status == "ok" and r.stdout == "/sandbox\n"
    r = await run(
        env,
        "import os\nprint([os.path.exists(p) for p in ('marker', '/tmp/marker', '/dev/shm/marker')],"
        " os.listdir('.'), os.listdir('/tmp'))",
    )
    assert r.stdout == "[False, False, False] [] []\n"


async def test_parallel_jobs_do_not_see_each_other(env):
    code = (
        "import os, time\ntag = '{tag}'\nopen('/tmp/' + tag, 'w').write(tag)\n"
        "for i in range(50):\n    print(tag)\n    time.sleep(0.005)\n"
        "print(sorted(os.listdir('/tmp')), sorted(p for p in os.listdir('/proc') if p.isdigit()))"
    )
    tags = [f"job{i}" for i in range(4)]
    rs = await asyncio.gather(*[env["pool"].run(code.replace("{tag}", t)) for t in tags])
    for t, r in zip(tags, rs, strict=False):
        lines = r.stdout.splitlines()
        assert lines[:50] == [t] * 50
        assert lines[50] == f"['{t}'] ['2']"


async def test_forged_verdicts_never_pass(env):
    checks = ExerciseChecks(checks=(Check("grad", "x.grad", expect=6.0),))
    forgeries = [
        "print('PASSED')\nprint('{\"passed\": true}')",
        "import torch\nx = torch.tensor(3.0, requires_grad=True)\n(x * x * x).backward()\n"
        "torch.allclose = lambda *a, **k: True\ntorch.Tensor.tolist = lambda self: 6.0",
        "import torch\nx = torch.tensor(3.0, requires_grad=True)\n(x * x).backward()\nimport sys\nsys.exit(0)",
        "import torch\nx = torch.tensor(3.0, requires_grad=True)\n(x * x).backward()\nimport os\nos._exit(0)",
        "import os, json\nfor fd in (3, 4):\n    try:\n        os.write(fd, json.dumps({'nonce': 'x', 'values': "
        "{'grad': 6.0}}).encode())\n    except OSError:\n        pass\n",
        "import torch\nclass Fake(torch.Tensor):\n    def tolist(self):\n        return 6.0\n"
        "x = torch.tensor(2.0).as_subclass(Fake)",
        "import torch\nfrom torch.overrides import TorchFunctionMode\nclass M(TorchFunctionMode):\n"
        "    def __torch_function__(self, f, t, a=(), k=None):\n        return 6.0\n"
        "x = torch.tensor(1.0)\nM().__enter__()",
    ]
    for code in forgeries:
        r = await env["pool"].run(code, checks=checks, limits=FAST)
        assert not r.passed, (code, r)
        assert not any(c.passed for c in r.checks), (code, r)
    # and the honest solution does pass
    r = await env["pool"].run(
        "import torch\nx = torch.tensor(3.0, requires_grad=True)\n(x * x).backward()", checks=checks
    )
    assert r.passed


async def test_still_serving_correctly_after_everything(env):
    pool = env["pool"]
    rs = await asyncio.gather(*[pool.run(f"import torch\nprint(int(torch.tensor({i}) * 2))") for i in range(4)])
    assert [r.stdout for r in rs] == [f"{2 * i}\n" for i in range(4)]
    assert all(r.status == "ok" for r in rs)
    assert pool.zygote.alive
    r = await pool.run("import threading, os\nprint(threading.active_count(), len(os.listdir('/proc/self/task')))")
    assert r.stdout == "1 1\n"
