"""Benchmark of graded runs: what grading a learner's answer costs next to just running it, and the options.

    python bench/grading.py [--runs 30] [--options-runs 10]

For each shipped exercise, its solution is sent through the embedded runner client as the bot sends a
learner's answer (the lesson's checks, the seed left to the runner), and the same code is sent ungraded,
alternately, one at a time, spaced as learners are (--gap), so the runner computes its references ahead
in between (runner/references.py).  Then, in a pool of this process (no service), the ways a graded run
can get its reference's values are timed side by side, interleaved, each on a fresh seed:
  sequential   the reference's job on the run's seed, then the learner's (what every run did before)
  concurrent   both jobs at once, in the pool's two slots
  ahead        the values computed before the run (untimed): the learner's job alone
Prints one JSON object:
  graded_p50_ms / graded_p99_ms   round trip of a graded answer (all exercises together), as the bot sees it
  plain_p50_ms                    round trip of the same code, ungraded (the peer)
  graded_over_plain               graded_p50 / plain_p50
  on_demand_p50_ms                a graded answer whose seed the client names (its reference cannot be ready)
  references_taken                graded answers that found their reference computed ahead
  options                         p50 / p99 per option above, and each p50 over the plain job's
  per_exercise                    the client's figures per lesson
Targets on 2 cores: graded p50 <= 15 ms, p99 <= 25 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import secrets
import statistics
import sys
import time
from collections.abc import Awaitable, Mapping
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.measure import pct
from bot.course import runner_checks
from bot.library.load import load_valid
from runner import backend, grading
from runner.backend import Request
from runner.client import ExerciseChecks, RunnerClient, RunnerConfig, RunResult
from runner.limits import DEFAULT, Limits
from runner.pool import Pool, PoolConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def figures(xs: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(xs), 1), "p99_ms": round(pct(xs, 99), 1)}


async def through_client(exercises: list[tuple[str, str, ExerciseChecks]], runs: int, gap: float) -> dict[str, Any]:
    graded_all: list[float] = []
    plain_all: list[float] = []
    on_demand: list[float] = []
    per_exercise: dict[str, dict[str, float]] = {}
    config = dataclasses.replace(RunnerConfig.from_env(os.environ), pool_size=2)
    async with RunnerClient.embedded(config) as runner:

        async def timed(job: Awaitable[RunResult], into: list[float], graded: bool) -> None:
            started = time.perf_counter()
            result = await job
            into.append((time.perf_counter() - started) * 1000)
            assert result.passed if graded else result.status == "ok", result

        for lesson, solution, checks in exercises:
            await runner.run(solution, checks=checks)  # the first is on demand; the runner then computes ahead
            graded: list[float] = []
            plain: list[float] = []
            for _ in range(runs):
                await asyncio.sleep(gap)
                await timed(runner.run(solution, checks=checks), graded, True)
                await asyncio.sleep(gap)
                await timed(runner.run(solution), plain, False)
            await asyncio.sleep(gap)
            await timed(runner.run(solution, checks=checks, seed=secrets.randbits(63)), on_demand, True)
            graded_all += graded
            plain_all += plain
            per_exercise[lesson] = {
                "graded_p50_ms": round(statistics.median(graded), 1),
                "plain_p50_ms": round(statistics.median(plain), 1),
                "graded_over_plain": round(statistics.median(graded) / statistics.median(plain), 2),
            }
        taken = (await runner.request({"op": "info"}, 10)).get("references_taken")
    return {
        "graded_p50_ms": round(statistics.median(graded_all), 1),
        "graded_p99_ms": round(pct(graded_all, 99), 1),
        "plain_p50_ms": round(statistics.median(plain_all), 1),
        "graded_over_plain": round(statistics.median(graded_all) / statistics.median(plain_all), 2),
        "on_demand_p50_ms": round(statistics.median(on_demand), 1),
        "references_taken": taken,
        "graded_runs": len(graded_all),
        "per_exercise": per_exercise,
    }


async def options(exercises: list[tuple[str, str, ExerciseChecks]], runs: int, gap: float) -> dict[str, Any]:
    """The three ways to get the reference's values, timed side by side in one pool, each on a fresh seed."""
    config = dataclasses.replace(RunnerConfig.from_env(os.environ), pool_size=2, queue=8)
    times: dict[str, list[float]] = {"sequential": [], "concurrent": [], "ahead": [], "plain": []}
    async with Pool(PoolConfig.from_config(config)) as pool:
        # The pool's own job runner: one job in a slot, as every graded run uses it.
        run_job = pool._run_in_slot
        lim = DEFAULT

        async def on_demand(checks: ExerciseChecks, limits: Limits, seed: int) -> Mapping[str, Any]:
            return await backend.run_reference(run_job, checks, limits, seed)

        async def sequential(code: str, checks: ExerciseChecks, seed: int) -> RunResult:
            return await backend.run_request(Request.of(code, lim, checks, seed, lim), run_job, on_demand)

        async def concurrent(code: str, checks: ExerciseChecks, seed: int) -> RunResult:
            nonce = grading.new_nonce()
            expected, (result, report) = await asyncio.gather(
                on_demand(checks, lim, seed), run_job(code, lim, seed, grading.job_spec(checks, nonce))
            )
            source = grading.judge_source(checks, code) if any(c.of_source for c in checks.checks) else None
            outcomes, passed = grading.verify(checks, result.status, report, nonce, expected, source)
            return dataclasses.replace(result, checks=outcomes, passed=passed)

        async def timed(name: str, code: str, checks: ExerciseChecks, seed: int) -> RunResult:
            values: Mapping[str, Any] = {}
            if name == "ahead":
                values = await on_demand(checks, lim, seed)  # untimed: computed before the run
                await asyncio.sleep(gap)

            async def ready(_c: ExerciseChecks, _l: Limits, _s: int) -> Mapping[str, Any]:
                return values

            started = time.perf_counter()
            if name == "plain":
                result = await pool.run(code, seed=seed)
            elif name == "sequential":
                result = await sequential(code, checks, seed)
            elif name == "concurrent":
                result = await concurrent(code, checks, seed)
            else:
                result = await backend.run_request(Request.of(code, lim, checks, seed, lim), run_job, ready)
            times[name].append((time.perf_counter() - started) * 1000)
            assert result.status == "ok" if name == "plain" else result.passed, (name, result)
            return result

        names = list(times)
        for _, solution, checks in exercises:
            await sequential(solution, checks, secrets.randbits(63))  # warm
            for r in range(runs):
                for name in names[r % len(names) :] + names[: r % len(names)]:  # each first in turn
                    await asyncio.sleep(gap)
                    await timed(name, solution, checks, secrets.randbits(63))
    plain = statistics.median(times["plain"])
    out: dict[str, Any] = {}
    for name, xs in times.items():
        out[name] = figures(xs)
        out[name]["over_plain"] = round(statistics.median(xs) / plain, 2)
    return out


async def main(runs: int, options_runs: int, gap: float) -> dict[str, Any]:
    course = load_valid(os.path.join(ROOT, "lessons"), os.path.join(ROOT, "locales")).english
    exercises = []
    for lesson in course.lessons:
        assert lesson.exercise is not None
        exercises.append((lesson.id, lesson.exercise.solution, runner_checks.exercise_checks(lesson.exercise)))
    out = await through_client(exercises, runs, gap)
    if options_runs:
        out["options"] = await options(exercises, options_runs, gap)
    out["runs_per_exercise"] = runs
    out["load_avg_1m"] = round(os.getloadavg()[0], 2)
    out["cpus"] = os.cpu_count()
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="graded and plain runs per exercise")
    parser.add_argument("--options-runs", type=int, default=10, help="runs per exercise of each option (0: none)")
    parser.add_argument("--gap", type=float, default=0.1, help="seconds between two runs (learners are not a burst)")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.runs, args.options_runs, args.gap))))
