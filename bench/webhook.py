"""Polling against webhook: coursebot's throughput and latency with each way of receiving updates, in one run.

    .venv/bin/python bench/webhook.py [--quick] [bench/bot.py's options]

Runs bench/bot.py's measurement (simulated learners turning slides against the loopback stand-in; see its
docstring) twice, one after the other on the same machine: coursebot polling (getUpdates), then coursebot in
webhook mode (COURSEBOT_WEBHOOK_LISTEN), with the stand-in delivering as Telegram's server does (queues per
chat and per user's button presses, only each head in flight, up to 40 connections; bot/localapi/webhooks.py).
In webhook mode every update is synced to disk in the inbox before the bot answers the POST, one commit per
update, where polling commits a whole getUpdates batch at once.

Prints ONE JSON object: ``polling`` and ``webhook`` (``updates_per_s`` at saturation, ``p50_ms``/``p99_ms``
under the realistic load, ``bot_cpu_ms_per_update``), ``webhook_over_polling_updates_ratio``,
``webhook_over_polling_p50_ratio``, ``webhook_over_polling_p99_ratio``, ``errors`` and ``details``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bot import cpu_plan, environment, log, parse_args, run_bot  # noqa: E402


def _figures(result: dict) -> dict:
    return {
        "updates_per_s": result["saturation"]["updates_per_s"],
        "p50_ms": result["realistic"]["p50_ms"],
        "p99_ms": result["realistic"]["p99_ms"],
        "bot_cpu_ms_per_update": result["realistic"].get("bot_cpu_ms_per_update"),
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


async def main_async(argv: list[str] | None) -> dict:
    args = parse_args(argv)
    args.low_learners = max(args.low_learners, args.learners)  # one saturation point per mode
    bot_cpus, harness_cpus = cpu_plan(args.no_pin)
    if harness_cpus:
        os.sched_setaffinity(0, harness_cpus)
    with tempfile.TemporaryDirectory(prefix="coursebot-bench-webhook-") as tmp:
        log("polling")
        polling = await run_bot("coursebot", args, bot_cpus, Path(tmp))
        log("webhook")
        webhook = await run_bot("coursebot", args, bot_cpus, Path(tmp), webhook=True)
    p, w = _figures(polling), _figures(webhook)
    return {
        "polling": p,
        "webhook": w,
        "webhook_over_polling_updates_ratio": _ratio(w["updates_per_s"], p["updates_per_s"]),
        "webhook_over_polling_p50_ratio": _ratio(w["p50_ms"], p["p50_ms"]),
        "webhook_over_polling_p99_ratio": _ratio(w["p99_ms"], p["p99_ms"]),
        "errors": polling["error_count"] + webhook["error_count"],
        "learners": args.learners,
        "quick": args.quick,
        "load_average": os.getloadavg()[0],
        "environment": environment(),
        "details": {"polling": polling, "webhook": webhook},
    }


def main(argv: list[str] | None = None) -> int:
    print(json.dumps(asyncio.run(main_async(argv))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
