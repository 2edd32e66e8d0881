"""The warm pool: one sandboxed zygote, N job slots, a bounded queue.

Everything here runs in the runner's own process (outside the sandbox) and
is the trusted side: it owns the cgroups, the job's pipes and timers, and it
alone decides a job's status and a graded run's verdict.  It never imports
torch.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import logging
import os
import secrets
import signal
import socket
import struct
import subprocess
import tempfile
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import cgroups, grading, pipes, sandbox, seccomp
from .errors import InvalidRequest, JobFailed, RunnerBusy, RunnerClosed, SandboxUnavailable
from .limits import DEFAULT, Limits
from .result import RunResult

log = logging.getLogger("runner.pool")

MEMORY_ERROR_MARKERS = (
    "MemoryError",
    "can't allocate memory",
    "DefaultCPUAllocator",
    "not enough memory",
    "std::bad_alloc",
)
SETUP_TIMEOUT_S = 15.0  # seconds for a job's sandbox to get ready (not learner time)
DONE_BYTES = 4096  # bytes of the "done" message a job may write (more: not a valid one)
FIX_HINT = (
    "to fix the host: install bubblewrap (apt-get install -y bubblewrap), enable "
    "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; "
    "sysctl user.max_user_namespaces=15000; on Ubuntu also "
    "sysctl kernel.apparmor_restrict_unprivileged_userns=0), and give the runner "
    "write access to its cgroup (pids + memory controllers)"
)


@dataclass(frozen=True)
class PoolConfig:
    size: int = 2  # jobs running at once (a 2-core host: 2)
    queue: int = 32  # jobs allowed to wait for a slot; one more -> RunnerBusy
    limits: Limits = DEFAULT  # default limits of a job
    sandbox: sandbox.SandboxConfig = field(default_factory=sandbox.SandboxConfig)
    startup_timeout_s: float = 120.0  # seconds for the zygote to import torch
    self_check: bool = True  # prove isolation at start; refuse to serve otherwise

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides: Any) -> PoolConfig:
        env = dict(os.environ if env is None else env)
        kw: dict[str, Any] = {"sandbox": sandbox.SandboxConfig.from_env(env)}
        if env.get("RUNNER_POOL"):
            kw["size"] = int(env["RUNNER_POOL"])
        if env.get("RUNNER_QUEUE"):
            kw["queue"] = int(env["RUNNER_QUEUE"])
        kw.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**kw)


def _scrubbed_env() -> dict[str, str]:
    # The launcher and bwrap need nothing from us (bwrap clears the rest).
    return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


class _Fut:
    """A future resolved from an add_reader callback, tolerant of late calls."""

    @staticmethod
    async def readable(fd: int, timeout: float | None = None) -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def ready() -> None:
            if not fut.done():
                fut.set_result(None)

        loop.add_reader(fd, ready)
        try:
            await asyncio.wait_for(fut, timeout)
        finally:
            loop.remove_reader(fd)


class Zygote:
    """The sandboxed warm process and its control socket."""

    def __init__(self, cfg: sandbox.SandboxConfig) -> None:
        self.cfg = cfg
        self.proc: subprocess.Popen | None = None
        self.ctl: socket.socket | None = None
        self.plan: sandbox.LaunchPlan | None = None
        self.torch_version: str | None = None
        self.alive = False
        self._waiters: dict[tuple[str, Any], asyncio.Future] = {}
        self._stderr = deque(maxlen=60)  # its last lines, for error messages
        self._err: pipes.Stream | None = None
        self._ready: asyncio.Future | None = None

    def argv(self, ctl_fd: int) -> list[str]:
        boot = (
            f"import sys; sys.path.insert(0, {sandbox.PKG_ROOT!r}); "
            "from runner.zygote import main; main(int(sys.argv[1]))"
        )
        return [self.cfg.python, "-s", "-B", "-P", "-c", boot, str(ctl_fd)]

    async def start(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.plan = sandbox.plan(self.cfg, self.argv(child.fileno()), [child.fileno()], seccomp.zygote_filter())
        try:
            self.proc = subprocess.Popen(
                self.plan.argv,
                pass_fds=self.plan.pass_fds,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=_scrubbed_env(),
                start_new_session=True,
                cwd="/",
            )
        finally:
            child.close()
            self.plan.close_fds()
        parent.setblocking(False)
        self.ctl = parent
        self.alive = True
        # A log, consumed line by line: it may keep everything.
        self._err = pipes.Stream(self.proc.stderr.fileno(), pipes.Budget(1 << 62))
        loop.add_reader(self._err.fd, self._on_stderr)
        loop.add_reader(parent.fileno(), self._on_ctl)
        self._ready = loop.create_future()
        try:
            msg = await asyncio.wait_for(asyncio.shield(self._ready), timeout)
        except TimeoutError:
            await self.stop()
            raise SandboxUnavailable(
                f"the sandboxed zygote did not start in {timeout:.0f} s; its stderr: {self.stderr_tail()}"
            ) from None
        self.torch_version = msg.get("torch")
        self.plan.remove_stage()  # bwrap has made its binds; the host dir can go

    def stderr_tail(self) -> str:
        return " | ".join(self._stderr)[-2000:] or "(empty)"

    def _on_stderr(self) -> None:
        err = self._err
        err.pump()
        if err.eof:
            asyncio.get_running_loop().remove_reader(err.fd)
        for line in err.data.decode("utf-8", "replace").splitlines():
            if line.strip():
                self._stderr.append(line.strip())
                log.debug("sandbox: %s", line)
        err.data.clear()

    def _on_ctl(self) -> None:
        from .zygote import recv_msg

        while self.ctl is not None:
            try:
                msg, fds = recv_msg(self.ctl)
            except BlockingIOError:
                return
            except OSError:
                msg, fds = None, []
            for fd in fds:
                os.close(fd)
            if msg is None:
                self._died()
                return
            self._dispatch(msg)

    def _dispatch(self, msg: dict) -> None:
        op = msg.get("op")
        if op == "ready":
            if self._ready and not self._ready.done():
                self._ready.set_result(msg)
            return
        if op == "fatal":
            self._stderr.append(str(msg.get("error")))
            return
        key = ("spawn", msg.get("job")) if op in ("spawned", "spawn_failed") else (op, msg.get("job"))
        fut = self._waiters.pop(key, None)
        if fut is not None and not fut.done():
            fut.set_result(msg)

    def _close_ctl(self) -> None:
        if self.ctl is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self.ctl.fileno())
            self.ctl.close()
            self.ctl = None

    def _died(self) -> None:
        if not self.alive:
            return
        self.alive = False
        self._close_ctl()
        err = JobFailed(f"the sandboxed zygote died; its stderr: {self.stderr_tail()}")
        if self._ready and not self._ready.done():
            self._ready.set_exception(
                SandboxUnavailable(f"the sandbox failed to start: {self.stderr_tail()}; {FIX_HINT}")
            )
        for fut in self._waiters.values():
            if not fut.done():
                fut.set_exception(err)
                fut.exception()  # mark retrieved: nobody may be waiting on it any more
        self._waiters.clear()

    def expect(self, op: str, job: str) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        if not self.alive:
            fut.set_exception(JobFailed("the sandboxed zygote is not running"))
        else:
            self._waiters[(op, job)] = fut
        return fut

    def forget(self, op: str, job: str) -> None:
        self._waiters.pop((op, job), None)

    def send(self, msg: dict, fds: list[int] = ()) -> None:
        from .zygote import send_msg

        if not self.alive or self.ctl is None:
            raise JobFailed("the sandboxed zygote is not running")
        for _ in range(1000):
            try:
                send_msg(self.ctl, msg, list(fds))
                return
            except BlockingIOError:
                time.sleep(0.001)
        raise JobFailed("the zygote's control socket is stuck")

    async def stop(self) -> None:
        loop = asyncio.get_running_loop()
        self._close_ctl()
        self.alive = False
        if self.proc is not None:
            if self.proc.stderr is not None:
                with contextlib.suppress(Exception):
                    loop.remove_reader(self.proc.stderr.fileno())
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            for _ in range(200):
                if self.proc.poll() is not None:
                    break
                await asyncio.sleep(0.01)
            if self.proc.stderr is not None:
                self.proc.stderr.close()
        if self.plan is not None:
            self.plan.remove_stage()


@dataclass
class _Ready:
    id: str
    sup: socket.socket
    exit_fut: asyncio.Future
    pid: int
    cgroup: cgroups.JobCgroup
    tmpfs_bytes: int


class _Job:
    """One job's pipes while it runs, and why it stopped running."""

    def __init__(self, jid: str, limits: Limits, want_report: bool) -> None:
        self.id = jid
        self.limits = limits
        self.token = secrets.token_hex(8)
        self.ended: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._want_report = want_report
        self.streams: list[pipes.Stream] = []
        self.out = self.err = self.done = self.report = None

    def open_pipes(self) -> list[int]:
        """The job's pipes; returns the write ends [stdout, stderr, done(, report)] for G."""
        ends = []

        def pipe(budget: pipes.Budget) -> pipes.Stream:
            r, w = os.pipe2(os.O_CLOEXEC)
            ends.append(w)
            stream = pipes.Stream(r, budget)
            self.streams.append(stream)
            return stream

        output = pipes.Budget(self.limits.output_bytes)  # stdout and stderr together
        self.out, self.err = pipe(output), pipe(output)
        self.done = pipe(pipes.Budget(DONE_BYTES))
        if self._want_report:
            self.report = pipe(pipes.Budget(grading.MAX_REPORT))
        return ends

    def end(self, reason: str) -> None:
        if not self.ended.done():
            self.ended.set_result(reason)

    def on_readable(self, stream: pipes.Stream) -> None:
        stream.pump()
        if stream.eof:
            asyncio.get_running_loop().remove_reader(stream.fd)
        if self.truncated:
            self.end("output_limit")
        elif stream is self.done and self.said_done() is not None:
            self.end("done")

    @property
    def truncated(self) -> bool:
        return self.out.overflow or self.err.overflow

    def said_done(self) -> dict | None:
        """The exit the job reported on its "done" pipe, as an exit message (None: not yet)."""
        raw = bytes(self.done.data)
        try:
            d = json.loads(raw[raw.rfind(b"{") :])  # the last message counts
            if self.done.overflow or d.get("token") != self.token:
                return None
            return {"status": (int(d["exit"]) & 0xFF) << 8, "utime": float(d.get("cpu", 0.0)), "stime": 0.0}
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def report_bytes(self) -> bytes | None:
        if self.report is None:
            return None
        return b"" if self.report.overflow else bytes(self.report.data)


class Pool:
    """Run snippets in the sandbox: ``await pool.run(code)`` -> RunResult."""

    def __init__(self, config: PoolConfig | None = None) -> None:
        self.config = config or PoolConfig()
        if self.config.size < 1 or self.config.queue < 0:
            raise InvalidRequest("pool size must be >= 1 and queue >= 0")
        self.zygote: Zygote | None = None
        self.tree: cgroups.CgroupTree | None = None
        self._free: asyncio.Queue[int] | None = None
        self._waiting = 0
        self._running = 0
        self._ids = itertools.count(1)
        self._closed = False
        self._restart_lock = asyncio.Lock()
        self._reference_cache: OrderedDict[str, dict] = OrderedDict()
        # Sandboxes prepared ahead (forked, namespaced, in a cgroup, waiting
        # for a job).  More of them than slots, so back-to-back jobs do not
        # wait for a preparation to finish.
        self._ready: deque[_Ready] = deque()
        self._ready_changed = asyncio.Event()
        self._preparing = 0
        self._prepare_tasks: set[asyncio.Task] = set()
        self._cells: asyncio.Queue[cgroups.JobCgroup] | None = None
        self._recycling: set[asyncio.Task] = set()
        self.pids_limit_proven = False
        self.jobs_done = 0

    # --- lifecycle -------------------------------------------------------
    async def start(self) -> Pool:
        problems = sandbox.host_problems(self.config.sandbox)
        if problems:
            raise SandboxUnavailable("cannot sandbox on this host: " + "; ".join(problems))
        # Two cgroups per slot: the next job's sandbox gets ready in a fresh
        # one while the last job's processes are still being torn down.
        self.tree = cgroups.CgroupTree.create(self._target_ready + 2 * self.config.size)
        self._cells = asyncio.Queue()
        for cell in self.tree.slots:
            self._cells.put_nowait(cell)
        self._free = asyncio.Queue()
        for i in range(self.config.size):
            self._free.put_nowait(i)
        try:
            await self._start_zygote()
            self._refill()
            if self.config.self_check:
                await self.self_check()
        except BaseException:
            await self.close()
            raise
        return self

    async def _start_zygote(self) -> None:
        z = Zygote(self.config.sandbox)
        await z.start(self.config.startup_timeout_s)
        self.zygote = z
        log.info("zygote ready (torch %s)", z.torch_version)

    async def _ensure_zygote(self) -> Zygote:
        if self.zygote is not None and self.zygote.alive:
            return self.zygote
        async with self._restart_lock:
            if self.zygote is None or not self.zygote.alive:
                if self._closed:
                    raise RunnerClosed("the pool is closed")
                log.warning("restarting the sandboxed zygote")
                if self.zygote is not None:
                    await self.zygote.stop()
                await self._start_zygote()
        return self.zygote

    async def close(self) -> None:
        self._closed = True
        for task in list(self._prepare_tasks):
            task.cancel()
        for task in list(self._prepare_tasks):
            with contextlib.suppress(BaseException):
                await task
        while self._ready:
            self._ready.popleft().sup.close()
        if self.zygote is not None:
            await self.zygote.stop()
        if self.tree is not None:
            self.tree.destroy()
            self.tree = None

    async def __aenter__(self) -> Pool:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def stats(self) -> dict[str, Any]:
        return {
            "size": self.config.size,
            "queue": self.config.queue,
            "running": self._running,
            "waiting": self._waiting,
            "jobs_done": self.jobs_done,
            "torch": self.zygote.torch_version if self.zygote else None,
            "cgroup_version": self.tree.layout.version if self.tree else None,
            "pids_limit_proven": self.pids_limit_proven,
            "zygote_pid": self.zygote.proc.pid if self.zygote and self.zygote.proc else None,
        }

    # --- running ---------------------------------------------------------
    async def run(
        self,
        code: str,
        limits: Limits | dict | None = None,
        checks: grading.ExerciseChecks | None = None,
        seed: int | None = None,
    ) -> RunResult:
        if self._closed or self._free is None:
            raise RunnerClosed("the pool is not running")
        if not isinstance(code, str):
            raise InvalidRequest("code must be a string")
        lim = limits if isinstance(limits, Limits) else Limits.from_dict(limits, self.config.limits)
        if len(code.encode("utf-8", "surrogatepass")) > lim.code_bytes:
            raise InvalidRequest(f"code is larger than {lim.code_bytes} bytes")
        if checks is not None and not isinstance(checks, grading.ExerciseChecks):
            raise InvalidRequest("checks must be an ExerciseChecks")
        if seed is None:
            seed = checks.seed if checks is not None and checks.seed is not None else secrets.randbits(63)

        reference_values = None
        if checks is not None and checks.needs_reference:
            reference_values = await self._reference(checks, lim, seed)
        nonce = grading.new_nonce() if checks is not None else None
        spec_checks = grading.job_spec(checks, nonce) if checks is not None else None

        async with self._slot() as slot:
            res, report = await self._run_job(slot, code, lim, seed, spec_checks)
        if checks is None:
            return res
        outcomes, passed = grading.verify(checks, res.status, report, nonce, reference_values)
        return dataclasses.replace(res, checks=outcomes, passed=passed)

    async def _reference(self, checks: grading.ExerciseChecks, lim: Limits, seed: int) -> dict:
        key = json.dumps([checks.reference, seed, [c.expr for c in checks.checks]])
        if key in self._reference_cache:
            self._reference_cache.move_to_end(key)
            return self._reference_cache[key]
        nonce = grading.new_nonce()
        async with self._slot() as slot:
            res, report = await self._run_job(slot, checks.reference, lim, seed, grading.job_spec(checks, nonce))
        values = grading.parse_report(report or b"", nonce) if res.status == "ok" else None
        if values is None:
            raise JobFailed(
                f"the exercise's reference solution did not run cleanly (status {res.status}): {res.stderr[-500:]}"
            )
        self._reference_cache[key] = values
        while len(self._reference_cache) > 256:
            self._reference_cache.popitem(last=False)
        return values

    @contextlib.asynccontextmanager
    async def _slot(self):
        assert self._free is not None
        if self._free.empty() and self._waiting >= self.config.queue:
            raise RunnerBusy(f"all {self.config.size} slots busy and {self._waiting} jobs queued")
        self._waiting += 1
        try:
            slot = await self._free.get()
        finally:
            self._waiting -= 1
        self._running += 1
        try:
            yield slot
        finally:
            self._running -= 1
            self._free.put_nowait(slot)

    # --- ready sandboxes: prepared ahead, one per slot ---------------------
    @property
    def _target_ready(self) -> int:
        return 2 * self.config.size

    def _refill(self) -> None:
        """Keep ``_target_ready`` sandboxes prepared (at most 2 preparing at once)."""
        if self._closed:
            return
        while len(self._ready) + self._preparing < self._target_ready and self._preparing < 2:
            self._preparing += 1
            task = asyncio.ensure_future(self._prepare_one())
            self._prepare_tasks.add(task)
            task.add_done_callback(self._prepare_tasks.discard)

    async def _prepare_one(self) -> None:
        try:
            ready = await self._prepare(0)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("preparing a sandbox failed: %s", e)
            await asyncio.sleep(0.2)
            return
        finally:
            self._preparing -= 1
            self._ready_changed.set()
            if not self._closed:
                asyncio.get_running_loop().call_soon(self._refill)
        if self._closed:
            ready.sup.close()
            self._recycle(ready.cgroup)
            return
        self._ready.append(ready)

    async def _prepare(self, slot: int, tmpfs_bytes: int | None = None) -> _Ready:
        """Fork a G for ``slot``: namespaces, mounts, into the slot's cgroup."""
        tmpfs_bytes = tmpfs_bytes or self.config.limits.tmpfs_bytes
        z = await self._ensure_zygote()
        assert self._cells is not None
        cg = await self._cells.get()
        jid = f"j{next(self._ids)}"
        sup, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sup.setsockopt(socket.SOL_SOCKET, sandbox.SO_PASSCRED, 1)
        exit_fut = z.expect("exit", jid)
        spawn_fut = z.expect("spawn", jid)
        try:
            try:
                z.send({"op": "spawn", "job": jid, "tmpfs_bytes": tmpfs_bytes}, [child.fileno()])
            finally:
                child.close()
            sup.setblocking(False)
            msg = await asyncio.wait_for(spawn_fut, SETUP_TIMEOUT_S)
            if msg.get("op") != "spawned":
                raise JobFailed(f"could not start a job: {msg.get('error')}")
            # Hello: G's pid (translated into our pid namespace by the kernel).
            data, pid, uid = await self._recv_creds(sup)
            if pid is None or data != b"hello":
                raise JobFailed(f"job setup failed: {data[:300].decode('utf-8', 'replace')}")
            if os.geteuid() == 0 and uid == 0:
                # Never run learner code as host root (see sandbox.py).
                raise JobFailed("refusing to run: the job's process is uid 0 on the host")
            try:
                # Moving a task between v1 cgroups waits for RCU grace periods
                # (milliseconds of sleep, per hierarchy): keep the loop free.
                await asyncio.to_thread(cg.add, pid)
            except OSError as e:
                raise JobFailed(f"cannot put the job into its cgroup: {e}") from e
        except BaseException:
            sup.close()
            z.forget("exit", jid)
            z.forget("spawn", jid)
            self._recycle(cg)
            raise
        return _Ready(jid, sup, exit_fut, pid, cg, tmpfs_bytes)

    def _recycle(self, cg: cgroups.JobCgroup) -> None:
        """SIGKILL everything in ``cg`` now; hand it back once it is empty."""
        cg.kill_all(timeout=0)

        async def wait_empty() -> None:
            delay = 0.002
            while cg.pids():
                cg.kill_all(timeout=0)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.1)
            if self._cells is not None:
                self._cells.put_nowait(cg)

        task = asyncio.ensure_future(wait_empty())
        self._recycling.add(task)
        task.add_done_callback(self._recycling.discard)

    async def _take_ready(self, lim: Limits) -> _Ready:
        if lim.tmpfs_bytes != self.config.limits.tmpfs_bytes:
            return await self._prepare(0, lim.tmpfs_bytes)  # rare: its own sandbox
        deadline = time.monotonic() + SETUP_TIMEOUT_S
        while True:
            while self._ready:
                ready = self._ready.popleft()
                self._refill()
                if not ready.exit_fut.done():
                    return ready
                ready.sup.close()  # died while waiting (zygote restart)
                self._recycle(ready.cgroup)
            self._refill()
            if self._preparing == 0:
                # Nothing on the way (preparation keeps failing): try once here.
                return await self._prepare(0)
            self._ready_changed.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise JobFailed("no sandbox could be prepared in time")
            try:
                await asyncio.wait_for(self._ready_changed.wait(), left)
            except TimeoutError:
                raise JobFailed("no sandbox could be prepared in time") from None

    async def _run_job(
        self, slot: int, code: str, lim: Limits, seed: int, checks_spec: dict | None
    ) -> tuple[RunResult, bytes | None]:
        loop = asyncio.get_running_loop()
        ready = await self._take_ready(lim)
        cg = ready.cgroup
        job = _Job(ready.id, lim, want_report=checks_spec is not None)
        sup, exit_fut = ready.sup, ready.exit_fut
        started_at = None
        try:
            cg.configure(lim)
            child_fds = job.open_pipes()
            spec_fd = os.memfd_create("job-spec", os.MFD_CLOEXEC)
            child_fds.insert(0, spec_fd)
            try:
                spec = {
                    "code": code,
                    "limits": lim.to_dict(),
                    "seed": seed,
                    "checks": checks_spec,
                    "done_token": job.token,
                }
                os.write(spec_fd, json.dumps(spec).encode())
                os.lseek(spec_fd, 0, os.SEEK_SET)
                from .zygote import send_msg

                try:
                    send_msg(sup, {"op": "job", "report": job.report is not None}, child_fds)
                except OSError as e:
                    raise JobFailed(f"the prepared sandbox went away: {e}") from e
            finally:
                for fd in child_fds:
                    os.close(fd)
            for stream in job.streams:
                loop.add_reader(stream.fd, job.on_readable, stream)
            started_at = time.monotonic()
            exit_fut.add_done_callback(lambda _: job.end("exit"))
            timer = loop.call_later(lim.wall_time_s, job.end, "timeout")
            try:
                reason = await job.ended
            finally:
                timer.cancel()
            ended_at = time.monotonic()
            # Whatever happened, nothing of this job survives it.
            cg.kill_all(timeout=0)
            exit_msg = exit_fut.result() if exit_fut.done() else None
            said_done = job.said_done()
            if exit_msg is not None and said_done is None:
                self._raise_setup_error(sup, exit_msg)
            if exit_msg is None:
                # Finished by its own account (a crash after that still shows
                # if the exit is already in; it usually is not yet), or killed.
                exit_msg = said_done
            if exit_msg is None:  # timeout / output limit: it was killed
                try:
                    exit_msg = await asyncio.wait_for(asyncio.shield(exit_fut), 5.0)
                except TimeoutError:
                    raise JobFailed("the job's exit was never reported") from None
        finally:
            sup.close()
            for stream in job.streams:
                if not stream.eof:
                    loop.remove_reader(stream.fd)
                stream.pump(None)  # the writers are gone (killed): what is left in the pipe
                stream.close()
            if not exit_fut.done():
                exit_fut.add_done_callback(lambda f: f.cancelled() or f.exception())
            self._recycle(cg)
        duration_ms = (ended_at - started_at) * 1000.0 if started_at else 0.0
        self.jobs_done += 1
        return self._result(job, exit_msg, reason == "timeout", duration_ms, cg), job.report_bytes()

    @staticmethod
    def _raise_setup_error(sup: socket.socket, exit_msg: dict) -> None:
        """G reports a failure of its own setup on sup (before learner code)."""
        try:
            data = sup.recv(4096)
        except (BlockingIOError, OSError):
            return
        if data.startswith(b'{"error"'):
            raise JobFailed(f"job setup failed: {data[:300].decode('utf-8', 'replace')}")

    async def _recv_creds(self, sup: socket.socket) -> tuple[bytes, int | None, int | None]:
        deadline = time.monotonic() + SETUP_TIMEOUT_S
        while True:
            try:
                data, anc, _flags, _ = sup.recvmsg(4096, socket.CMSG_SPACE(12))
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise JobFailed("the job's sandbox did not get ready in time") from None
                try:
                    await _Fut.readable(sup.fileno(), left)
                except TimeoutError:
                    raise JobFailed("the job's sandbox did not get ready in time") from None
                continue
            pid = uid = None
            for level, kind, cdata in anc:
                if level == socket.SOL_SOCKET and kind == sandbox.SCM_CREDENTIALS and len(cdata) >= 12:
                    pid, uid, _gid = struct.unpack("=iII", cdata[:12])
            if data == b"hello" and pid is None:
                return data, None, None
            return data, pid, uid

    @staticmethod
    def _result(job: _Job, exit_msg: dict, timed_out: bool, duration_ms: float, cg: cgroups.JobCgroup) -> RunResult:
        status_word = int(exit_msg.get("status", 0))
        cpu_s = float(exit_msg.get("utime", 0.0)) + float(exit_msg.get("stime", 0.0))
        exit_code = sig = None
        if os.WIFSIGNALED(status_word):
            sig = os.WTERMSIG(status_word)
        elif os.WIFEXITED(status_word):
            exit_code = os.WEXITSTATUS(status_word)
        stderr = job.err.data.decode("utf-8", "replace")
        lim = job.limits
        if job.truncated:
            status = "output_limit"
        elif timed_out:
            status = "timeout"
        elif cg.oom_killed():
            status = "memory_limit"
        elif sig is not None:
            if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu_s >= lim.cpu_time_s):
                status = "timeout"
            else:
                status = "killed"
        elif exit_code:
            tail = [ln for ln in stderr.strip().splitlines() if ln.strip()][-1:] or [""]
            status = "memory_limit" if any(m in tail[0] for m in MEMORY_ERROR_MARKERS) else "error"
        else:
            status = "ok"
        return RunResult(
            status=status,
            stdout=job.out.data.decode("utf-8", "replace"),
            stderr=stderr,
            exit_code=exit_code,
            signal=sig,
            duration_ms=round(duration_ms, 3),
            truncated=job.truncated,
            cpu_time_ms=round(cpu_s * 1000.0, 3),
        )

    # --- proving the isolation -----------------------------------------------
    async def self_check(self) -> None:
        """Refuse to serve unless a probe job shows the isolation holds."""
        res = await self.run("print(6 * 7)")
        if res.status != "ok" or res.stdout != "42\n":
            raise SandboxUnavailable(
                f"the sandbox cannot run a trivial snippet: {res.status} "
                f"{res.stderr[-800:]} {self.zygote.stderr_tail() if self.zygote else ''}"
            )

        tmp = Path(tempfile.mkdtemp(prefix="coursebot-probe-"))
        plant_dir = Path(sandbox.package_dir()).parent
        planted = plant_dir / f".coursebot-probe-{secrets.token_hex(6)}"
        try:
            planted.write_text("secret")
        except OSError:
            planted = tmp / "planted"
            planted.write_text("secret")
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        unix_path = str(tmp / "probe.sock")
        ulistener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ulistener.bind(unix_path)
        ulistener.listen(4)
        try:
            res = await self.run(PROBE.format(port=port, planted=str(planted), unix=unix_path))
        finally:
            listener.close()
            ulistener.close()
            with contextlib.suppress(OSError):
                planted.unlink()
            with contextlib.suppress(OSError):
                os.unlink(unix_path)
            with contextlib.suppress(OSError):
                tmp.rmdir()
        try:
            facts = json.loads(res.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise SandboxUnavailable(f"the isolation probe failed to run: {res.status} {res.stderr[-800:]}") from None
        # /root may hold the interpreter (pyenv): only the path down to it is expected.
        allowed_root = {
            Path(d).parts[2] for d in sandbox.python_binds(self.config.sandbox.python) if d.startswith("/root/")
        }
        failures = probe_failures(facts, allowed_root)
        if not failures:
            # A BOUNDED fork test (never a real bomb): 40 tries, limit 8 tasks.
            res = await self.run(FORK_PROBE, limits={"max_processes": 8, "wall_time_s": 20})
            try:
                forked = int(res.stdout.split()[-1])
            except (ValueError, IndexError):
                forked = -1
            if res.status != "ok" or not 0 <= forked <= 8:
                failures.append(
                    f"the pids cgroup does not bind (forked {forked} of 40 with a limit of 8; status {res.status})"
                )
            else:
                self.pids_limit_proven = True
        if failures:
            raise SandboxUnavailable(
                "isolation check failed, refusing to run code: " + "; ".join(failures) + f"; {FIX_HINT}"
            )


def probe_failures(facts: dict, allowed_root: set[str]) -> list[str]:
    """What the isolation probe's findings say is broken (pure)."""
    failures = []
    if facts.get("inet") == "ALLOWED" or facts.get("inet6") == "ALLOWED":
        failures.append("a job could open an IP socket (need a seccomp filter and a fresh net namespace)")
    if facts.get("loopback") == "ALLOWED":
        failures.append("a job reached the host's loopback")
    if facts.get("unix") == "ALLOWED":
        failures.append("a job reached a host Unix socket")
    if facts.get("planted", True):
        failures.append("a job could see a file planted on the host")
    if facts.get("root") and not set(facts["root"]) <= allowed_root:
        failures.append(f"a job could see /root: {facts['root']}")
    st = facts.get("status", {})
    if st.get("NoNewPrivs") != "1" or st.get("Seccomp") != "2":
        failures.append("no_new_privs or seccomp is not in force for jobs")
    if int(st.get("CapEff", "1"), 16) != 0 or int(st.get("CapBnd", "1"), 16) != 0:
        failures.append("a job still holds capabilities")
    if facts.get("pids") != ["1", "2"]:
        failures.append(f"a job's pid namespace is not its own: {facts.get('pids')}")
    if facts.get("env"):
        failures.append(f"the job's environment leaks: {facts['env']}")
    return failures


PROBE = r"""
import os, socket, json
def attempt(f):
    try:
        f()
        return "ALLOWED"
    except BaseException as e:
        return type(e).__name__
facts = {{}}
facts["inet"] = attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
facts["inet6"] = attempt(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))
def loop():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM); s.settimeout(1); s.connect(("127.0.0.1", {port}))
facts["loopback"] = attempt(loop)
def unix():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(1); s.connect({unix!r})
facts["unix"] = attempt(unix)
facts["planted"] = os.path.exists({planted!r})
facts["root"] = sorted(os.listdir("/root")) if os.path.isdir("/root") else []
facts["status"] = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
facts["status"] = {{k: facts["status"][k].strip() for k in ("Uid", "NoNewPrivs", "Seccomp", "CapEff", "CapBnd")}}
facts["pids"] = sorted(p for p in os.listdir("/proc") if p.isdigit())
facts["env"] = sorted(k for k in os.environ if "TOKEN" in k or "SECRET" in k or "PASSWORD" in k)
print(json.dumps(facts))
"""

FORK_PROBE = r"""
import os, time
kids = []
for _ in range(40):
    try:
        pid = os.fork()
    except OSError:
        continue
    if pid == 0:
        time.sleep(0.3)
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
print(len(kids))
"""
