"""The warm pool: one sandboxed zygote, N job slots, a bounded queue.

Everything here runs in the runner's own process (outside the sandbox) and
is the trusted side: it owns the cgroups, the job's pipes and timers, and it
alone decides a job's status and a graded run's verdict.  It never imports
torch.  The zygote is started and spoken to through zygote_control.py; the
isolation is proved at start by self_check.py; what both backends share
(slots, statuses, the graded-run sequence) is in backend.py.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import itertools
import json
import logging
import os
import secrets
import socket
import struct
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from . import backend, cgroups, grading, info, pipes, sandbox, trace, uids
from .backend import JobEnd, Request, Slots
from .config import RunnerConfig
from .errors import InvalidRequest, JobFailed, RunnerClosed, SandboxUnavailable
from .limits import DEFAULT, Limits
from .references import Ready, ReadyReferences
from .result import RunResult
from .self_check import prove_isolation
from .zygote import INLINE_SPEC_BYTES, send_msg
from .zygote_control import Message, ZygoteControl

log = logging.getLogger("runner.pool")

SETUP_TIMEOUT_S = 15.0  # seconds for a job's sandbox to get ready (not learner time)
EXIT_REPORT_TIMEOUT_S = 5.0  # seconds for the zygote to report the exit of a job we killed
DONE_BYTES = 4096  # bytes of the "done" message a job may write (more: not a valid one)
CPU_CHECK_MIN_S = 0.01  # seconds between two looks at a job's CPU time, at the closest
# A job's pipes wake the runner for each write: a one-byte trickle cost it 15-30% of a core per job, outside
# every cgroup.  After FREE_WAKEUPS wake-ups a job's streams are each read at most once per TRICKLE_PAUSE_S
# (a writer meanwhile fills its pipe, then blocks: its own time, not the runner's).
FREE_WAKEUPS = 64
TRICKLE_PAUSE_S = 0.02
REFERENCE_CACHE = 256  # reference solutions' values kept (per solution, seed and expressions)


@dataclass(frozen=True)
class PoolConfig:
    size: int  # jobs running at once
    queue: int  # jobs allowed to wait for a slot; one more -> RunnerBusy
    sandbox: sandbox.SandboxConfig
    startup_timeout_s: float  # seconds for the zygote to import torch
    limits: Limits = DEFAULT  # default limits of a job
    self_check: bool = True  # prove isolation at start; refuse to serve otherwise

    @classmethod
    def from_config(cls, config: RunnerConfig) -> PoolConfig:
        return cls(
            size=config.pool_size,
            queue=config.queue,
            sandbox=sandbox.SandboxConfig.from_config(config),
            startup_timeout_s=config.startup_timeout_s,
        )


async def _readable(fd: int, timeout: float) -> None:
    """Wait until ``fd`` is readable (TimeoutError after ``timeout`` seconds)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()

    def ready() -> None:
        if not fut.done():
            fut.set_result(None)

    loop.add_reader(fd, ready)
    try:
        await asyncio.wait_for(fut, timeout)
    finally:
        loop.remove_reader(fd)


@dataclass
class _Ready:
    """A prepared sandbox: G forked, in its namespaces and its cgroup, waiting on ``sup`` for a job."""

    id: str
    sup: socket.socket
    exit_fut: asyncio.Future[Message]
    pid: int
    cgroup: cgroups.JobCgroup
    tmpfs_bytes: int
    marks: trace.Marks  # when each stage of its preparation ended (runner/trace.py)


class _Job:
    """One job's pipes while it runs, and why it stopped running."""

    def __init__(self, jid: str, limits: Limits, nonce: str | None) -> None:
        self.id = jid
        self.limits = limits
        self.token = secrets.token_hex(8)
        self.ended: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.streams: list[pipes.Stream] = []
        self.wakeups = 0  # times its pipes woke the runner
        self._paused: dict[int, asyncio.TimerHandle] = {}  # streams (by fd) waiting out a trickle pause
        # G's ends: the write ends of [stdout, stderr, done(, report)], and a graded job's nonce pipe's read end.
        self.child_ends: list[int] = []
        try:
            output = pipes.Budget(limits.output_bytes)  # stdout and stderr together
            self.out = self._pipe(output)
            self.err = self._pipe(output)
            self.done = self._pipe(pipes.Budget(DONE_BYTES))
            self.report = self._pipe(pipes.Budget(grading.MAX_REPORT)) if nonce is not None else None
            if nonce is not None:
                # The nonce waits in a pipe, not in the job's spec: extraction reads it only once the learner's
                # code has ended, so no frame or object of that code ever holds it (grading/).
                r, w = os.pipe2(os.O_CLOEXEC)
                try:
                    os.write(w, nonce.encode("ascii"))
                finally:
                    os.close(w)
                self.child_ends.append(r)
        except OSError:
            self.close()
            raise

    def _pipe(self, budget: pipes.Budget) -> pipes.Stream:
        r, w = os.pipe2(os.O_CLOEXEC)
        self.child_ends.append(w)
        stream = pipes.Stream(r, budget)
        self.streams.append(stream)
        return stream

    def close_child_ends(self) -> None:
        for fd in self.child_ends:
            os.close(fd)
        self.child_ends = []

    def close(self) -> None:
        self.close_child_ends()
        for stream in self.streams:
            stream.close()

    def end(self, reason: str) -> None:
        if not self.ended.done():
            self.ended.set_result(reason)

    def start_reading(self) -> None:
        loop = asyncio.get_running_loop()
        for stream in self.streams:
            loop.add_reader(stream.fd, self.on_readable, stream)

    def stop_reading(self) -> None:
        loop = asyncio.get_running_loop()
        for handle in self._paused.values():
            handle.cancel()
        self._paused.clear()
        for stream in self.streams:
            if not stream.eof:
                loop.remove_reader(stream.fd)

    def on_readable(self, stream: pipes.Stream) -> None:
        loop = asyncio.get_running_loop()
        self.wakeups += 1
        stream.pump()
        if stream.eof or stream.overflow:  # an overflowed stream is never read again (pipes.Stream.pump)
            loop.remove_reader(stream.fd)
        elif self.wakeups > FREE_WAKEUPS and not self.ended.done():
            loop.remove_reader(stream.fd)
            self._paused[stream.fd] = loop.call_later(TRICKLE_PAUSE_S, self._resume, stream)
        if stream.overflow:
            # Any stream: stdout and stderr share the output budget; "done" and the report have their own,
            # and a job flooding them ends as one flooding its output does.
            self.end("output_limit")
        elif stream is self.done and not self.graded and self.said_done() is not None:
            self.end("done")

    def _resume(self, stream: pipes.Stream) -> None:
        del self._paused[stream.fd]
        asyncio.get_running_loop().add_reader(stream.fd, self.on_readable, stream)

    @property
    def graded(self) -> bool:
        """A graded job ends at its process's real exit: its "done" could be written by the learner's code."""
        return self.report is not None

    @property
    def truncated(self) -> bool:
        """Its output (stdout + stderr) reached the output limit."""
        return self.out.overflow or self.err.overflow

    @property
    def flooded(self) -> bool:
        """It wrote more than allowed on "done" or the report."""
        return self.done.overflow or (self.report is not None and self.report.overflow)

    def said_done(self) -> Message | None:
        """The exit the job reported on its "done" pipe, as an exit message (None: not yet)."""
        raw = bytes(self.done.data)
        try:
            d = json.loads(raw[raw.rfind(b"{") :])  # the last message counts
            if self.done.overflow or d.get("token") != self.token:
                return None
            return {"status": (int(d["exit"]) & 0xFF) << 8, "utime": float(d.get("cpu", 0.0)), "stime": 0.0}
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def marks(self) -> trace.Marks:
        """The stage marks the job reported with its "done" (a traced job's; hostile input, see trace.py)."""
        raw = bytes(self.done.data)
        try:
            d = json.loads(raw[raw.rfind(b'{"exit"') :])
        except ValueError:
            return []
        return trace.from_job(d.get("t")) if isinstance(d, dict) else []

    def report_bytes(self) -> bytes | None:
        if self.report is None:
            return None
        return b"" if self.report.overflow else bytes(self.report.data)


def _send_job(sup: socket.socket, report: bool, spec: dict[str, Any], fds: list[int]) -> None:
    """The job to its prepared sandbox: the spec inline (one datagram G has whole on waking), or in a memfd
    passed first when it is larger than INLINE_SPEC_BYTES (long code)."""
    if len(spec["code"]) < INLINE_SPEC_BYTES:  # JSON is never shorter than the code it holds
        data = json.dumps({"op": "job", "report": report, "spec": spec}).encode()
        if len(data) <= INLINE_SPEC_BYTES:
            trace.mark("pool.spec")
            sup.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            return
    spec_fd = os.memfd_create("job-spec", os.MFD_CLOEXEC)
    try:
        os.write(spec_fd, json.dumps(spec).encode())
        os.lseek(spec_fd, 0, os.SEEK_SET)
        trace.mark("pool.spec")
        send_msg(sup, {"op": "job", "report": report}, [spec_fd, *fds])
    finally:
        os.close(spec_fd)


class _CpuWatch:
    """Ends a job ("cpu_limit") once its cgroup has used its CPU limit, whatever the number of its processes.

    RLIMIT_CPU stays set, but counts each process apart; this counts the cgroup.  The job cannot gain more
    than ``cores`` CPU seconds per second, so the first look comes when it could first be over, and each
    next one when the rest of its budget could first be spent: a few looks per job that runs that long.
    """

    def __init__(
        self, cg: cgroups.JobCgroup, start: float | None, limit_s: float, cores: float, end: Callable[[str], None]
    ) -> None:
        self._cg, self._start, self._limit, self._cores, self._end = cg, start, limit_s, cores, end
        self._handle: asyncio.TimerHandle | None = None
        if start is not None:
            self._handle = asyncio.get_running_loop().call_later(limit_s / cores, self._check)

    def used(self) -> float | None:
        """CPU seconds the job's cgroup used since it started (None: not measurable here)."""
        now = self._cg.cpu_usage_s()
        return None if now is None or self._start is None else max(0.0, now - self._start)

    def _check(self) -> None:
        used = self.used()
        if used is None:
            return
        left = self._limit - used
        if left <= 0:
            self._end("cpu_limit")
        else:
            self._handle = asyncio.get_running_loop().call_later(max(left / self._cores, CPU_CHECK_MIN_S), self._check)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()


class Pool:
    """Run snippets in the sandbox: ``await pool.run(code)`` -> RunResult."""

    def __init__(self, config: PoolConfig) -> None:
        if config.size < 1 or config.queue < 0:
            raise InvalidRequest("pool size must be >= 1 and queue >= 0")
        self.config = config
        self.zygote: ZygoteControl | None = None
        self.tree: cgroups.CgroupTree | None = None
        self._slots = Slots(config.size, config.queue)
        self._started = False
        self._ids = itertools.count(1)
        self._closed = False
        self._restart_lock = asyncio.Lock()
        self._reference_cache: OrderedDict[str, Mapping[str, Any]] = OrderedDict()
        # Seeds whose reference values are computed ahead (references.py): a graded run waits on one job.
        self._references = ReadyReferences(self._reference_ahead, self._has_room)
        # Sandboxes prepared ahead (forked, namespaced, in a cgroup, waiting
        # for a job).  More of them than slots, so back-to-back jobs do not
        # wait for a preparation to finish.
        self._ready: deque[_Ready] = deque()
        self._ready_changed = asyncio.Event()
        self._preparing = 0
        self._prepare_tasks: set[asyncio.Task[None]] = set()
        self._cells: asyncio.Queue[cgroups.JobCgroup] = asyncio.Queue()
        self._recycling: set[asyncio.Task[None]] = set()
        # Each running job gets a lane: CPUs of its own (cgroups.cpu_lanes), decided at start.
        self._lanes: list[str] = []
        self._free_lanes: list[int] = []
        self.pids_limit_proven = False
        self.jobs_done = 0
        self.fingerprint = ""  # of the code and torch that run the jobs (info.py), once the zygote started
        self.job_bytes_read = 0  # bytes read from jobs' pipes, kept or dropped
        self.job_wakeups = 0  # times jobs' pipes woke the runner
        # Host uids of the jobs, one per cgroup cell (uids.py); None when the runner is not root.
        self.uids: uids.UidBlock | None = None
        self._cell_uid: dict[int, int] = {}  # id(cell) -> its jobs' host uid

    # --- lifecycle -------------------------------------------------------
    async def start(self) -> Pool:
        problems = sandbox.host_problems(self.config.sandbox)
        if problems:
            raise SandboxUnavailable("cannot sandbox on this host: " + "; ".join(problems))
        # Two cgroups per slot: the next job's sandbox gets ready in a fresh
        # one while the last job's processes are still being torn down.
        self.tree = cgroups.CgroupTree.create(self._target_ready + 2 * self.config.size)
        if os.geteuid() == 0:
            self.uids = uids.claim(self.config.sandbox.sandbox_uid, len(self.tree.slots))
            self._cell_uid = {id(cell): self.uids.uid(i) for i, cell in enumerate(self.tree.slots)}
        else:
            log.warning(
                "not root: every job runs as this runner's uid and shares its kernel counters (uids.py); "
                "a runner started as root runs each slot as a uid of its own (the image: a runner alone, README)"
            )
        for cell in self.tree.slots:
            self._cells.put_nowait(cell)
        self._lanes = cgroups.cpu_lanes(sorted(os.sched_getaffinity(0)), self.config.size)
        self._free_lanes = list(reversed(range(len(self._lanes))))
        self._started = True
        try:
            await self._start_zygote()
            self._refill()
            if self.config.self_check:
                await prove_isolation(self, self.config.sandbox.python, self._zygote_stderr)
                self.pids_limit_proven = True
        except BaseException:
            await self.close()
            raise
        return self

    def _zygote_stderr(self) -> str:
        return self.zygote.stderr_tail() if self.zygote else ""

    async def _start_zygote(self) -> ZygoteControl:
        block = (self.uids.first, self.uids.count) if self.uids is not None else None
        z = ZygoteControl(self.config.sandbox, block)
        await z.start(self.config.startup_timeout_s)
        self.zygote = z
        self.fingerprint = info.sandbox_fingerprint(z.torch_version)
        log.info("zygote ready (torch %s)", z.torch_version)
        return z

    async def _ensure_zygote(self) -> ZygoteControl:
        if self.zygote is not None and self.zygote.alive:
            return self.zygote
        async with self._restart_lock:
            if self.zygote is not None and self.zygote.alive:
                return self.zygote
            if self._closed:
                raise RunnerClosed("the pool is closed")
            log.warning("restarting the sandboxed zygote")
            if self.zygote is not None:
                await self.zygote.stop()
            return await self._start_zygote()

    async def close(self) -> None:
        self._closed = True
        await self._references.close()
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
            tree, self.tree = self.tree, None
            # Killing what is left and removing the directories waits for the kernel: not on the loop.
            await asyncio.to_thread(tree.destroy)
        if self.uids is not None:
            self.uids.release()  # once no process of ours runs as them any more

    async def __aenter__(self) -> Pool:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def stats(self) -> dict[str, Any]:
        """What the pool runs with and what it is doing (the service's "info")."""
        return {
            "backend": "sandbox",
            "size": self.config.size,
            "queue": self.config.queue,
            "bwrap": self.config.sandbox.bwrap,
            "sandbox_uid": self.config.sandbox.sandbox_uid,
            "job_uids": [self.uids.first, self.uids.count] if self.uids is not None else None,
            "startup_timeout_s": self.config.startup_timeout_s,
            "running": self._slots.running,
            "waiting": self._slots.waiting,
            "jobs_done": self.jobs_done,
            "job_bytes_read": self.job_bytes_read,
            "job_wakeups": self.job_wakeups,
            "torch": self.zygote.torch_version if self.zygote else None,
            "fingerprint": self.fingerprint,
            "cgroup_version": self.tree.layout.version if self.tree else None,
            "io_limited": self.tree.io_limited if self.tree else False,
            "cpu_lanes": self._lanes,
            "pids_limit_proven": self.pids_limit_proven,
            "zygote_pid": self.zygote.proc.pid if self.zygote and self.zygote.proc else None,
            "references_ready": self._references.ready_count,
            "references_computed_ahead": self._references.computed,
            "references_taken": self._references.taken,
        }

    # --- running ---------------------------------------------------------
    async def run(
        self,
        code: str,
        limits: Limits | Mapping[str, Any] | None = None,
        checks: grading.ExerciseChecks | None = None,
        seed: int | None = None,
    ) -> RunResult:
        if self._closed or not self._started:
            raise RunnerClosed("the pool is not running")
        request = Request.of(code, limits, checks, seed, self.config.limits)
        reference: backend.ReferenceProvider = self._reference
        runner_seeds = seed is None and checks is not None and checks.seed is None and checks.reference_seed is None
        if checks is not None and checks.needs_reference and runner_seeds:
            # The runner chooses the seed: one whose reference is ready, if any (else a fresh one, computed now).
            ready = self._references.take(checks, request.limits)
            if ready is not None:
                request = replace(request, seed=ready.seed)
                reference = self._ready_reference(ready)
        return await backend.run_request(request, self._run_in_slot, reference)

    def _ready_reference(self, ready: Ready) -> backend.ReferenceProvider:
        async def reference(checks: grading.ExerciseChecks, lim: Limits, seed: int) -> Mapping[str, Any]:
            return ready.values if seed == ready.seed else await self._reference(checks, lim, seed)

        return reference

    async def _reference_ahead(self, checks: grading.ExerciseChecks, lim: Limits, seed: int) -> Mapping[str, Any]:
        """A reference computed ahead: its seed is used once, so it is not cached."""
        return await backend.run_reference(self._run_in_slot, checks, lim, seed)

    def _has_room(self) -> bool:
        """Whether a job of our own may take a slot now without a learner's waiting behind it."""
        return self._started and not self._closed and not self._slots.waiting and self._slots.running < self._slots.size

    async def _reference(self, checks: grading.ExerciseChecks, lim: Limits, seed: int) -> Mapping[str, Any]:
        """The reference solution's values, run once per solution, seed, checks (by id) and limits."""
        # Everything the values depend on: the values come back by check id, so two checks that swap ids (a lesson
        # reloaded) are another key; the limits too (a reference that runs out of them fails).
        key = json.dumps([checks.reference, seed, {c.id: c.tree for c in checks.checks}, lim.to_dict()], sort_keys=True)
        if key in self._reference_cache:
            self._reference_cache.move_to_end(key)
            return self._reference_cache[key]
        values = await backend.run_reference(self._run_in_slot, checks, lim, seed)
        self._reference_cache[key] = values
        while len(self._reference_cache) > REFERENCE_CACHE:
            self._reference_cache.popitem(last=False)
        return values

    async def _run_in_slot(
        self, code: str, lim: Limits, seed: int, checks_spec: dict[str, Any] | None
    ) -> tuple[RunResult, bytes | None]:
        async with self._slots.take():
            trace.mark("pool.slot")
            return await self._run_job(code, lim, seed, checks_spec)

    # --- ready sandboxes: prepared ahead ------------------------------------
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
            ready = await self._prepare()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("preparing a sandbox failed: %s", e)
            await asyncio.sleep(0.2)  # not at once again: the cause may still be there
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

    async def _prepare(self, tmpfs_bytes: int | None = None) -> _Ready:
        """Fork a G: namespaces, mounts, into a free cgroup; it then waits for a job."""
        tmpfs_bytes = tmpfs_bytes or self.config.limits.tmpfs_bytes
        marks = [("ahead.prepare", trace.now())]
        z = await self._ensure_zygote()
        cg = await self._cells.get()
        jid = f"j{next(self._ids)}"
        sup, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sup.setsockopt(socket.SOL_SOCKET, sandbox.SO_PASSCRED, 1)
        exit_fut = z.expect("exit", jid)
        spawn_fut = z.expect("spawn", jid)
        uid = self._cell_uid.get(id(cg))
        try:
            try:
                ids = [uid, uid] if uid is not None else None
                await z.send({"op": "spawn", "job": jid, "tmpfs_bytes": tmpfs_bytes, "ids": ids}, [child.fileno()])
            finally:
                child.close()
            marks.append(("ahead.spawn_sent", trace.now()))
            sup.setblocking(False)
            msg = await asyncio.wait_for(spawn_fut, SETUP_TIMEOUT_S)
            marks.append(("ahead.spawned", trace.now()))
            if msg.get("op") != "spawned":
                raise JobFailed(f"could not start a job: {msg.get('error')}")
            # Hello: G's pid (translated into our pid namespace by the kernel).
            data, pid, creds_uid = await self._recv_creds(sup)
            if pid is None or data != b"hello":
                raise JobFailed(f"job setup failed: {data[:300].decode('utf-8', 'replace')}")
            marks.append(("ahead.hello_received", trace.now()))
            if os.geteuid() == 0 and creds_uid == 0:
                # Never run learner code as host root (see sandbox.py).
                raise JobFailed("refusing to run: the job's process is uid 0 on the host")
            if uid is not None and creds_uid != uid:
                # Its slot's uid alone keeps the kernel's per-user counters apart from other jobs' (uids.py).
                raise JobFailed(f"refusing to run: the job's process is uid {creds_uid}, not its slot's {uid}")
            try:
                # Moving a task between v1 cgroups waits for RCU grace periods
                # (milliseconds of sleep, per hierarchy): keep the loop free.
                await asyncio.to_thread(cg.add, pid)
            except OSError as e:
                raise JobFailed(f"cannot put the job into its cgroup: {e}") from e
            marks.append(("ahead.cgroup_attached", trace.now()))
        except BaseException:
            sup.close()
            z.forget("exit", jid)
            z.forget("spawn", jid)
            self._recycle(cg)
            raise
        return _Ready(jid, sup, exit_fut, pid, cg, tmpfs_bytes, marks)

    def _recycle(self, cg: cgroups.JobCgroup) -> None:
        """SIGKILL everything in ``cg`` now; hand it back once it is empty."""
        cg.kill_all(timeout=0)

        async def wait_empty() -> None:
            delay = 0.002
            while cg.pids():
                cg.kill_all(timeout=0)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.1)
            self._cells.put_nowait(cg)

        task = asyncio.ensure_future(wait_empty())
        self._recycling.add(task)
        task.add_done_callback(self._recycling.discard)

    async def _take_ready(self, lim: Limits) -> _Ready:
        if lim.tmpfs_bytes != self.config.limits.tmpfs_bytes:
            return await self._prepare(lim.tmpfs_bytes)  # rare: its own sandbox
        deadline = time.monotonic() + SETUP_TIMEOUT_S
        while True:
            while self._ready:
                ready = self._ready.popleft()
                if len(self._ready) < self.config.size:
                    # Running short (a burst): prepare the next ones now.  Otherwise after this job (_release): a
                    # zygote forking and a new sandbox confining itself would compete with it for the CPUs.
                    self._refill()
                if not ready.exit_fut.done():
                    return ready
                ready.sup.close()  # died while waiting (zygote restart)
                self._recycle(ready.cgroup)
            self._refill()
            if self._preparing == 0:
                # Nothing on the way (preparation keeps failing): try once here.
                return await self._prepare()
            self._ready_changed.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise JobFailed("no sandbox could be prepared in time")
            try:
                await asyncio.wait_for(self._ready_changed.wait(), left)
            except TimeoutError:
                raise JobFailed("no sandbox could be prepared in time") from None

    # --- one job -------------------------------------------------------------
    async def _run_job(
        self, code: str, lim: Limits, seed: int, checks_spec: dict[str, Any] | None
    ) -> tuple[RunResult, bytes | None]:
        loop = asyncio.get_running_loop()
        ready = await self._take_ready(lim)
        trace.add(ready.marks)
        trace.mark("pool.sandbox_taken")
        cg = ready.cgroup
        sup, exit_fut = ready.sup, ready.exit_fut
        job: _Job | None = None
        started_at = ended_at = 0.0
        cpu_s: float | None = None
        finished = False  # the job said it finished: what is left of it can go after the reply
        # There is always a free lane: no more jobs run at once than there are lanes (the slots see to it).
        lane = self._free_lanes.pop() if self._free_lanes else None
        try:
            cg.configure(lim)
            self._pin(cg, lane)
            trace.mark("pool.cgroup_limits")
            nonce = str(checks_spec["nonce"]) if checks_spec is not None else None
            job = _Job(ready.id, lim, nonce)
            trace.mark("pool.pipes")
            spec = {
                "code": code,
                "limits": lim.to_dict(),
                "seed": seed,
                "checks": {"exprs": checks_spec["exprs"]} if checks_spec is not None else None,
                "done_token": job.token,
            }
            if trace.active():
                spec["trace"] = True
            try:
                _send_job(sup, job.report is not None, spec, job.child_ends)
            except OSError as e:
                raise JobFailed(f"the prepared sandbox went away: {e}") from e
            finally:
                job.close_child_ends()
            trace.mark("pool.job_sent")
            job.start_reading()
            started_at = time.monotonic()
            cpu_at_start = cg.cpu_usage_s()  # the sandbox's own setup ran in this cgroup too
            end = job.end
            exit_fut.add_done_callback(lambda _: end("exit"))
            timer = loop.call_later(lim.wall_time_s, job.end, "timeout")
            cpu_watch = _CpuWatch(cg, cpu_at_start, lim.cpu_time_s, self._cores(cg, lane), job.end)
            trace.mark("pool.watching")
            try:
                reason = await job.ended
            finally:
                timer.cancel()
                cpu_watch.cancel()
            trace.mark("pool.ended")
            ended_at = time.monotonic()
            cpu_s = cpu_watch.used()
            trace.mark("pool.cpu_read")
            # Whatever happened, nothing of this job survives it: at once when it must end before its result
            # (killed, or a graded run, whose status is its real exit); after the reply when it said it finished.
            finished = reason == "done"
            if not finished:
                cg.kill_all(timeout=0)
                trace.mark("pool.killed")
            exit_msg = exit_fut.result() if exit_fut.done() else None
            said_done = job.said_done()
            if exit_msg is not None and said_done is None:
                self._raise_setup_error(sup)
            if exit_msg is None and not job.graded:
                # Finished by its own account (a crash after that still shows
                # if the exit is already in; it usually is not yet), or killed.
                exit_msg = said_done
            if exit_msg is None:  # timeout / output limit: it was killed
                try:
                    exit_msg = await asyncio.wait_for(asyncio.shield(exit_fut), EXIT_REPORT_TIMEOUT_S)
                except TimeoutError:
                    raise JobFailed("the job's exit was never reported") from None
        finally:
            sup.close()
            if job is not None:
                job.stop_reading()
                self.job_wakeups += job.wakeups
                for stream in job.streams:
                    stream.pump(None)  # what is left in the pipe (the writers are gone, or said they are done)
                    stream.close()
                    self.job_bytes_read += stream.taken
            if not exit_fut.done():
                exit_fut.add_done_callback(lambda f: f.cancelled() or f.exception())
            if finished:
                # Callbacks run once this task yields: after the service has written the reply.
                loop.call_soon(self._release, cg, lane)
            else:
                self._release(cg, lane)
        trace.mark("pool.cleaned")
        self.jobs_done += 1
        result = self._result(job, exit_msg, reason, (ended_at - started_at) * 1000.0, cg, cpu_s)
        if trace.active():
            trace.add(job.marks())
            trace.mark("pool.result")
        return result, job.report_bytes()

    def _release(self, cg: cgroups.JobCgroup, lane: int | None) -> None:
        """After a job: kill what is left of it, free its lane, and prepare the sandboxes it may have used up."""
        self._recycle(cg)
        if lane is not None:
            self._free_lanes.append(lane)
        self._refill()

    def _pin(self, cg: cgroups.JobCgroup, lane: int | None) -> None:
        if lane is None:
            return
        try:
            cg.pin(self._lanes[lane])
        except OSError as e:  # a host whose cpuset refuses: the job still has its CPU quota
            log.warning("cannot pin a job to CPUs %s: %s", self._lanes[lane], e)

    def _cores(self, cg: cgroups.JobCgroup, lane: int | None) -> float:
        """The most CPU time a job can gain per second of wall time: its quota, else the CPUs it may use."""
        if cg.cpu_quota_cores is not None:
            return cg.cpu_quota_cores
        if lane is not None:
            return float(len(self._lanes[lane].split(",")))
        return float(os.cpu_count() or 1)

    @staticmethod
    def _raise_setup_error(sup: socket.socket) -> None:
        """G reports a failure of its own setup on sup (before learner code)."""
        try:
            data = sup.recv(4096)
        except OSError:  # BlockingIOError included: nothing was reported
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
                    await _readable(sup.fileno(), left)
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
    def _result(
        job: _Job,
        exit_msg: Message,
        reason: str,
        duration_ms: float,
        cg: cgroups.JobCgroup,
        cpu_s: float | None,
    ) -> RunResult:
        status_word = int(exit_msg.get("status", 0))
        if cpu_s is None:  # no CPU accounting in the cgroup: what the job's process said of itself
            cpu_s = float(exit_msg.get("utime", 0.0)) + float(exit_msg.get("stime", 0.0))
        exit_code = sig = None
        if os.WIFSIGNALED(status_word):
            sig = os.WTERMSIG(status_word)
        elif os.WIFEXITED(status_word):
            exit_code = os.WEXITSTATUS(status_word)
        stderr = job.err.data.decode("utf-8", "replace")
        end = JobEnd(
            exit_code,
            sig,
            stderr,
            truncated=job.truncated,
            flooded=job.flooded,
            timed_out=reason == "timeout",
            cpu_exceeded=reason == "cpu_limit",
            oom_killed=cg.oom_killed(),
            cpu_s=cpu_s,
        )
        return RunResult(
            status=backend.classify(end, job.limits),
            stdout=job.out.data.decode("utf-8", "replace"),
            stderr=stderr,
            exit_code=exit_code,
            signal=sig,
            duration_ms=round(duration_ms, 3),
            truncated=job.truncated,
            cpu_time_ms=round(cpu_s * 1000.0, 3),
        )
