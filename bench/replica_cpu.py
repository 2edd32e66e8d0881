"""CPU per update of a webhook replica on PostgreSQL, and of PostgreSQL itself: a base commit against this checkout.

    .venv/bin/python bench/replica_cpu.py [--quick] [--base COMMIT] [--learners N] [--tap-interval S]
                                          [--seconds S] [--rounds N] [--log-level INFO] [--one-at-a-time]

Prints ONE JSON object on stdout (progress goes to stderr). Two throwaway PostgreSQL 15 clusters (tests/pg.py) serve
the runs, each on a database of its own. A run is one replica as bench/scaleout.py runs three (``python -m bot
run`` in webhook mode, COURSEBOT_DB a ``postgresql://`` URL, INFO logging, a 3 s inbox lease, monitoring on, no
runner: slides run no code) receiving updates from the Bot API stand-in as Telegram sends them, under bench/bot.py's
realistic load: every learner taps Next/Back on lesson 1's slides every ``--tap-interval`` seconds on average, on
schedule (open loop), for ``--seconds`` after a warm-up.

The base tree (``--base``, default: where this branch left main; git archive into a temporary folder) and this
checkout run ``--rounds`` times each, both at once, each with its own stand-in, learners and cluster (swapped each
round), measured in one window: the load of a shared machine at the time falls on both alike (one after the other,
it drifted between runs by more than the differences measured). ``--one-at-a-time`` runs them in turn on one
cluster instead (A B B A ...). For each run, over the measuring window, from /proc:

* ``replica_cpu_ms_per_update``: the replica's CPU (all its threads) over the updates it answered in the window;
* ``postgres_cpu_ms_per_update``: the CPU of the postmaster and every backend (and background process) of its
  cluster, over the same updates;
* ``total_cpu_ms_per_update``: the two together.

``before``/``after`` are the means over each tree's runs; ``ratios`` = after / before (lower is better), also per
part. ``runs`` holds every run's figures (latency, throughput, errors). ``errors`` counts tap timeouts, refused
calls, toasts and ERROR lines in a replica's log: a run with errors measured something else.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bot import (  # noqa: E402
    DRAIN_TIMEOUT,
    TOKEN,
    WEBHOOK_SECRET,
    BotFailed,
    CpuMeter,
    Errors,
    LoopLag,
    _bot_errors,
    _child_setup,
    _free_port,
    _point_webhook,
    _stop,
    audit,
    harness_gc_paused,
    log,
    open_course,
    realistic,
)
from bench.flows import ratio  # noqa: E402
from bench.measure import tree_cpu_s  # noqa: E402
from tests import pg  # noqa: E402
from tests.standin import BotApiStandin  # noqa: E402

# As bench/scaleout.py's replicas (tests/scaleout.py): the inbox's lease, INFO logging, monitoring on.
LEASE_S = 3.0


def base_commit() -> str:
    """Where this branch left main (main itself when on main)."""
    done = subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    return done.stdout.strip()[:12] if done.returncode == 0 and done.stdout.strip() else "main"


def extract(commit: str, into: Path) -> None:
    """The tree of ``commit`` in ``into`` (git archive, as bench/flows.py does)."""
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True, timeout=60)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True, timeout=60)


def postmaster_pid(cluster: pg.Cluster) -> int:
    return int((cluster.folder / "data" / "postmaster.pid").read_text().split()[0])


async def one_run(
    label: str,
    tree: Path,
    cluster: pg.Cluster,
    args: argparse.Namespace,
    workdir: Path,
    first_user: int,
    ready: asyncio.Barrier | None = None,
) -> dict:
    """Measure one replica of ``tree`` on a fresh database of ``cluster`` (once every run given ``ready`` is ready)."""
    errors = Errors()
    notes: Counter = Counter()
    db_url = cluster.new_database()
    stderr_path = workdir / f"{label}-{first_user}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELEGRAM_", "COURSEBOT_", "PYTHONPATH"))}
    port, health = _free_port(), _free_port()
    lag = LoopLag()
    process: subprocess.Popen | None = None
    result: dict = {"tree": label}
    async with BotApiStandin(token=TOKEN) as standin:
        env.update(
            TELEGRAM_BOT_TOKEN=standin.token,
            TELEGRAM_API_BASE_URL=standin.api_base_url,
            COURSEBOT_DB=db_url,
            COURSEBOT_LOG_LEVEL=args.log_level,
            COURSEBOT_RUNNER_URL="off",
            COURSEBOT_WEBHOOK_LISTEN=f"127.0.0.1:{port}",
            COURSEBOT_WEBHOOK_SECRET=WEBHOOK_SECRET,
            COURSEBOT_MONITORING=f"127.0.0.1:{health}",
            COURSEBOT_INBOX_LEASE=str(LEASE_S),
            COURSEBOT_WATCH="off",
            COURSEBOT_CONTROL_SOCKET=str(workdir / f"{label}-{first_user}.sock"),
            PYTHONUNBUFFERED="1",
        )
        env.update(args.bot_env)
        try:
            with open(stderr_path, "wb") as out:
                process = subprocess.Popen(
                    # python -m bot from the tree's folder imports that tree's bot
                    [sys.executable, "-m", "bot", "run"],
                    cwd=tree,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    preexec_fn=_child_setup(None),
                    start_new_session=True,
                )
            await _point_webhook(standin, port, process)
            try:
                readers = await open_course(standin, [first_user + i for i in range(args.learners)])
            except Exception as exc:
                tail = "\n".join(_bot_errors(stderr_path)[1])
                raise BotFailed(f"{label}: the course did not open: {exc}\n{tail}") from None
            await standin.settle(quiet=0.3, timeout=DRAIN_TIMEOUT)
            errors.add("refused_calls_setup", len(standin.errors()))
            if ready is not None:
                await asyncio.wait_for(ready.wait(), 120)  # the other tree's replica measured in the same window
            standin.clear_calls()
            lag.start()
            postmaster = postmaster_pid(cluster)
            marks: dict[bool, tuple[float, float]] = {}

            def window(on: bool) -> None:
                # The replica's process tree (it starts none: runner off) and the whole cluster, at the window's ends.
                marks[on] = (tree_cpu_s(process.pid), tree_cpu_s(postmaster))

            log(f"{label}: {args.learners} learners, a tap every {args.tap_interval:g} s each, {args.seconds:g} s")
            with harness_gc_paused():
                real = await realistic(
                    standin,
                    readers,
                    args.warmup,
                    args.seconds,
                    args.tap_interval,
                    args.seed,
                    CpuMeter(process.pid),
                    lag,
                    errors,
                    window,
                )
            audit(standin, errors, notes)
            handled = real["handled_per_s"] * real["window_s"]
            replica_s = marks[False][0] - marks[True][0]
            postgres_s = marks[False][1] - marks[True][1]

            def per(seconds: float) -> float | None:
                return round(seconds / handled * 1000, 3) if handled else None

            result.update(
                replica_cpu_ms_per_update=per(replica_s),
                postgres_cpu_ms_per_update=per(postgres_s),
                total_cpu_ms_per_update=per(replica_s + postgres_s),
                handled_per_s=real["handled_per_s"],
                taps_per_s=real["taps_per_s"],
                p50_ms=real["p50_ms"],
                p99_ms=real["p99_ms"],
                replica_cpu=real["bot_cpu"],
                other_cpu=real["other_cpu"],
            )
            log(
                f"{label}: replica {result['replica_cpu_ms_per_update']} ms, PostgreSQL "
                f"{result['postgres_cpu_ms_per_update']} ms of CPU per update ({real['handled_per_s']} updates/s, "
                f"p50 {real['p50_ms']} ms, p99 {real['p99_ms']} ms)"
            )
        finally:
            await lag.stop()
            if process is not None:
                await _stop(process)
        bad, tail = _bot_errors(stderr_path)
        errors.add("bot_error_log_lines", bad)
        if bad:
            result["log_tail"] = tail
    result["notes"] = dict(notes)
    result["errors"] = dict(errors.counts)
    result["error_count"] = errors.total
    return result


PARTS = ("replica_cpu_ms_per_update", "postgres_cpu_ms_per_update", "total_cpu_ms_per_update")


def means(runs: list[dict]) -> dict:
    out: dict = {}
    for key in (*PARTS, "handled_per_s", "p50_ms", "p99_ms"):
        values = [r[key] for r in runs if r.get(key) is not None]
        out[key] = round(sum(values) / len(values), 3) if values else None
    return out


async def main_async(args: argparse.Namespace) -> dict:
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="coursebot-bench-replica-") as tmp:
        work = Path(tmp)
        base_tree = work / "base"
        base_tree.mkdir()
        extract(args.base, base_tree)
        trees = {"base": base_tree, "new": ROOT}
        # A B B A ...: whatever drifts on a shared machine (other work, the cluster's growth) falls on both.
        order = [("base", "new") if n % 2 == 0 else ("new", "base") for n in range(args.rounds)]
        with pg.cluster() as first, pg.cluster() as second:
            user = 10_001
            for n, pair in enumerate(order):
                if args.together:
                    # Both trees at once, each on a cluster of its own (swapped each round), measured in one window:
                    # the machine's load at the time falls on both alike.
                    ready = asyncio.Barrier(2)
                    both = await asyncio.gather(
                        one_run(pair[0], trees[pair[0]], first, args, work, user, ready),
                        one_run(pair[1], trees[pair[1]], second, args, work, user + args.learners, ready),
                    )
                    user += 2 * args.learners
                else:
                    both = []
                    for label in pair:
                        both.append(await one_run(label, trees[label], first, args, work, user))
                        user += args.learners
                for run in both:
                    run["round"] = n
                    runs.append(run)
    before = means([r for r in runs if r["tree"] == "base"])
    after = means([r for r in runs if r["tree"] == "new"])
    return {
        "base": args.base,
        "before": before,
        "after": after,
        "ratios": {key: ratio(after[key], before[key]) for key in PARTS},
        "errors": sum(r["error_count"] for r in runs),
        "learners": args.learners,
        "tap_interval_s": args.tap_interval,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "together": args.together,
        "log_level": args.log_level,
        "load_average": os.getloadavg()[0],
        "runs": runs,
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="few learners, short windows, one round (smoke test)")
    p.add_argument("--base", help="the commit to compare with (default: where this branch left main)")
    p.add_argument("--learners", type=int, help="simulated learners per replica (default 80; quick 20)")
    p.add_argument("--tap-interval", type=float, help="mean seconds between a learner's taps (default 2; quick 1)")
    p.add_argument("--seconds", type=float, help="measuring window per run (default 30; quick 4)")
    p.add_argument("--rounds", type=int, help="runs of each tree (default 3; quick 1)")
    p.add_argument("--seed", type=int, default=20240611)
    p.add_argument(
        "--one-at-a-time",
        dest="together",
        action="store_false",
        help="run the trees one after the other on one cluster (default: both at once, each on its own cluster)",
    )
    p.add_argument("--log-level", default="INFO", help="the replicas' COURSEBOT_LOG_LEVEL (default INFO, as deployed)")
    p.add_argument("--bot-env", action="append", default=[], metavar="KEY=VALUE", help="extra environment")
    args = p.parse_args(argv)
    quick = args.quick
    for key, full, short in (
        ("learners", 80, 20),
        ("tap_interval", 2.0, 1.0),
        ("seconds", 30.0, 4.0),
        ("rounds", 3, 1),
    ):
        if getattr(args, key) is None:
            setattr(args, key, short if quick else full)
    args.warmup = 1.0 if quick else 5.0
    args.base = args.base or base_commit()
    try:
        args.bot_env = dict(item.split("=", 1) for item in args.bot_env)
    except ValueError:
        p.error("--bot-env takes KEY=VALUE")
    if not 1 <= args.learners <= 2000 or not 1 <= args.rounds <= 10:
        p.error("--learners must be 1..2000, --rounds 1..10")
    if not 0.5 <= args.seconds <= 600 or not 0.05 <= args.tap_interval <= 600:
        p.error("--seconds must be 0.5..600, --tap-interval 0.05..600")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    try:
        result = asyncio.run(main_async(args))
    except BotFailed as exc:
        log(f"benchmark failed: {exc}")
        return 1
    result["wall_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
