"""Benchmark of the runner: warm vs cold latency, throughput, idle memory.

    python bench/runner.py [--jobs 200] [--pool 2]

Prints one JSON object:
  warm_p50_ms / warm_p99_ms  round trip of a trivial snippet through the
                             embedded client (socket + sandbox + result), jobs
                             spaced 50 ms apart like chat traffic
  cold_p50_ms                a cold sandboxed interpreter (same bwrap sandbox)
                             doing `import torch` + the trivial snippet
  speedup                    cold_p50 / warm_p50
  jobs_per_s                 trivial jobs completed per second, all submitted at once
  cpu_ms_per_job             CPU the runner's whole process tree (runner, zygote, sandboxes, jobs) spent
                             per trivial job in that burst: what jobs/s is made of, and far less
                             sensitive to other load on the machine than jobs/s itself
  idle_rss_mb                memory of the runner + zygote + prepared sandboxes
                             when idle: the sum of PSS (shared pages counted once)
Extra keys give the raw RSS sum and back-to-back latency.  Targets on 2 cores:
warm p50 <= 15 ms, speedup >= 100, >= 50 jobs/s, idle <= 400 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runner import sandbox, seccomp
from runner.client import RunnerClient, RunnerConfig

TRIVIAL = "print(1 + 1)"


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        stack.extend(children.get(p, []))
    return out


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and its live descendants, with the children they reaped (each counted once)."""
    ticks = 0
    for p in descendants(pid):
        try:
            fields = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def memory_kb(pids: list[int]) -> tuple[int, int]:
    rss = pss = 0
    for p in pids:
        try:
            for line in open(f"/proc/{p}/smaps_rollup"):
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1])
        except OSError:
            pass
    return rss, pss


def cold_once(config: RunnerConfig) -> float:
    """The same sandbox as the zygote's, but a fresh interpreter per job."""
    cfg = sandbox.SandboxConfig.from_config(config)
    code = "import torch\n" + TRIVIAL
    plan = sandbox.plan(cfg, [cfg.python, "-s", "-B", "-P", "-c", code], [], seccomp.zygote_filter())
    t = time.perf_counter()
    try:
        p = subprocess.run(
            plan.argv, pass_fds=plan.pass_fds, capture_output=True, timeout=120, env={"PATH": "/usr/bin:/bin"}
        )
    finally:
        plan.close_fds()
        plan.remove_stage()
    dt = (time.perf_counter() - t) * 1000
    if p.stdout.strip() != b"2":
        raise RuntimeError(f"cold run failed: {p.stderr[-500:]!r}")
    return dt


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--latency-samples", type=int, default=100)
    ap.add_argument("--cold-samples", type=int, default=5)
    ap.add_argument("--pool", type=int, default=2)
    args = ap.parse_args()

    # The host's settings (RUNNER_BWRAP, ...), with the pool and queue this benchmark needs.
    config = dataclasses.replace(RunnerConfig.from_env(os.environ), pool_size=args.pool, queue=args.jobs + 8)
    async with RunnerClient.embedded(config) as r:
        for _ in range(10):
            await r.run(TRIVIAL)
        spaced = []
        for _ in range(args.latency_samples):
            await asyncio.sleep(0.05)
            t = time.perf_counter()
            res = await r.run(TRIVIAL)
            spaced.append((time.perf_counter() - t) * 1000)
            assert res.stdout == "2\n", res
        b2b = []
        for _ in range(30):
            t = time.perf_counter()
            await r.run(TRIVIAL)
            b2b.append((time.perf_counter() - t) * 1000)

        await asyncio.sleep(0.5)
        cpu = tree_cpu_s(r._proc.pid)
        t = time.perf_counter()
        results = await asyncio.gather(*[r.run(TRIVIAL) for _ in range(args.jobs)])
        jobs_per_s = args.jobs / (time.perf_counter() - t)
        await asyncio.sleep(0.5)  # the last jobs' processes reaped, the pool's sandboxes prepared again
        cpu_ms_per_job = (tree_cpu_s(r._proc.pid) - cpu) * 1000 / args.jobs
        assert all(x.status == "ok" for x in results)

        await asyncio.sleep(2.0)  # idle: prepared sandboxes waiting
        rss, pss = memory_kb(descendants(r._proc.pid))

    cold = [cold_once(config) for _ in range(args.cold_samples)]
    warm_p50 = statistics.median(spaced)
    out = {
        "warm_p50_ms": round(warm_p50, 2),
        "warm_p99_ms": round(pct(spaced, 99), 2),
        "cold_p50_ms": round(statistics.median(cold), 1),
        "speedup": round(statistics.median(cold) / warm_p50, 1),
        "jobs_per_s": round(jobs_per_s, 1),
        "cpu_ms_per_job": round(cpu_ms_per_job, 2),
        "idle_rss_mb": round(pss / 1024, 1),
        "idle_rss_sum_mb": round(rss / 1024, 1),
        "warm_back_to_back_p50_ms": round(statistics.median(b2b), 2),
        "pool": args.pool,
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
