"""Benchmark of CPU isolation between jobs: how much a greedy job slows its neighbour, and what it reports.

    python bench/isolation.py [--rounds 5]

Prints one JSON object:
  victim_alone_ms       a fixed single-threaded loop's own time, in a job running alone (median)
  victim_beside_hog_ms  the same loop while a concurrent job keeps three processes spinning (median)
  slowdown              beside / alone: 1.0 is perfect isolation (the issue measured 1.6-2.2 before pinning)
  hog_status            the hog's status with a CPU limit of 2 s and a wall limit of 20 s ("timeout": held)
  hog_cpu_ms            the CPU time the hog reported (it burned ~3x its limit and reported ~10 ms before)
  hog_wall_ms           how long the hog ran
  cpu_lanes             the CPUs each concurrent job is pinned to
Run on an otherwise idle host: other load on the machine shows up as slowdown.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runner.config import RunnerConfig
from runner.pool import Pool, PoolConfig

VICTIM = (  # a fixed single-threaded loop that prints its own time
    "import time\nt = time.perf_counter()\nx = 0\nfor i in range(6_000_000):\n    x += i\n"
    "print(time.perf_counter() - t)"
)
HOG = (  # three processes spinning for {seconds} s, their parent waiting
    "import os, time\nkids = []\nfor _ in range(3):\n    pid = os.fork()\n    if pid == 0:\n"
    "        end = time.time() + {seconds}\n        while time.time() < end:\n            pass\n        os._exit(0)\n"
    "    kids.append(pid)\nfor k in kids:\n    os.waitpid(k, 0)"
)


async def victim(pool: Pool) -> float:
    r = await pool.run(VICTIM, limits={"wall_time_s": 60, "cpu_time_s": 30})
    assert r.status == "ok", r
    return float(r.stdout) * 1000.0


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    config = dataclasses.replace(RunnerConfig.from_env(os.environ), pool_size=2, queue=8)
    async with Pool(PoolConfig.from_config(config)) as pool:
        await victim(pool)  # warm
        alone = [await victim(pool) for _ in range(args.rounds)]
        beside = []
        for _ in range(args.rounds):
            hog = asyncio.ensure_future(pool.run(HOG.format(seconds=30), limits={"wall_time_s": 60, "cpu_time_s": 50}))
            await asyncio.sleep(0.3)  # the hog's processes are spinning
            beside.append(await victim(pool))
            hog.cancel()
            await asyncio.gather(hog, return_exceptions=True)
        held = await pool.run(HOG.format(seconds=15), limits={"wall_time_s": 20, "cpu_time_s": 2})
        lanes = pool.stats().get("cpu_lanes")
    out = {
        "victim_alone_ms": round(statistics.median(alone), 1),
        "victim_beside_hog_ms": round(statistics.median(beside), 1),
        "slowdown": round(statistics.median(beside) / statistics.median(alone), 2),
        "hog_status": held.status,
        "hog_cpu_ms": round(held.cpu_time_ms, 1),
        "hog_wall_ms": round(held.duration_ms, 1),
        "cpu_lanes": lanes,
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
