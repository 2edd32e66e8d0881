"""Reference values computed ahead of time, so that a graded run waits on one job (the learner's), not two.

A graded run compares the learner's values with what the exercise's reference solution gives on the same
random inputs: the reference runs on the run's seed, in a clean job of its own.  Run on demand, that job
comes first and doubles the run's time.  Here, for each exercise graded lately, a few seeds wait with the
reference's values already computed.  A graded run that leaves the seed to the runner takes one, and only
the learner's job is left on its path; taking it starts computing a replacement in the background, when
the pool has a free slot and nothing waiting, so a learner's job never queues behind one.

What stays as it was (grading/ states the threat model):
* the seed is the runner's secret: drawn with ``secrets``, never sent anywhere before its run, and used
  by one run only (taken out when used, whoever asks next gets another), so no learner gets a seed twice;
* the reference still runs alone in a clean job that no learner code ever shares, with the limits the
  learner's run gets, and its values stay outside every sandbox;
* values computed ahead are exactly those an on-demand reference gives for that seed: the same job, the
  same limits, earlier.
A reference that does not run cleanly is a broken exercise: its failure is not kept, and the next graded
run computes its reference on demand and gets the error (JobFailed) as it always did.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import RunnerBusy, RunnerError
from .grading import ExerciseChecks
from .limits import Limits

log = logging.getLogger("runner.references")

SEEDS_PER_EXERCISE = 4  # seeds kept ready per exercise: a burst of graded runs longer than this waits on demand
EXERCISES = 64  # exercises whose seeds are kept (the least recently graded goes first)
IDLE_CHECK_S = 0.02  # seconds between two looks for a free slot, while a replacement waits for one

# (checks, limits, seed) -> the reference's values by check id (backend.run_reference in a slot of the pool).
Compute = Callable[[ExerciseChecks, Limits, int], Awaitable[Mapping[str, Any]]]


@dataclass(frozen=True)
class Ready:
    """A secret seed and what the reference gives on it."""

    seed: int
    values: Mapping[str, Any]


@dataclass
class _Exercise:
    checks: ExerciseChecks
    limits: Limits
    ready: deque[Ready] = field(default_factory=deque)


def key(checks: ExerciseChecks, limits: Limits) -> str:
    """Everything a reference's values depend on, but the seed: the solution, the checks (by id), the limits."""
    return json.dumps([checks.reference, {c.id: c.tree for c in checks.checks}, limits.to_dict()], sort_keys=True)


class ReadyReferences:
    """Seeds with their reference's values, per exercise, each handed out once."""

    def __init__(
        self,
        compute: Compute,
        idle: Callable[[], bool],
        per_exercise: int = SEEDS_PER_EXERCISE,
        exercises: int = EXERCISES,
    ) -> None:
        self._compute = compute
        self._idle = idle  # whether a background job may take a slot now (one free, nobody waiting)
        self._per_exercise = per_exercise
        self._exercises = exercises
        self._by_key: OrderedDict[str, _Exercise] = OrderedDict()
        self._wanted: asyncio.Event = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._closed = False
        self.computed = 0  # references computed ahead
        self.taken = 0  # graded runs that found one ready

    def take(self, checks: ExerciseChecks, limits: Limits) -> Ready | None:
        """A seed never handed out before and its reference's values (None: none ready yet); refills."""
        if self._closed:
            return None
        k = key(checks, limits)
        exercise = self._by_key.get(k)
        if exercise is None:
            exercise = self._by_key[k] = _Exercise(checks, limits)
            while len(self._by_key) > self._exercises:
                self._by_key.popitem(last=False)
        self._by_key.move_to_end(k)
        ready = exercise.ready.popleft() if exercise.ready else None
        if ready is not None:
            self.taken += 1
        self._wanted.set()
        if self._worker is None:
            self._worker = asyncio.ensure_future(self._fill())
        return ready

    @property
    def ready_count(self) -> int:
        return sum(len(e.ready) for e in self._by_key.values())

    def _next_wanted(self) -> _Exercise | None:
        """The most recently graded exercise short of seeds."""
        for exercise in reversed(self._by_key.values()):
            if len(exercise.ready) < self._per_exercise:
                return exercise
        return None

    async def _fill(self) -> None:
        """One reference at a time, only while the pool has room, until every exercise has its seeds."""
        while not self._closed:
            exercise = self._next_wanted()
            if exercise is None:
                self._wanted.clear()
                await self._wanted.wait()
                continue
            if not self._idle():
                await asyncio.sleep(IDLE_CHECK_S)  # off every request's path: a look now and then is enough
                continue
            seed = secrets.randbits(63)
            try:
                values = await self._compute(exercise.checks, exercise.limits, seed)
            except RunnerBusy:
                await asyncio.sleep(IDLE_CHECK_S)
                continue
            except RunnerError as e:
                # A broken reference (or the pool closing): forget the exercise; a graded run that comes for it
                # computes its reference on demand and gets the error there, as it always did.
                log.warning("computing a reference ahead failed: %s", e)
                self._by_key.pop(key(exercise.checks, exercise.limits), None)
                continue
            except Exception:  # a bug here must not end the refills for every exercise
                log.exception("computing a reference ahead failed")
                self._by_key.pop(key(exercise.checks, exercise.limits), None)
                continue
            # The exercise may have been dropped meanwhile (least recently graded): then the values go too.
            current = self._by_key.get(key(exercise.checks, exercise.limits))
            if current is exercise:
                exercise.ready.append(Ready(seed, values))
                self.computed += 1

    async def close(self) -> None:
        """Stop computing (idempotent); the seeds kept are dropped unused."""
        self._closed = True
        self._by_key.clear()
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(BaseException):
                await self._worker
            self._worker = None
