"""Benchmark of disk isolation: how much a job flooding the disk slows a neighbour on the host.

    python bench/disk.py [--seconds 5] [--quick]

A neighbour on the host (this process, in a thread) measures two latencies, first with the runner idle, then
while a job reads the shared torch library with O_DIRECT as fast as it may (the disk itself every time):
  - fsync: write 4 KiB to a file on the host's disk and fsync it;
  - read: read 4 KiB at a random offset of a large host file with O_DIRECT (no page cache between).
It also times the same flood with the jobs' disk limit lifted (the flood a job could make before), in the same
run, so the ratio shows what the limit buys.

Prints one JSON object:
  quiet_fsync_p50_ms / p90, quiet_read_p50_ms / p90      the neighbour with nothing else running
  flood_fsync_p50_ms / p90, flood_read_p50_ms / p90      while one job floods, at the jobs' disk limit
  unlimited_fsync_p90_ms, unlimited_read_p90_ms          while one job floods with no disk limit
  fsync_p90_ratio, read_p90_ratio                        flood / quiet (the target: at most 1.5)
  unlimited_fsync_p90_ratio, unlimited_read_p90_ratio    unlimited / quiet
  flood_mib_per_s, unlimited_mib_per_s                   what the flooding job read
  targets_met                                            both ratios at most 1.5
Run on an otherwise idle host: other disk load shows up in every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import mmap
import os
import random
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runner import cgroups
from runner.config import RunnerConfig
from runner.pool import Pool, PoolConfig

FLOOD = """
import mmap, os, time, torch
path = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
buf, size = mmap.mmap(-1, 1 << 20), os.fstat(fd).st_size
done, at, start = 0, 0, time.monotonic()
while time.monotonic() - start < {seconds}:
    n = os.preadv(fd, [buf], at)
    done += n
    at = (at + n) % (size - (2 << 20)) // 4096 * 4096
print(done / (time.monotonic() - start))
"""


def big_host_file() -> str:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.origin is not None
    return os.path.join(os.path.dirname(spec.origin), "lib", "libtorch_cpu.so")


def neighbour(seconds: float, stop: threading.Event | None = None) -> dict[str, list[float]]:
    """fsync and O_DIRECT read latencies (ms) of a host process, for ``seconds`` (or until ``stop``)."""
    fsyncs, reads = [], []
    path = big_host_file()
    rfd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    size = os.fstat(rfd).st_size
    buf = mmap.mmap(-1, 4096)
    rng = random.Random(7)
    with tempfile.NamedTemporaryFile(dir="/var/tmp", prefix="runner-bench-disk-") as f:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not (stop and stop.is_set()):
            t = time.perf_counter()
            os.pwrite(f.fileno(), os.urandom(4096), 0)
            os.fsync(f.fileno())
            fsyncs.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            os.preadv(rfd, [buf], rng.randrange(size // 4096 - 1) * 4096)
            reads.append((time.perf_counter() - t) * 1000)
            time.sleep(0.01)
    os.close(rfd)
    return {"fsync": fsyncs, "read": reads}


def p(values: list[float], q: float) -> float:
    return round(statistics.quantiles(values, n=100)[int(q) - 1], 3) if len(values) > 1 else float("nan")


def lift(cell: cgroups.JobCgroup, devices: list[str]) -> None:
    """Take a cell's disk limit away (v1: a rule of 0 is none; v2: "max")."""
    if cell.layout.version == 1:
        cell.limit_io(devices, bytes_per_s=0, ios=0)
        return
    for dev in devices:
        with open(cell.dirs["unified"] / "io.max", "w") as f:
            f.write(f"{dev} rbps=max wbps=max riops=max wiops=max")


async def flood(pool: Pool, seconds: float) -> tuple[dict[str, list[float]], float]:
    job = asyncio.ensure_future(
        pool.run(FLOOD.format(seconds=seconds), limits={"wall_time_s": seconds + 30, "cpu_time_s": seconds + 20})
    )
    await asyncio.sleep(1.0)  # the job has started reading
    seen = await asyncio.to_thread(neighbour, seconds - 1.5)
    r = await job
    assert r.status == "ok", r
    return seen, float(r.stdout) / 2**20


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--quick", action="store_true", help="a short run (the smoke test's)")
    args = ap.parse_args()
    seconds = 3.0 if args.quick else args.seconds
    config = dataclasses.replace(RunnerConfig.from_env(os.environ), pool_size=1, queue=4)
    async with Pool(PoolConfig.from_config(config)) as pool:
        await pool.run("print(1)")
        quiet = await asyncio.to_thread(neighbour, seconds - 1.5)
        flooded, flood_rate = await flood(pool, seconds)
        assert pool.tree is not None
        # The same flood without the limit (what a job could do before): lifted on every cell, then put back.
        devices = cgroups.block_devices()
        for cell in pool.tree.slots:
            lift(cell, devices)
        unlimited, unlimited_rate = await flood(pool, seconds)
        for cell in pool.tree.slots:
            cell.limit_io(devices)
        io_limited = pool.tree.io_limited
    out = {
        "quiet_fsync_p50_ms": p(quiet["fsync"], 50),
        "quiet_fsync_p90_ms": p(quiet["fsync"], 90),
        "quiet_read_p50_ms": p(quiet["read"], 50),
        "quiet_read_p90_ms": p(quiet["read"], 90),
        "flood_fsync_p50_ms": p(flooded["fsync"], 50),
        "flood_fsync_p90_ms": p(flooded["fsync"], 90),
        "flood_read_p50_ms": p(flooded["read"], 50),
        "flood_read_p90_ms": p(flooded["read"], 90),
        "unlimited_fsync_p90_ms": p(unlimited["fsync"], 90),
        "unlimited_read_p90_ms": p(unlimited["read"], 90),
        "flood_mib_per_s": round(flood_rate, 1),
        "unlimited_mib_per_s": round(unlimited_rate, 1),
        "io_limited": io_limited,
        "samples": {"quiet": len(quiet["fsync"]), "flood": len(flooded["fsync"]), "unlimited": len(unlimited["fsync"])},
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    for what in ("fsync", "read"):
        out[f"{what}_p90_ratio"] = round(out[f"flood_{what}_p90_ms"] / out[f"quiet_{what}_p90_ms"], 2)
        out[f"unlimited_{what}_p90_ratio"] = round(out[f"unlimited_{what}_p90_ms"] / out[f"quiet_{what}_p90_ms"], 2)
    out["targets_met"] = out["fsync_p90_ratio"] <= 1.5 and out["read_p90_ratio"] <= 1.5
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
