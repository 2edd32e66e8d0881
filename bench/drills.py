"""Benchmark of checking a Parsons order: how long the learner waits after tapping Check.

    python bench/drills.py [--repeat 5]

Each shipped Parsons drill is checked the way the bot checks it: an order that must be run (the first
of the equivalent orders tests/test_drills_content.py lists, or else a wrong one) goes to the embedded
runner with the drill's checks, and the author's order is graded without running. A trivial graded
job in the same runner is the peer. Prints one JSON object:

  trivial_ms            p50 of a trivial graded job (print(1), one true check)
  drills                for each drill: p50_ms of its run (the first run, which also runs the author's
                        order for the reference values, apart as first_ms), and ratio = p50_ms / trivial_ms
  precheck_us           p50 of grading the author's order without the runner (microseconds)
  slowest_ms / slowest  the drill the learner waits longest for, after the first run

No target is asserted: a drill whose ratio is large is worth a look (an optimizer, for one, imports
torch._dynamo in the job unless the runner's zygote has imported it already).
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

from bot import drills
from bot.course import runner_checks
from bot.course.model import ParsonsDrill
from bot.library.load import load_valid
from runner.client import Check, ExerciseChecks, RunnerClient, RunnerConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _orders() -> dict[tuple[str, str], tuple[int, ...]]:
    from tests.test_drills_content import EQUIVALENT, WRONG

    runs = {key: orders[0] for key, orders in EQUIVALENT.items()}
    for key, cases in WRONG.items():
        runs.setdefault(key, next((order for order, reason, _ in cases if reason.name in ("CHECKS", "RAISES")), ()))
    return {key: order for key, order in runs.items() if order}


async def _time(runner: RunnerClient, code: str, checks: ExerciseChecks) -> float:
    start = time.perf_counter()
    await runner.run(code, checks=checks)
    return (time.perf_counter() - start) * 1000


async def main(repeat: int) -> dict[str, object]:
    content = load_valid(os.path.join(ROOT, "lessons"), os.path.join(ROOT, "locales"))
    parsons = {
        (lesson.id, d.id): d for lesson in content.english.lessons for d in lesson.drills if isinstance(d, ParsonsDrill)
    }
    trivial = ExerciseChecks((Check("one", "x", kind="equal", expect=1),))
    results: dict[str, dict[str, float]] = {}
    async with RunnerClient.embedded(RunnerConfig.from_env(os.environ)) as runner:
        trivial_ms = statistics.median([await _time(runner, "x = 1\nprint(x)", trivial) for _ in range(max(repeat, 5))])
        for key, order in _orders().items():
            drill = parsons[key]
            code, checks = drills.arranged_program(drill, order), runner_checks.drill_checks(drill)
            times = [await _time(runner, code, checks) for _ in range(repeat + 1)]
            p50 = statistics.median(times[1:])
            results["/".join(key)] = {
                "first_ms": round(times[0], 1),
                "p50_ms": round(p50, 1),
                "ratio": round(p50 / trivial_ms, 1),
            }
    prechecks = []
    for drill in parsons.values():
        start = time.perf_counter()
        drills.precheck(drill, tuple(range(len(drill.lines))))
        prechecks.append((time.perf_counter() - start) * 1e6)
    slowest = max(results, key=lambda name: results[name]["p50_ms"])
    return {
        "trivial_ms": round(trivial_ms, 1),
        "drills": results,
        "precheck_us": round(statistics.median(prechecks), 1),
        "slowest": slowest,
        "slowest_ms": results[slowest]["p50_ms"],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per drill after the first")
    print(json.dumps(asyncio.run(main(parser.parse_args().repeat))))
