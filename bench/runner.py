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
  stages                     where a warm trivial job's time goes, end to end (traced requests, see
                             runner/trace.py): "request" holds the median ms ("request_mean" the mean:
                             means add up to the mean round trip) of each stage on the request's
                             path, in the order they end (client.send: the client's frame until the service
                             has read it; service.*; pool.*: slot, prepared sandbox, cgroup limits, pipes,
                             spec, sending it; job.*: the job's own process, from receiving the job to
                             "done"; pool.ended: the runner reading "done"; then cleanup, the result, and
                             reply: the reply frame until the client has it), with their sum and the
                             median round trip; "ahead" the same for the work done before the request
                             (prepare: the zygote's nsforge round trip and fork, namespaces and mounts,
                             hello, cgroup attach, capabilities, seccomp)
  scaling                    per pool size (--scaling, 2 and 8 slots by default): idle PSS of the runner,
                             the zygote, the prepared sandboxes, and the cost of one more slot
Extra keys give the raw RSS sum and back-to-back latency.  Targets on 2 cores:
warm p50 <= 3 ms, p99 <= 6 ms, speedup >= 100, >= 50 jobs/s, idle <= 400 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.measure import children_of, descendants, memory_kb, pct, tree_cpu_s
from runner import sandbox, seccomp
from runner.client import RunnerClient, RunnerConfig, RunResult

TRIVIAL = "print(1 + 1)"


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


async def traced(r: RunnerClient, code: str) -> list[tuple[str, int]]:
    """One job's stage marks, from the client's call to the result it builds."""
    called = time.monotonic_ns()
    reply = await r.request({"op": "run", "code": code, "limits": None, "checks": None, "trace": True}, 60)
    replied = time.monotonic_ns()
    RunResult.from_dict(reply)
    marks = [("client.call", called), *((str(n), int(t)) for n, t in reply["trace"]), ("reply", replied)]
    return [*marks, ("client.result", time.monotonic_ns())]


def stages(samples: list[list[tuple[str, int]]]) -> dict[str, object]:
    """Median ms per stage, each named by the mark that ends it, in time order; ahead-of-time stages apart."""
    request: dict[str, list[float]] = {}
    ahead: dict[str, list[float]] = {}
    order: dict[str, list[float]] = {}
    totals = []
    for marks in samples:
        called = dict(marks)["client.call"]
        timeline = sorted(marks, key=lambda m: m[1])
        before = [m for m in timeline if m[1] < called]
        after = [m for m in timeline if m[1] >= called]
        for part, into in ((before, ahead), (after, request)):
            for (_, t0), (name, t1) in itertools.pairwise(part):
                into.setdefault(name, []).append((t1 - t0) / 1e6)
                order.setdefault(name, []).append((t1 - called) / 1e6)
        totals.append((dict(marks)["client.result"] - called) / 1e6)

    def per_stage(d: dict[str, list[float]], how: Callable[[list[float]], float]) -> dict[str, float]:
        names = sorted(d, key=lambda n: statistics.median(order[n]))
        return {n: round(how(d[n]), 3) for n in names}

    means = per_stage(request, statistics.fmean)
    return {
        "request": per_stage(request, statistics.median),
        "request_mean": means,  # means add up: their sum is the mean round trip
        "request_mean_sum_ms": round(sum(means.values()), 3),
        "round_trip_p50_ms": round(statistics.median(totals), 3),
        "round_trip_mean_ms": round(statistics.fmean(totals), 3),
        "ahead": per_stage(ahead, statistics.median),
        "samples": len(samples),
    }


def roles(runner_pid: int) -> dict[str, list[int]]:
    """The runner's processes by role: itself, bwrap, the zygote, and what it forked (sandboxes, nsforge)."""
    children = children_of()
    tree = descendants(runner_pid, children)
    zygote = None
    for pid in tree:  # the topmost python running zygote.main (bwrap's own argv names it too)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if os.path.basename(argv[0]).startswith(b"python") and any(b"zygote" in a for a in argv):
            zygote = pid
            break
    forked = [p for p in descendants(zygote, children) if p != zygote] if zygote else []
    rest = [p for p in tree if p not in forked and p not in (runner_pid, zygote)]
    return {"runner": [runner_pid], "bwrap": rest, "zygote": [zygote] if zygote else [], "sandboxes": forked}


async def idle_memory(config: RunnerConfig, pool: int) -> dict[str, float]:
    """Idle PSS (MB) of a runner with ``pool`` slots, by role, after a few jobs."""
    async with RunnerClient.embedded(dataclasses.replace(config, pool_size=pool)) as r:
        for _ in range(2 * pool):
            await r.run(TRIVIAL)
        await asyncio.sleep(2.0)  # idle: every prepared sandbox waiting
        assert r._proc is not None
        by_role = roles(r._proc.pid)
        out = {role: round(memory_kb(pids)[1] / 1024, 1) for role, pids in by_role.items()}
        out["total"] = round(memory_kb([p for pids in by_role.values() for p in pids])[1] / 1024, 1)
        out["sandbox_processes"] = len(by_role["sandboxes"])  # prepared jobs, nsforge and the jobs' inits
        return out


def scaling(memory: dict[int, dict[str, float]]) -> dict[str, object]:
    sizes = sorted(memory)
    out: dict[str, object] = {str(n): memory[n] for n in sizes}
    if len(sizes) >= 2:
        lo, hi = sizes[0], sizes[-1]
        out["per_slot_mb"] = round((memory[hi]["total"] - memory[lo]["total"]) / (hi - lo), 1)
    return out


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--latency-samples", type=int, default=100)
    ap.add_argument("--trace-samples", type=int, default=100)
    ap.add_argument("--cold-samples", type=int, default=5)
    ap.add_argument("--pool", type=int, default=2)
    ap.add_argument("--scaling", default="2,8", help="pool sizes whose idle memory to compare ('' for none)")
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
        marks = []
        for _ in range(args.trace_samples):
            await asyncio.sleep(0.05)
            marks.append(await traced(r, TRIVIAL))
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

    memory = {n: await idle_memory(config, n) for n in (int(x) for x in args.scaling.split(",") if x)}
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
        "stages": stages(marks) if marks else None,
        "scaling": scaling(memory),
        "pool": args.pool,
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
