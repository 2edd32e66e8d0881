"""The warm process: imports torch once, then forks one child per job.

Runs *inside* the bwrap sandbox (see sandbox.py), started as
``python -s -B -P -c "...zygote.main(FD)"`` with FD its control socket to
the runner (AF_UNIX, SOCK_SEQPACKET: one message per datagram, descriptors
passed with SCM_RIGHTS).

Why it is safe to fork after ``import torch``: the zygote stays
single-threaded (one intra-op thread, no interop pool started, never a
``backward()``, which would start autograd's worker threads), and checks
that before every fork.

Process tree inside the sandbox, per job::

    bwrap init (pid 1)
    └── zygote (this module; torch imported)       ─ forks G for each job
          ├── G: the learner's process, pid 2 of the job's own pid namespace
          └── nsforge (forked *before* torch: small) ─ makes each job's pid ns
                └── I: that namespace's init (pid 1; nsinit.py), nothing else

nsforge is pid 1 of a pid namespace of its own (made in the sandbox's user
namespace, so it may step back into it after each unshare; bwrap's belongs
to an outer one).  Per job it unshares a new pid namespace, starts the init
in it with posix_spawn() (vfork + exec of a tiny static program: nothing of
its memory is copied) and hands the zygote that namespace and a pidfd of the
init.  The zygote setns()es into it and forks G, which becomes pid 2, so
the only large fork per job is the zygote's fork of G (~1.5 ms with huge
pages, see hugepages.py).  The learner is not pid 1, so signals behave
normally.

Messages on the control socket (JSON):

    runner -> zygote  {"op": "spawn", "job": ID, "tmpfs_bytes": N, "ids": [UID, GID] | null}  + fds [sup]
    runner -> G       {"op": "job", "report": BOOL, "spec": SPEC} + fds [stdout, stderr, done(, report, nonce)]
                      {"op": "job", "report": BOOL} + fds [spec, stdout, ...]  (SPEC over INLINE_SPEC_BYTES)
                      {"op": "ping"}
    zygote -> runner  {"op": "ready", "torch": VERSION}
                      {"op": "spawned", "job": ID} | {"op": "spawn_failed", "job": ID, "error": MSG}
                      {"op": "exit", "job": ID, "status": WAITSTATUS, "utime": S, "stime": S, "maxrss_kb": N}
                      {"op": "pong"}

The ``sup`` socket talks to G: G sets up its namespaces ahead of time, sends
its pid with SCM_CREDENTIALS (so the runner can put it into the slot's
cgroup) and waits.  The runner later sends the job, its spec inline
(``{"op": "job", "report": bool, "spec": {...}}``: one datagram, nothing more
to read) or, when larger than INLINE_SPEC_BYTES, in a memfd passed first,
with fds [stdout, stderr, done(, report, nonce)]; G finishes confining
itself and closes the socket before the first learner line (a setup failure
is reported there as {"error": MSG} instead).
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal's C half, no stubs; see _job_main
import array
import builtins
import ctypes
import fcntl
import gc
import io
import json
import linecache
import os
import random
import resource
import select
import signal
import socket
import sys
import threading
import time
import traceback
import types
from collections.abc import Sequence
from typing import Any

from . import grading, hugepages, nsinit, sandbox, seccomp
from .limits import MAXIMUM, Limits

SNIPPET = "<snippet>"
MAX_FDS = 8
PR_SET_DUMPABLE = 4
# The largest job message carrying its spec inline (bytes); a larger spec (long code) goes in a memfd.
# Well under what recv_msg reads and a SOCK_SEQPACKET datagram may hold.
INLINE_SPEC_BYTES = 32 * 1024
DONE_FD = 3  # the learner process says "finished, exit code N" here
REPORT_FD = grading.REPORT_FD  # graded runs: the extracted values (see grading/)
NONCE_FD = grading.NONCE_FD  # graded runs: the report's nonce, read only after the learner's code ended


def recv_msg(sock: socket.socket, bufsize: int = 65536) -> tuple[dict[str, Any] | None, list[int]]:
    fds = array.array("i")
    data, anc, _flags, _ = sock.recvmsg(bufsize, socket.CMSG_SPACE(MAX_FDS * fds.itemsize))
    for level, kind, cdata in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(cdata[: len(cdata) - (len(cdata) % fds.itemsize)])
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    msg = json.loads(data)
    return (msg if isinstance(msg, dict) else {}), list(fds)


def send_msg(sock: socket.socket, msg: dict[str, Any], fds: Sequence[int] = ()) -> None:
    data = json.dumps(msg).encode()
    if fds:
        sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    else:
        sock.send(data)


# --- nsforge: makes one pid namespace per job ------------------------------

_pythonapi = ctypes.pythonapi


def _raw_clone(flags: int) -> int:
    """fork() with namespace flags (how nsforge is born); Python's own
    before/after-fork hooks run as for os.fork()."""
    _pythonapi.PyOS_BeforeFork()
    pid: int = sandbox._libc.syscall(
        seccomp.SYSCALLS[seccomp.host_arch()]["clone"], ctypes.c_ulong(flags | signal.SIGCHLD), 0, 0, 0, 0
    )
    if pid == 0:
        _pythonapi.PyOS_AfterFork_Child()
    else:
        err = ctypes.get_errno()
        _pythonapi.PyOS_AfterFork_Parent()
        if pid < 0:
            raise OSError(err, f"clone: {os.strerror(err)}")
    return pid


def _nsforge_main(sock: socket.socket, init_fd: int) -> None:
    """Per request on ``sock``: a new pid namespace and its init, as [nsfd, pidfd]."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps our inits
    # Ambient capabilities would survive the inits' execve(): they get none.
    sandbox.prctl(sandbox.PR_CAP_AMBIENT, sandbox.PR_CAP_AMBIENT_CLEAR_ALL)
    init = f"/proc/self/fd/{init_fd}"
    own = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    while True:
        try:
            req = sock.recv(16)
        except InterruptedError:
            continue
        if not req:
            os._exit(0)
        pid = None
        fds: list[int] = []
        try:
            sandbox.unshare(sandbox.CLONE_NEWPID)  # our next child is pid 1 of a new one
            try:
                pid = os.posix_spawn(init, ["init"], {})
                # Opened through ourselves: the init is not dumpable, so its
                # own /proc/PID/ns is closed to us.
                fds.append(os.open("/proc/self/ns/pid_for_children", os.O_RDONLY | os.O_CLOEXEC))
            finally:
                sandbox.setns(own, sandbox.CLONE_NEWPID)
            fds.append(os.pidfd_open(pid))
            send_msg(sock, {}, fds)
        except OSError as e:
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
            sock.send(json.dumps({"error": str(e)}).encode())
        finally:
            for fd in fds:
                os.close(fd)


# --- the learner's process -------------------------------------------------


def _trim(te: traceback.TracebackException, seen: set[int]) -> None:
    """Keep only the learner's own frames (runner and library frames go)."""
    if id(te) in seen:
        return
    seen.add(id(te))
    te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename == SNIPPET])
    for sub in (te.__cause__, te.__context__):
        if sub is not None:
            _trim(sub, seen)


def format_learner_exception(exc: BaseException) -> str:
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True)
    _trim(te, set())
    return "".join(te.format())


def _exit_code_of(e: SystemExit) -> int:
    code = e.code
    if code is None:
        return 0
    if isinstance(code, bool):
        return int(code)
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(f"{code}\n")
    except Exception:
        pass
    return 1


def run_snippet(
    source: str,
    checks: dict[str, Any] | None,
    report_fd: int | None,
    nonce_fd: int | None = None,
    rehearsal: bool = False,
) -> int:
    """Run learner code in a fresh __main__; returns the exit code.

    A graded run's ``checks`` hold the expressions' trees only: the nonce waits on ``nonce_fd`` and is read
    by extraction, so nothing the learner's code can reach holds it (see grading/).  A ``rehearsal``
    (``_rehearse``) leaves the threads alone: waiting for them marks the main thread as ended.
    """
    linecache.cache[SNIPPET] = (len(source), None, source.splitlines(True), SNIPPET)
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    sys.argv = [SNIPPET]
    exit_code = 0
    completed = False
    try:
        code = compile(source, SNIPPET, "exec", dont_inherit=True)
        exec(code, main.__dict__)
        completed = True
    except SystemExit as e:
        exit_code = _exit_code_of(e)
    except BaseException as e:
        try:
            sys.stderr.write(format_learner_exception(e))
        except Exception:
            pass
        exit_code = 1
    try:
        # Wait for the learner's non-daemon threads, as Python would at exit (its private hook for that).
        if not rehearsal:
            threading._shutdown()  # type: ignore[attr-defined]
    except BaseException:
        pass
    # Graded checks run only after the code ran to its end: an early exit,
    # an exception or os._exit() leaves no report, which grades as a fail.
    if completed and checks is not None and report_fd is not None:
        grading.write_report(report_fd, main.__dict__, checks, nonce_fd)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    return exit_code


def _say_done(status: int, token: str, marks: list[tuple[str, int]] | None, fd: int = DONE_FD) -> None:
    """Tell the runner the code finished, so it need not wait for the
    process teardown (~10 ms: the job's address space and namespaces go
    with it).  The token only keeps stray writes to fd 3 from ending the
    job by accident; learner code that finds it can only end its own job.
    A traced job's stage marks go with it (runner/trace.py)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    done: dict[str, Any] = {"exit": status, "cpu": ru.ru_utime + ru.ru_stime, "token": token}
    if marks is not None:
        done["t"] = [*marks, ("done", time.monotonic_ns())]
    os.write(fd, json.dumps(done).encode())


def _seed(seed: int) -> None:
    """Python's, torch's and numpy's generators, from the job's seed."""
    random.seed(seed)
    _torch._C.default_generator.manual_seed(seed)  # CPU build: the only generator
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(seed % (2**32))


# What a rehearsal runs: a job as small as the most common one.
_REHEARSAL_SPEC = {"code": "print(1 + 1)", "seed": 1, "checks": None, "done_token": "0" * 16}


def _rehearse() -> None:
    """Walk the steps of a job once with a stand-in job of our own, ahead of time (the end of phase 1).

    A freshly forked process pays a copy-on-write fault the first time it writes each page it still
    shares with the zygote: ~5-7 µs each here (the zygote's huge page split, a page copied, its memory
    charged), and a job's last steps write ~100 such pages (the reference counts of the functions,
    types and strings they use, the allocator's pools).  Writing them here, before any job exists,
    takes those faults off the request's path.  Nothing of it reaches the job: it writes only to
    /dev/null, and the job's own module, argv, seeds and streams replace the stand-in's.
    """
    null = os.open("/dev/null", os.O_WRONLY | os.O_CLOEXEC)
    saved = sys.stdout
    try:
        recv = array.array("i")
        recv.frombytes(b"\0" * 16)
        message = {"op": "job", "report": False, "spec": {**_REHEARSAL_SPEC, "limits": _DEFAULT_LIMITS.to_dict()}}
        spec = json.loads(json.dumps(message).encode())["spec"]
        Limits(**spec["limits"])
        os.close(fcntl.fcntl(null, fcntl.F_DUPFD_CLOEXEC, 64))
        os.close(os.dup(null))
        _seed(int(spec["seed"]))
        sys.stdout = io.TextIOWrapper(
            io.FileIO(null, "w", closefd=False), encoding="utf-8", errors="backslashreplace", write_through=True
        )
        run_snippet(spec["code"], None, None, rehearsal=True)
        _say_done(0, spec["done_token"], None, fd=null)
    finally:
        sys.stdout = saved
        os.close(null)


def _job_main(
    sup_fd: int, keep: set[int], tmpfs_bytes: int, ids: tuple[int, int] | None, marks: list[tuple[str, int]]
) -> None:
    """G: confine this freshly forked process, wait for a job, run it.

    Phase 1 (ahead of time, before any job exists): own mount/net/ipc
    namespaces, fresh /proc and tmpfs, the slot's uid and gid (``ids``, when
    the runner maps them), hello to the runner (which checks that uid and
    moves us into the slot's cgroup), then everything that does not depend on the
    job: new session, OOM score, working dir, no descriptors but sup, every
    capability dropped, the job seccomp filter.  Phase 2 (the job arrives on
    ``sup`` with its descriptors): descriptors in place, rlimits, seeds, the
    learner's code.  Only phase 2 is on the request's critical path, and
    nothing the learner can touch ever held a capability.  ``marks`` are the
    stages' end times (CLOCK_MONOTONIC ns), reported if the job is traced.
    """
    status = 112
    sup = None
    mark = marks.append
    clock = time.monotonic_ns
    mark(("forked", clock()))
    try:
        for fd in keep:
            try:
                os.close(fd)
            except OSError:
                pass
        sup = socket.socket(fileno=sup_fd)  # first: a failure below is reported on it
        signal.set_wakeup_fd(-1)
        # _signal.signal, not signal.signal: the latter's enum conversions are
        # code no job runs otherwise, ~0.2 ms of first-touch page faults each.
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM):
            _signal.signal(sig, _signal.SIG_DFL)
        _signal.signal(signal.SIGINT, signal.default_int_handler)
        sandbox.enter_job(Limits(tmpfs_bytes=tmpfs_bytes), ids)
        if ids is not None:
            sandbox.become(*ids)
            # A change of uid makes a process non-dumpable, and its /proc files then belong to a root that this
            # namespace does not map: its own oom_score_adj below, say.  It runs as its slot's uid alone.
            sandbox.prctl(PR_SET_DUMPABLE, 1)
        sandbox.own_user_namespace()  # last of what needs the sandbox's capabilities: after it, none are left
        mark(("namespaces_mounts", clock()))
        sandbox.send_credentials(sup)
        mark(("hello", clock()))

        os.setsid()  # kill(0, ...) reaches only the job's own group
        fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
        os.write(fd, b"1000")  # the OOM killer takes the learner first
        os.close(fd)
        sup_hi = fcntl.fcntl(sup.fileno(), fcntl.F_DUPFD_CLOEXEC, 64)
        old = sup.detach()
        sup = socket.socket(fileno=sup_hi)
        os.close(old)
        os.closerange(3, sup_hi)
        os.closerange(sup_hi + 1, 1 << 20)
        os.chdir(sandbox.WORKDIR)
        mark(("session_fds", clock()))
        sandbox.drop_capabilities()
        mark(("capabilities", clock()))
        seccomp.install(_JOB_FILTER)
        mark(("seccomp", clock()))
        stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        # Unbuffered: output written before a timeout or a crash still shows.
        stdout = io.TextIOWrapper(
            io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace", write_through=True
        )
        stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", write_through=True
        )
        _rehearse()
        mark(("rehearsed", clock()))

        # --- wait for the job (the runner put us in the slot's cgroup first)
        mark(("waiting", clock()))
        msg, fds = recv_msg(sup)
        mark(("job_received", clock()))
        if msg is None or msg.get("op") != "job":
            os._exit(113)
        has_report = bool(msg.get("report"))
        spec = msg.get("spec")
        if len(fds) != (3 if spec is not None else 4) + (2 if has_report else 0):
            raise RuntimeError("job message with the wrong descriptors")
        if spec is None:
            with os.fdopen(fds.pop(0), "rb") as f:
                spec = json.loads(f.read())
        limits = Limits(**spec["limits"])
        out_fd, err_fd, done_fd = fds[:3]
        report_fd, nonce_fd = (fds[3], fds[4]) if has_report else (None, None)
        mark(("spec_read", clock()))

        devnull = os.open("/dev/null", os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        # 3 = done, 4 = graded report, 5 = its nonce; everything else closed.  All are
        # reachable by learner code, which is fine: "done" only lets it end its own
        # job early, and a report only carries values (grading/).
        targets = [(done_fd, DONE_FD)]
        if report_fd is not None and nonce_fd is not None:
            targets += [(report_fd, REPORT_FD), (nonce_fd, NONCE_FD)]
        staged = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64) for fd, _ in targets]
        for fd, (_, target) in zip(staged, targets, strict=False):
            os.dup2(fd, target, inheritable=False)
        os.closerange(3 + len(targets), sup_hi)
        os.closerange(sup_hi + 1, 1 << 20)
        mark(("fds_placed", clock()))
        sandbox.set_rlimits(limits)
        _seed(int(spec["seed"]))
        sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
        # Code that prints through sys.__stdout__ must reach the job's pipe too (typeshed marks them Final).
        sys.__stdout__, sys.__stderr__, sys.__stdin__ = stdout, stderr, stdin  # type: ignore[misc]
        sup.close()
        sup = None
        graded = report_fd is not None
        traced = spec.get("trace") is True
        mark(("limits_seeds", clock()))
        status = run_snippet(
            spec["code"], spec.get("checks"), REPORT_FD if graded else None, NONCE_FD if graded else None
        )
        mark(("code", clock()))
        try:
            _say_done(status, spec["done_token"], marks if traced else None)
        except OSError:
            pass  # fd 3 closed by the learner: the runner waits for the exit instead
    except BaseException as e:  # the machinery failed: say so on sup if still open
        try:
            if sup is not None:
                sup.send(json.dumps({"error": f"{type(e).__name__}: {e}"}).encode())
        except BaseException:
            pass
    finally:
        os._exit(status)


# --- the zygote's loop -----------------------------------------------------

_torch: Any = None  # the torch module, once _warm_up imported it
_JOB_FILTER: bytes | seccomp.Prepared = b""
_JOB_UIDS: frozenset[int] = frozenset()  # uids mapped into our namespace besides our own: the jobs' (uids.py)
_DEFAULT_LIMITS = Limits()


def _warm_up() -> str:
    """Import torch and everything a job may touch, while still single-threaded."""
    global _torch
    import torch

    torch.set_num_threads(1)
    # A tensor op or two initialises the allocator and dispatcher without
    # starting threads; autograd (backward) is never touched here.
    torch.ones(2, 2) @ torch.ones(2, 2)
    import math  # noqa: F401

    import torch.nn
    import torch.nn.functional
    import torch.optim

    # An optimizer's first construction imports torch._dynamo (~800 modules, 4-5 s of CPU): lessons build
    # one in most training loops, so pay it here.  No step and no backward: no thread starts.  The import
    # wants a cache directory, and the zygote's files are read-only (jobs get a fresh /tmp): it is told to
    # use /tmp, which exists, so nothing is created.
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = "/tmp"
    try:
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        optimizer.zero_grad()
        del optimizer
    finally:
        del os.environ["TORCHINDUCTOR_CACHE_DIR"]

    _torch = torch
    # Seeding imports torch's per-device seeding helpers the first time:
    # pay that here, not in every job.
    torch.manual_seed(0)
    random.seed(0)
    grading.capture_pristine()
    sandbox.prepare_job_primitives()
    return torch.__version__


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def main(ctl_fd: int) -> None:
    global _JOB_FILTER, _JOB_UIDS
    ctl = socket.socket(fileno=ctl_fd)
    _JOB_FILTER = seccomp.Prepared(seccomp.job_filter())
    _JOB_UIDS = _mapped_uids() - {os.getuid()}

    init_fd = nsinit.executable()
    forge_a, forge_b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    forge_pid = _raw_clone(sandbox.CLONE_NEWPID)  # before torch: nsforge stays small
    if forge_pid == 0:
        ctl.close()
        forge_a.close()
        try:
            _nsforge_main(forge_b, init_fd)
        finally:
            os._exit(0)
    forge_b.close()
    os.close(init_fd)

    version = _warm_up()
    # We fork only while single-threaded, so no logging handler's lock can be
    # held then: re-making each one (torch has ~40) in every job is wasted.
    getattr(sys.modules.get("logging"), "_at_fork_reinit_lock_weakset", set()).clear()
    gc.collect()
    gc.freeze()  # jobs do not copy-on-write the heap just by collecting
    hugepages.collapse()  # last: fork then copies ~70 PMDs, not ~36,000 PTEs
    if _threads() != 1:
        send_msg(ctl, {"op": "fatal", "error": f"zygote has {_threads()} threads after warm-up"})
        os._exit(1)

    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    keep = {ctl.fileno(), forge_a.fileno(), wake_r, wake_w}
    jobs: dict[int, tuple[str, int]] = {}  # G pid -> (job id, a pidfd of its init)
    send_msg(ctl, {"op": "ready", "torch": version, "pid": os.getpid()})

    while True:
        try:
            readable, _, _ = select.select([ctl.fileno(), wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in readable:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
            _reap(ctl, jobs)
        if ctl.fileno() not in readable:
            continue
        try:
            msg, fds = recv_msg(ctl)
        except InterruptedError:
            continue
        if msg is None:  # the runner went away
            os._exit(0)
        op = msg.get("op")
        if op == "ping":
            send_msg(ctl, {"op": "pong", "threads": _threads()})
        elif op == "spawn":
            _spawn(ctl, forge_a, msg, fds, jobs, keep)
        else:
            for fd in fds:
                os.close(fd)


def _spawn(
    ctl: socket.socket,
    forge: socket.socket,
    msg: dict[str, Any],
    fds: list[int],
    jobs: dict[int, tuple[str, int]],
    keep: set[int],
) -> None:
    """Fork a G for a slot; it gets ready and waits for its job on ``sup``."""
    job = str(msg.get("job"))
    marks = [("zygote.spawn_received", time.monotonic_ns())]
    try:
        if len(fds) != 1:
            raise RuntimeError(f"spawn needs 1 descriptor, got {len(fds)}")
        tmpfs_bytes = _tmpfs_bytes(msg.get("tmpfs_bytes"))
        ids = _job_ids(msg.get("ids"))
        if _threads() != 1:
            raise RuntimeError("zygote is no longer single-threaded; refusing to fork")
        forge.send(b"n")
        reply, nsfds = recv_msg(forge)
        if reply is None or "error" in reply or len(nsfds) != 2:
            for fd in nsfds:
                os.close(fd)
            raise RuntimeError(f"nsforge: {reply and reply.get('error')}")
        nsfd, init = nsfds
        marks.append(("zygote.nsforge", time.monotonic_ns()))
        try:
            sandbox.setns(nsfd, sandbox.CLONE_NEWPID)  # our next child is born in it
            pid = os.fork()
        except BaseException:
            signal.pidfd_send_signal(init, signal.SIGKILL)
            os.close(init)
            raise
        finally:
            os.close(nsfd)
        if pid == 0:
            # The child must never return from here into this loop, whatever fails: it would become a
            # second zygote with the sandbox's capabilities and no job cgroup.
            try:
                _job_main(fds[0], keep, tmpfs_bytes, ids, marks)
            finally:
                os._exit(112)
        jobs[pid] = (job, init)
        send_msg(ctl, {"op": "spawned", "job": job})
    except Exception as e:
        send_msg(ctl, {"op": "spawn_failed", "job": job, "error": f"{type(e).__name__}: {e}"})
    finally:
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass


def _tmpfs_bytes(value: object) -> int:
    """The size of a job's tmpfs mounts, as asked for by the runner: checked here, before any fork."""
    if value is None:
        return _DEFAULT_LIMITS.tmpfs_bytes
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAXIMUM.tmpfs_bytes:
        raise ValueError(f"tmpfs_bytes must be a whole number from 1 to {MAXIMUM.tmpfs_bytes}, got {value!r}")
    return value


def _mapped_uids() -> frozenset[int]:
    """The uids our user namespace maps (its uid_map: inside, outside, count per line)."""
    uids: set[int] = set()
    with open("/proc/self/uid_map") as f:
        for line in f:
            inside, _outside, count = (int(x) for x in line.split())
            if count <= 4096:  # ours are a few dozen; a whole range (not ours) is never handed out
                uids.update(range(inside, inside + count))
    return frozenset(uids)


def _job_ids(value: object) -> tuple[int, int] | None:
    """A job's uid and gid as asked for by the runner: one of the jobs' mapped uids (never ours), or None."""
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) == 2 and all(type(v) is int for v in value)):
        raise ValueError("ids must be [uid, gid]")
    uid, gid = value
    if uid not in _JOB_UIDS or gid != uid:
        raise ValueError(f"uid {uid} is not one of the jobs' ({len(_JOB_UIDS)} mapped)")
    return uid, gid


def _reap(ctl: socket.socket, jobs: dict[int, tuple[str, int]]) -> None:
    while True:
        try:
            pid, status, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        except InterruptedError:
            continue
        if pid == 0:
            return
        entry = jobs.pop(pid, None)
        if entry is None:
            continue
        job, init = entry
        try:
            signal.pidfd_send_signal(init, signal.SIGKILL)  # ends the job's pid namespace
        except ProcessLookupError:
            pass
        os.close(init)
        send_msg(
            ctl,
            {
                "op": "exit",
                "job": job,
                "status": status,
                "utime": ru.ru_utime,
                "stime": ru.ru_stime,
                "maxrss_kb": ru.ru_maxrss,
            },
        )
