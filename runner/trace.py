"""Where one job's time goes: stage marks on one clock, kept only for a request that asks for them.

A run request with ``"trace": true`` gets its result with a ``trace`` key: a list of ``[stage, ns]``,
each the CLOCK_MONOTONIC time in nanoseconds at which that stage ended.  Every process on the host
reads the same clock (the runner, the zygote, each job: there is no time namespace), so the marks of
the service, the pool, the zygote's fork and the job's own process line up on one axis, and
bench/runner.py turns them into durations, client to reply.  Marks made ahead of time, while the
sandbox was prepared before any request, are named ``ahead.*``.

Untraced requests pay one context-variable lookup per mark.  The job's own marks travel back in its
"done" message, which learner code can write too: they are timestamps for a benchmark, parsed as
hostile input (``from_job``), and nothing decides anything from them.
"""

from __future__ import annotations

import contextvars
import time
from typing import Any

MAX_JOB_MARKS = 32  # marks taken from a job's "done" message; more are dropped
MAX_NAME = 40  # characters of a mark's name from a job

Marks = list[tuple[str, int]]

current: contextvars.ContextVar[Marks | None] = contextvars.ContextVar("runner_trace", default=None)


def now() -> int:
    return time.monotonic_ns()


def start(first: str, at: int) -> Marks:
    """Trace the request handled in this context from here on, its first mark ``first`` taken ``at``."""
    marks: Marks = [(first, at)]
    current.set(marks)
    return marks


def mark(stage: str) -> None:
    """The stage that ends now, if this request is traced."""
    marks = current.get()
    if marks is not None:
        marks.append((stage, time.monotonic_ns()))


def add(more: Marks) -> None:
    """Marks taken elsewhere (ahead of time, or by the job), if this request is traced."""
    marks = current.get()
    if marks is not None:
        marks.extend(more)


def active() -> bool:
    return current.get() is not None


def from_job(value: object) -> Marks:
    """A job's marks as it reported them: ``[[name, ns], ...]``; anything malformed is dropped."""
    if not isinstance(value, list):
        return []
    out: Marks = []
    for item in value[:MAX_JOB_MARKS]:
        if (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], str)
            and isinstance(item[1], int)
            and not isinstance(item[1], bool)
            and 0 <= item[1] < 2**63
        ):
            out.append(("job." + item[0][:MAX_NAME], item[1]))
    return out


def to_wire(marks: Marks) -> list[list[Any]]:
    return [[name, ns] for name, ns in marks]
