"""Benchmark: jobs through HAProxy to 1 and 2 runner hosts, against one runner reached directly, in one run.

    python bench/runner_hosts.py [--seconds 6] [--rounds 3] [--slots 1] [--clients 4]

Two runner hosts (`python -m runner serve`, `--slots` each, on 127.0.0.2 and 127.0.0.3) and two haproxy
processes running the shipped deploy/haproxy/runners.cfg, one with the first host alone, one with both.
Three paths, taken in turn within each round so all see the same load:
  direct           the bot's client to the first host's TCP port (the token's hello, then the job)
  haproxy_1_host   the same through HAProxy, the first host only: what the balancer adds
  haproxy_2_hosts  through HAProxy to both hosts: what a second host adds
Each path is timed twice: one job at a time (latency, p50/p99) and `--clients` jobs at once (jobs/s).
The jobs are trivial (a print): the balancer's and the protocol's share is as large as it gets.

Prints one JSON object: per path {"p50_ms", "p99_ms", "jobs_per_s", "jobs"}, and ratios:
  haproxy_over_direct_p50        haproxy_1_host p50 / direct p50 (the balancer's hop; 1 = free)
  haproxy_over_direct_jobs_per_s haproxy_1_host jobs/s / direct jobs/s
  two_hosts_over_one_jobs_per_s  haproxy_2_hosts jobs/s / haproxy_1_host jobs/s: on one machine the two hosts
                                 share its cores, so this says how much of a second machine's gain is left
                                 after the CPUs; the host's cores and load are printed with it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runner.client import RunnerClient
from tests.runnerpool import TOKEN, Haproxy, haproxy_binary, make_hosts, remove_hosts

JOB = "print(1)"


async def timed_jobs(client: RunnerClient, seconds: float, clients: int) -> tuple[list[float], float]:
    """Each job's seconds, and the seconds it all took, for ``clients`` loops sending jobs for ``seconds``."""
    durations: list[float] = []
    started = time.monotonic()
    until = started + seconds

    async def loop() -> None:
        while time.monotonic() < until:
            sent = time.monotonic()
            result = await client.run(JOB)
            assert result.stdout == "1\n", result
            durations.append(time.monotonic() - sent)

    await asyncio.gather(*(loop() for _ in range(clients)))
    return durations, time.monotonic() - started


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def measure(addresses: dict[str, str], seconds: float, rounds: int, clients: int) -> dict[str, dict[str, float]]:
    latency: dict[str, list[float]] = {name: [] for name in addresses}
    done: dict[str, int] = dict.fromkeys(addresses, 0)
    spent: dict[str, float] = dict.fromkeys(addresses, 0.0)
    runners = {name: await RunnerClient.connect(address, token=TOKEN) for name, address in addresses.items()}
    try:
        for runner in runners.values():  # warm: the first jobs of a fresh pool pay for what later ones do not
            await timed_jobs(runner, 0.2, 2)
        share = seconds / rounds / 2
        for _ in range(rounds):
            for name, runner in runners.items():
                one_by_one, _ = await timed_jobs(runner, share, 1)
                latency[name] += one_by_one
                many, took = await timed_jobs(runner, share, clients)
                done[name] += len(many)
                spent[name] += took
    finally:
        for runner in runners.values():
            await runner.close()
    return {
        name: {
            "p50_ms": round(statistics.median(latency[name]) * 1000, 2),
            "p99_ms": round(percentile(latency[name], 0.99) * 1000, 2),
            "jobs_per_s": round(done[name] / spent[name], 1),
            "jobs": done[name] + len(latency[name]),
        }
        for name in addresses
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="seconds of jobs per path, in all")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slots", type=int, default=1, help="RUNNER_POOL of each host")
    parser.add_argument("--clients", type=int, default=4, help="jobs at once in the jobs/s part")
    args = parser.parse_args()
    if haproxy_binary() is None:
        sys.exit("bench/runner_hosts.py needs haproxy (apt-get install haproxy)")
    folder, hosts = make_hosts(2, args.slots)
    balancers: list[Haproxy] = []
    try:
        for host in hosts:
            host.start()
        one = Haproxy(os.path.join(folder, "one"), hosts[:1])
        both = Haproxy(os.path.join(folder, "both"), hosts)
        balancers += [one, both]
        for balancer in balancers:
            balancer.start()
        addresses = {"direct": hosts[0].address, "haproxy_1_host": one.address, "haproxy_2_hosts": both.address}
        paths = asyncio.run(measure(addresses, args.seconds, args.rounds, args.clients))
        jobs_per_host = {h: int(both.servers()[h]["stot"]) for h in ("runner1", "runner2")}
    finally:
        for balancer in balancers:
            balancer.stop()
        remove_hosts(hosts)
        shutil.rmtree(folder, ignore_errors=True)
    print(
        json.dumps(
            {
                "paths": paths,
                "haproxy_over_direct_p50": round(paths["haproxy_1_host"]["p50_ms"] / paths["direct"]["p50_ms"], 2),
                "haproxy_over_direct_jobs_per_s": round(
                    paths["haproxy_1_host"]["jobs_per_s"] / paths["direct"]["jobs_per_s"], 2
                ),
                "two_hosts_over_one_jobs_per_s": round(
                    paths["haproxy_2_hosts"]["jobs_per_s"] / paths["haproxy_1_host"]["jobs_per_s"], 2
                ),
                "haproxy_2_hosts_connections_per_host": jobs_per_host,
                "slots_per_host": args.slots,
                "clients": args.clients,
                "cores": os.cpu_count(),
                "load_1min": round(os.getloadavg()[0], 1),
            }
        )
    )


if __name__ == "__main__":
    main()
