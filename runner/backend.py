"""What both backends share: a request's checks, the slots it waits for, how a job's end is named,
and the graded-run sequence.

The sandboxed pool (pool.py) and the Docker backend (docker_backend.py) differ only in how they run
one job (a ``JobRunner``) and where a reference solution's values come from (the pool caches them).
Everything around that is here, once, and the service (service.py) drives either through ``Backend``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import secrets
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from . import grading
from .errors import InvalidRequest, JobFailed, RunnerBusy
from .grading import ExerciseChecks
from .limits import Limits
from .result import RunResult, Status

# The last stderr line of a job that ran out of memory without the kernel's OOM killer (an allocation refused
# by the cgroup's limit shows up as one of these).
MEMORY_ERROR_MARKERS = (
    "MemoryError",
    "can't allocate memory",
    "DefaultCPUAllocator",
    "not enough memory",
    "std::bad_alloc",
)


class Backend(Protocol):
    """A place where jobs run: the sandboxed pool or Docker."""

    async def start(self) -> Backend: ...
    async def run(
        self,
        code: str,
        limits: Limits | Mapping[str, Any] | None = None,
        checks: ExerciseChecks | None = None,
        seed: int | None = None,
    ) -> RunResult: ...
    def stats(self) -> dict[str, Any]: ...
    async def close(self) -> None: ...


# --- a request --------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One job as asked for, checked, with its limits and seed decided."""

    code: str
    limits: Limits
    checks: ExerciseChecks | None
    seed: int

    @classmethod
    def of(
        cls,
        code: object,
        limits: Limits | Mapping[str, Any] | None,
        checks: object,
        seed: int | None,
        default_limits: Limits,
    ) -> Request:
        """The request, or InvalidRequest saying what is wrong with it."""
        if not isinstance(code, str):
            raise InvalidRequest("code must be a string")
        lim = limits if isinstance(limits, Limits) else Limits.from_dict(limits, default_limits)
        if len(code.encode("utf-8", "surrogatepass")) > lim.code_bytes:
            raise InvalidRequest(f"code is larger than {lim.code_bytes} bytes")
        if checks is not None and not isinstance(checks, ExerciseChecks):
            raise InvalidRequest("checks must be an ExerciseChecks")
        if seed is None:
            seed = checks.seed if checks is not None and checks.seed is not None else secrets.randbits(63)
        # Python's, torch's and numpy's generators all take it (torch's refuses 2**64 and beyond).
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
            raise InvalidRequest("seed must be a whole number from 0 to 2**63 - 1")
        return cls(code, lim, checks, seed)


class Slots:
    """``size`` jobs at once and ``queue`` more waiting for one; a job beyond those gets RunnerBusy."""

    def __init__(self, size: int, queue: int) -> None:
        self.size = size
        self.queue = queue
        self.running = 0
        self.waiting = 0
        self._free = asyncio.Semaphore(size)

    @contextlib.asynccontextmanager
    async def take(self) -> AsyncIterator[None]:
        if self._free.locked() and self.waiting >= self.queue:
            raise RunnerBusy(f"all {self.size} slots busy and {self.waiting} jobs queued")
        self.waiting += 1
        try:
            await self._free.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            self._free.release()


# --- how a job ended --------------------------------------------------------


@dataclass(frozen=True)
class JobEnd:
    """How a job's process ended, as the machinery outside the sandbox saw it."""

    exit_code: int | None  # None when a signal ended it
    signal: int | None  # the signal that ended it
    stderr: str
    truncated: bool = False  # its output reached the output limit
    flooded: bool = False  # it wrote more than allowed on a descriptor the runner reads besides its output
    timed_out: bool = False  # its wall-clock time ran out
    cpu_exceeded: bool = False  # the runner stopped it for its CPU time (its cgroup's, all processes together)
    oom_killed: bool = False  # the kernel's OOM killer struck in its cgroup
    cpu_s: float | None = None  # CPU seconds it used; None: not measured


def classify(end: JobEnd, limits: Limits) -> Status:
    """The job's status.  Pure; order matters: a limit wins over what it caused."""
    if end.truncated or end.flooded:
        return Status.OUTPUT_LIMIT
    if end.timed_out:
        return Status.TIMEOUT
    if end.cpu_exceeded:
        return Status.CPU_LIMIT
    if end.oom_killed:
        return Status.MEMORY_LIMIT
    if end.signal is not None:
        # RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard one.
        over_cpu = end.signal == signal.SIGXCPU or (
            end.signal == signal.SIGKILL and end.cpu_s is not None and end.cpu_s >= limits.cpu_time_s
        )
        return Status.CPU_LIMIT if over_cpu else Status.KILLED
    if end.exit_code:
        last = [ln for ln in end.stderr.strip().splitlines() if ln.strip()][-1:] or [""]
        return Status.MEMORY_LIMIT if any(m in last[0] for m in MEMORY_ERROR_MARKERS) else Status.ERROR
    return Status.OK


# --- the graded-run sequence ------------------------------------------------

# Runs one job: (code, limits, seed, the checks' job spec or None) -> (result, the raw report or None).
JobRunner = Callable[[str, Limits, int, dict[str, Any] | None], Awaitable[tuple[RunResult, bytes | None]]]
# The values an exercise's reference solution gives: (checks, limits, seed) -> values by check id.
ReferenceProvider = Callable[[ExerciseChecks, Limits, int], Awaitable[Mapping[str, Any]]]


async def run_request(request: Request, run_job: JobRunner, reference: ReferenceProvider) -> RunResult:
    """Run ``request``; a graded one is: the reference (when its checks need it), the job, then the verdict."""
    checks = request.checks
    if checks is None:
        result, _ = await run_job(request.code, request.limits, request.seed, None)
        return result
    expected = None
    if checks.needs_reference:
        reference_seed = checks.reference_seed if checks.reference_seed is not None else request.seed
        expected = await reference(checks, request.limits, reference_seed)
    nonce = grading.new_nonce()
    # The submitted source is read here, outside the sandbox, while the job runs (a parse of up to 64 KiB).
    of_source = any(c.of_source for c in checks.checks)
    source = asyncio.ensure_future(asyncio.to_thread(grading.judge_source, checks, request.code)) if of_source else None
    try:
        result, report = await run_job(request.code, request.limits, request.seed, grading.job_spec(checks, nonce))
    finally:
        judged = await source if source is not None else {}
    # verify() judges any bytes without raising: whatever the sandbox wrote is the learner's attempt, not our failure.
    outcomes, passed = grading.verify(checks, result.status, report, nonce, expected, judged)
    return dataclasses.replace(result, checks=outcomes, passed=passed)


async def run_reference(run_job: JobRunner, checks: ExerciseChecks, limits: Limits, seed: int) -> Mapping[str, Any]:
    """The values of the checks' expressions after the reference solution ran (a clean job, same seed).

    A reference that does not run cleanly, or whose expressions fail, is a broken exercise: JobFailed.
    """
    if checks.reference is None:
        raise InvalidRequest("these checks have no reference solution")
    nonce = grading.new_nonce()
    result, report = await run_job(checks.reference, limits, seed, grading.job_spec(checks, nonce))
    problem = f"status {result.status}"
    if result.status is Status.OK:
        try:
            values = grading.parse_report(report or b"", nonce)
        except grading.ReportError as e:
            problem = f"its report is {e.args[0]}"
        else:
            unreadable = (grading.Failed, grading.Opaque)
            failed = [
                c.id
                for c in checks.checks
                if c.from_reference and (c.id not in values or isinstance(values[c.id], unreadable))
            ]
            if not failed:
                return values
            problem = f"check {', '.join(failed)} could not be read"
    raise JobFailed(f"the exercise's reference solution did not run cleanly ({problem}): {result.stderr[-500:]}")
