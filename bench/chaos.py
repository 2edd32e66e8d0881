"""Chaos benchmark: the long form of tests/test_chaos.py.

    .venv/bin/python bench/chaos.py [--learners 12] [--kills 30] [--fault-rate 0.03] [--seed 9] [--no-calm]

Learners take the whole course (slides, Quick Checks with wrong answers and retakes, practice with a failing then
a passing submission) through ``python -m bot run`` and the stand-in, while the bot is killed with ``kill -9`` at
random moments and the stand-in fails a share of the Bot API calls with 429 or 5xx (tests/chaos.py has the
details). Then the same learners take it again on a fresh database with no kills and no faults: the peer.

Prints ONE JSON object on stdout (progress on stderr): ``chaos`` and ``calm`` (the figures of each run: kills,
faults injected, updates delivered and replayed, quiz answers, code runs, repeated taps, recoveries, ...),
``slowdown_ratio`` (how much longer the course took under chaos than calm), ``problems`` (what went wrong:
a learner stranded, an answer lost or recorded twice, an update not handled, a failed integrity check) and
``ok``. Exits 1 when there are problems. Needs bubblewrap for the runner's sandbox.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.chaos import ChaosPlan, ChaosResult, run_chaos  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--learners", type=int, default=12, help="learners taking the course at once (default 12)")
    p.add_argument("--kills", type=int, default=30, help="times the bot is killed with kill -9 (default 30)")
    p.add_argument("--fault-rate", type=float, default=0.03, help="share of Bot API calls failing (default 0.03)")
    p.add_argument("--seed", type=int, default=9)
    p.add_argument("--deadline", type=float, default=1200, help="seconds each learner may take (default 1200)")
    p.add_argument("--no-calm", action="store_true", help="skip the calm run (no slowdown ratio)")
    p.add_argument("--keep", type=Path, help="keep each run's database and logs in this folder")
    args = p.parse_args(argv)
    if not 1 <= args.learners <= 200:
        p.error("--learners must be 1..200")
    if not 0 <= args.kills <= 1000:
        p.error("--kills must be 0..1000")
    if not 0 <= args.fault_rate <= 0.5:
        p.error("--fault-rate must be 0..0.5")
    return args


async def run(plan: ChaosPlan, label: str, keep: Path | None) -> ChaosResult:
    print(f"{label}: {plan.learners} learners, {plan.kills} kills, {plan.fault_rate:.0%} faults", file=sys.stderr)
    if keep is not None:
        (keep / label).mkdir(parents=True, exist_ok=True)
        result = await run_chaos(plan, keep / label)
    else:
        with tempfile.TemporaryDirectory(prefix=f"coursebot-chaos-{label}-") as tmp:
            result = await run_chaos(plan, Path(tmp))
    print(f"{label}: {result.figures.seconds} s, {len(result.problems)} problems", file=sys.stderr)
    return result


async def main_async(args: argparse.Namespace) -> dict:
    plan = ChaosPlan(
        learners=args.learners, kills=args.kills, fault_rate=args.fault_rate, seed=args.seed, deadline=args.deadline
    )
    chaos = await run(plan, "chaos", args.keep)
    out: dict = {
        "plan": dataclasses.asdict(plan),
        "chaos": dataclasses.asdict(chaos.figures),
        "chaos_detours": chaos.detours[:40],
    }
    problems = [f"chaos: {problem}" for problem in chaos.problems + chaos.orphan_answers]
    if not args.no_calm:
        calm = await run(dataclasses.replace(plan, kills=0, fault_rate=0.0), "calm", args.keep)
        out["calm"] = dataclasses.asdict(calm.figures)
        out["slowdown_ratio"] = round(chaos.figures.seconds / calm.figures.seconds, 2) if calm.figures.seconds else None
        problems += [f"calm: {problem}" for problem in calm.problems]
    out["problems"] = problems
    out["ok"] = not problems
    return out


def main(argv: list[str] | None = None) -> int:
    out = asyncio.run(main_async(parse_args(argv)))
    print(json.dumps(out, ensure_ascii=False))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
