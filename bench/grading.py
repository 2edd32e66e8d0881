"""Benchmark of graded runs: what grading a learner's answer costs next to just running it.

    python bench/grading.py [--runs 30]

For each shipped exercise, its solution is sent through the embedded runner client as the bot sends a
learner's answer (the lesson's checks: a reference job on the same seed, then the graded job, which ends
at its process's real exit), and the same code is sent ungraded, alternately, one at a time.  Prints one
JSON object:
  graded_p50_ms / graded_p99_ms   round trip of a graded answer (all exercises together)
  plain_p50_ms                    round trip of the same code, ungraded (the peer)
  graded_over_plain               graded_p50 / plain_p50 (two jobs and a verdict: expect a little over 2)
  per_exercise                    the same figures per lesson
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bot import feedback
from bot.content.load import load_valid
from runner.client import RunnerClient, RunnerConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


async def main(runs: int) -> dict[str, object]:
    course = load_valid(os.path.join(ROOT, "lessons"), os.path.join(ROOT, "locales")).english
    graded_all: list[float] = []
    plain_all: list[float] = []
    per_exercise: dict[str, dict[str, float]] = {}
    async with RunnerClient.embedded(RunnerConfig(pool_size=2)) as runner:
        for lesson in course.lessons:
            exercise = lesson.exercise
            assert exercise is not None
            checks = feedback.runner_checks(exercise)
            graded: list[float] = []
            plain: list[float] = []
            for _ in range(runs):
                t = time.perf_counter()
                result = await runner.run(exercise.solution, checks=checks)
                graded.append((time.perf_counter() - t) * 1000)
                assert result.passed, result
                t = time.perf_counter()
                await runner.run(exercise.solution)
                plain.append((time.perf_counter() - t) * 1000)
            graded_all += graded
            plain_all += plain
            per_exercise[lesson.id] = {
                "graded_p50_ms": round(statistics.median(graded), 1),
                "plain_p50_ms": round(statistics.median(plain), 1),
                "graded_over_plain": round(statistics.median(graded) / statistics.median(plain), 2),
            }
    return {
        "graded_p50_ms": round(statistics.median(graded_all), 1),
        "graded_p99_ms": round(pct(graded_all, 99), 1),
        "plain_p50_ms": round(statistics.median(plain_all), 1),
        "graded_over_plain": round(statistics.median(graded_all) / statistics.median(plain_all), 2),
        "runs_per_exercise": runs,
        "per_exercise": per_exercise,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="graded and plain runs per exercise")
    print(json.dumps(asyncio.run(main(parser.parse_args().runs))))
