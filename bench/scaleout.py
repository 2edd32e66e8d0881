"""Scale-out under faults, the long form: learners through HAProxy, 3 webhook replicas on one PostgreSQL and 2
runner hosts, with a replica killed every 60–90 s, one frozen longer than the Bot API's (compressed) wait, a runner
host killed and PostgreSQL restarted (tests/scaleout.py: the harness, and how each figure is checked).

    .venv/bin/python bench/scaleout.py [--learners 2000] [--duration 600] [--throughput-seconds 20]

First, on the same stack, the throughput with 1 replica in HAProxy's rotation, then with 3 (learners turning
slides as fast as the replies come): ``replicas_3_over_1`` is their ratio, measured in one run. Everything (the
learners and the Bot API stand-in, HAProxy, 3 replicas, PostgreSQL, 2 runner hosts) shares this machine's CPUs, 2
here: the ratio says how far replicas help when the cores are shared, not what separate machines would give.

Then the fault run. Prints ONE JSON object: the correctness figures (``lost_updates``, ``applied_twice``,
``ordering_violations``, ``duplicate_replies`` against ``kills``, and those no kill explains), recovery after a kill,
reply latency and a code run's time with no fault near, requests per replica, the throughput ratio, the CPU seconds
each part of the stack used (``cpu_seconds``: the stand-in and learners, the replicas, PostgreSQL, HAProxy, the
runner hosts, and "other" work on the machine), ``targets`` (each target and whether it was met) and ``problems``.
Exits 1 when a correctness target is missed (lost, twice, order, duplicates); the speed targets are reported as met
or not (a shared 2-core machine is no place to fail on them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.scaleout import CpuShares, Faults, Plan, check, run_learners, settle, stack, throughput  # noqa: E402

RECOVERY_P99_S = 10.0
REPLY_P95_MS = 300.0
CODE_RUN_MS = 500.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=2000)
    parser.add_argument("--duration", type=float, default=600.0, help="seconds over which learners arrive")
    parser.add_argument("--kill-every", type=float, nargs=2, default=(60.0, 90.0), metavar=("MIN", "MAX"))
    parser.add_argument("--throughput-learners", type=int, default=40)
    parser.add_argument("--throughput-seconds", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=17)
    return parser.parse_args(argv)


def plan_for(args: argparse.Namespace) -> Plan:
    """Kills every 60–90 s over the run (at least one); the other faults at fixed shares of it."""
    rng = random.Random(args.seed)
    kills, at = [], rng.uniform(*args.kill_every) / 4
    while at < args.duration:
        kills.append(round(at, 1))
        at += rng.uniform(*args.kill_every)
    return Plan(
        learners=args.learners,
        arrival_s=args.duration,
        kills=tuple(kills),
        freeze_at=round(args.duration * 0.35, 1),
        runner_kill_at=round(args.duration * 0.55, 1),
        pg_restart_at=round(args.duration * 0.75, 1),
        deadline_s=args.duration + 240.0,
        seed=args.seed,
    )


async def main_async(argv: list[str] | None) -> dict:
    args = parse_args(argv)
    plan = plan_for(args)
    with tempfile.TemporaryDirectory(prefix="coursebot-bench-scaleout-") as tmp:
        async with stack(plan, Path(tmp)) as parts:
            first = 900_001
            one = await throughput(parts, 1, args.throughput_learners, args.throughput_seconds, first)
            three = await throughput(
                parts, 3, args.throughput_learners, args.throughput_seconds, first + args.throughput_learners
            )
            parts.standin.made.clear()  # the fault run's figures count the fault run's updates only
            cpu = CpuShares(parts)
            cpu.start()
            t0 = time.monotonic()
            faults = Faults(plan, parts, t0)
            striking = asyncio.get_running_loop().create_task(faults.run())
            learners, stranded = await run_learners(plan, parts)
            await striking
            await settle(parts)
            seconds = time.monotonic() - t0
            used = await cpu.stop()
            result = await check(plan, parts, learners, [*faults.problems, *stranded], faults, seconds, used)
    figures = asdict(result.figures)
    recovery_p99 = figures["recovery_after_kill_s"]["p99"]
    reply_p95 = figures["reply_latency_quiet_ms"]["p95"]
    code_p95 = figures["code_run_quiet_ms"]["p95"]
    targets = {
        "lost_updates == 0": figures["lost_updates"] == 0 and figures["dropped_by_telegram"] == 0,
        "applied_twice == 0": figures["applied_twice"] == 0,
        "ordering_violations == 0": figures["ordering_violations"] == 0,
        "duplicate_replies <= kills + freezes": figures["duplicate_replies"] <= figures["kills"] + figures["freezes"],
        "duplicates_unexplained == 0": figures["duplicates_unexplained"] == 0,
        f"recovery after a kill p99 < {RECOVERY_P99_S} s": recovery_p99 is not None and recovery_p99 < RECOVERY_P99_S,
        f"reply latency with no faults p95 < {REPLY_P95_MS} ms": reply_p95 is not None and reply_p95 < REPLY_P95_MS,
        f"code run with no faults p95 < {CODE_RUN_MS} ms": code_p95 is not None and code_p95 < CODE_RUN_MS,
    }
    return {
        **figures,
        "throughput_updates_per_s": {"1_replica": round(one, 1), "3_replicas": round(three, 1)},
        "replicas_3_over_1": round(three / one, 3) if one else None,
        "bound_by": f"{os.cpu_count()} CPUs shared by every process of the stack and the learners",
        "targets": targets,
        "problems": result.problems[:20],
        "details": result.details,
        "load_average": os.getloadavg()[0],
    }


CORRECTNESS = (
    "lost_updates == 0",
    "applied_twice == 0",
    "ordering_violations == 0",
    "duplicate_replies <= kills + freezes",
    "duplicates_unexplained == 0",
)


def main(argv: list[str] | None = None) -> int:
    report = asyncio.run(main_async(argv))
    print(json.dumps(report))
    return 0 if all(report["targets"][name] for name in CORRECTNESS) else 1


if __name__ == "__main__":
    sys.exit(main())
