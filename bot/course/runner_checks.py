"""The course's hidden checks as the runner takes them: an exercise's, and a Parsons drill's on its fixed seed.

Expected values stay outside the sandbox: a check without ``expect`` is compared with what the reference (the
exercise's solution, the drill's own order) gives on the same random inputs, run by the runner in a clean job.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from bot.course.model import Exercise, ParsonsDrill
from runner.client import Check, ExerciseChecks


def exercise_checks(exercise: Exercise) -> ExerciseChecks:
    """Return the exercise's checks as the runner takes them, with the solution as the reference if one needs it."""
    checks = tuple(Check(id=c.id, expr=c.expr, kind=c.kind, expect=c.expect) for c in exercise.checks)
    needs_solution = any(c.from_solution for c in exercise.checks)
    return ExerciseChecks(checks, reference=exercise.solution if needs_solution else None)


def drill_checks(drill: ParsonsDrill) -> ExerciseChecks:
    """Return the checks an arrangement runs with: compared with the author's order, on a seed fixed per drill.

    A learner only orders given lines, so a fixed seed gives nothing away, and it lets the runner keep the
    author's values for every learner instead of running the author's order again for each check.
    """
    return replace(exercise_checks(drill.exercise), seed=_seed(drill.id))


def _seed(*key: object) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, key)).encode()).digest()[:8], "big") >> 1
