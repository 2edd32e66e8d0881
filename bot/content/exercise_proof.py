"""What proves a practice exercise in the real runner, as pure code: the runs to make and what their results mean.

An exercise is sound when its solution passes, its starter runs yet fails a check without any check erroring,
and every check compared with the solution depends on the run's random seed: otherwise one hard-coded answer
would pass every run.  Seed dependence is proved by grading the solution against the solution run on another
seed (``reference_seed``): a check that still passes for every pair gives the same value whatever the inputs.

``prove`` takes the function that runs a job (a ``RunnerClient.run`` in ``coursebot lint --run`` or a test) and
returns the problems found; the seeds are fixed, so the proof gives the same answer every time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot import feedback
from bot.content.model import Exercise
from runner.client import ExerciseChecks, RunResult

SOLUTION_SEEDS = (1, 2, 3)
# Each pair: the solution's own run, and the seed its reference is run with.
SEED_PAIRS = ((11, 12), (21, 22), (31, 32), (41, 42))

# Run ``code`` graded by ``checks`` with random seed ``seed``.
Run = Callable[[str, ExerciseChecks, int], Awaitable[RunResult]]


@dataclass(frozen=True)
class ProofRun:
    """One run of the proof: what it is, the code, its checks and its seed."""

    what: str
    code: str
    checks: ExerciseChecks
    seed: int


def proof_runs(exercise: Exercise) -> list[ProofRun]:
    """The runs that prove ``exercise``: the solution on a few seeds, the starter, and the seed pairs."""
    checks = feedback.runner_checks(exercise)
    runs = [ProofRun(f"the solution (seed {seed})", exercise.solution, checks, seed) for seed in SOLUTION_SEEDS]
    runs.append(ProofRun("the starter", exercise.starter, checks, SOLUTION_SEEDS[0]))
    compared = tuple(c for c in checks.checks if c.expect is None and c.kind != "true")
    if compared:
        for seed, other in SEED_PAIRS:
            probe = ExerciseChecks(compared, reference=exercise.solution, reference_seed=other)
            runs.append(ProofRun(f"seeds {seed} and {other}", exercise.solution, probe, seed))
    return runs


def proof_problems(runs: list[ProofRun], results: list[RunResult]) -> list[str]:
    """What the results of ``proof_runs`` say is wrong with the exercise (empty when it is sound)."""
    problems: list[str] = []
    same_everywhere: set[str] | None = None
    for run, result in zip(runs, results, strict=True):
        failed = [o for o in result.checks if not o.passed]
        if run.what.startswith("the solution") and not result.passed:
            detail = ", ".join(f"{o.id} ({o.message_key} {dict(o.params)})" for o in failed) or result.status
            problems.append(f"exercise: {run.what} does not pass: {detail}; {result.stderr.strip()[-300:]}")
        elif run.what == "the starter":
            if result.status != "ok":
                problems.append(
                    f"exercise: the starter must run, it ended with {result.status}: {result.stderr[-300:]}"
                )
            elif result.passed:
                problems.append("exercise: the starter already passes every check")
            errors = [o.id for o in result.checks if o.message_key == "checks.error"]
            if errors:
                problems.append(f"exercise: check {', '.join(errors)} cannot read the starter's variables")
        elif run.what.startswith("seeds"):
            passing = {o.id for o in result.checks if o.passed}
            same_everywhere = passing if same_everywhere is None else same_everywhere & passing
    for check_id in sorted(same_everywhere or ()):
        problems.append(
            f"check '{check_id}': the solution gives the same value whatever the random seed, so a hard-coded "
            "answer would pass; build the exercise's inputs from torch.randint or torch.rand"
        )
    return problems


async def prove(exercise: Exercise, run: Run) -> list[str]:
    """Make the proof's runs with ``run`` and return the problems found."""
    runs = proof_runs(exercise)
    results = [await run(r.code, r.checks, r.seed) for r in runs]
    return proof_problems(runs, results)
