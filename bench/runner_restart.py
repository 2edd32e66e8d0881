"""Benchmark: how soon code runs again after the runner is killed, against a runner's cold start.

    python bench/runner_restart.py [--kills 3]

The embedded runner (the bot's child, as in the single container) is killed with SIGKILL while a job runs; the
next job is sent at once and waits for the runner the client starts again. Its peer, in the same run: a runner
started from nothing (`python -m runner serve` until READY, then one job), which is what a restart has to do.

Prints one JSON object:
  recovery_p50_s / recovery_max_s  from the kill to the next job's result
  cold_start_p50_s                 from starting a runner to its first job's result
  recovery_over_cold_start         recovery_p50 / cold_start_p50: 1 means a restart costs one cold start and
                                   nothing more (no back-off waited, no job lost beyond the one running)
  lost_jobs                        jobs that got JobLost: the ones running at each kill
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runner.client import JobLost, RunnerClient, RunnerConfig, worker_env


async def cold_start(config: RunnerConfig) -> float:
    """Seconds from starting `python -m runner serve` to its first job's result."""
    folder = tempfile.mkdtemp(prefix="coursebot-bench-")
    socket = os.path.join(folder, "runner.sock")
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        config.python, "-m", "runner", "serve", "--socket", socket,
        env=worker_env(config), cwd="/", stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = await process.stdout.readline()
        assert line.startswith(b"READY"), line
        async with RunnerClient.connect(socket) as client:
            assert (await client.run("print(1)")).stdout == "1\n"
        return time.monotonic() - started
    finally:
        process.terminate()
        await process.wait()
        shutil.rmtree(folder, ignore_errors=True)


async def recovery(config: RunnerConfig) -> tuple[float, bool]:
    """Seconds from killing a running embedded runner to the next job's result; and whether the job it held was
    told JobLost. A fresh runner each time: its first death is restarted at once (later ones back off)."""
    async with RunnerClient.embedded(config) as client:
        running = asyncio.ensure_future(client.run("import time\ntime.sleep(30)"))
        while (await client.load()).running == 0:
            await asyncio.sleep(0.01)
        proc = client._proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        try:
            await running
            lost = False
        except JobLost:
            lost = True
        assert (await client.run("print(2)")).stdout == "2\n"
        return time.monotonic() - killed, lost


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=3)
    args = parser.parse_args()
    config = RunnerConfig.from_env(os.environ)
    colds, times, lost = [], [], 0
    for _ in range(args.kills):  # alternated, so both see the same load
        colds.append(await cold_start(config))
        took, was_lost = await recovery(config)
        times.append(took)
        lost += was_lost
    print(
        json.dumps(
            {
                "kills": args.kills,
                "recovery_p50_s": round(statistics.median(times), 2),
                "recovery_max_s": round(max(times), 2),
                "cold_start_p50_s": round(statistics.median(colds), 2),
                "recovery_over_cold_start": round(statistics.median(times) / statistics.median(colds), 2),
                "lost_jobs": lost,
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
