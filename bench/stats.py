"""Stats benchmark: `coursebot stats` over a database of 100,000 simulated learners.

    .venv/bin/python bench/stats.py [--learners 100000] [--repeat 3] [--seed 7] [--keep DIR] [--quick]

Builds the database first: learners take the course with a realistic drop-off (bench/events.py: a few per cent
leave at every slide, more at some, four in five go on to the next lesson, Quick Check answers with easy, hard
and unpicked options, practice runs, hints), written through the events table's columns in time order, as the
bot records them; then the report's indexes are added, as their migration does. Progress goes to stderr.

Prints ONE JSON object on stdout:

* ``report_s``: the whole report (read the events, build, render as text), the median of ``--repeat`` runs
  (each in ``report_runs_s``); ``target_s`` is 5 and ``target_met`` says whether the median is within it;
* ``full_scan_s``: the peer, measured in the same run: one plain pass over every row of the events table;
  ``report_over_scan`` = report_s / full_scan_s, what the report costs in table scans (machine-independent);
* ``lesson_report_s`` (one lesson, ``--lesson 3``) and ``filtered_report_s`` (``--since`` and ``--language``);
* ``learners``, ``events``, ``events_per_learner``, ``db_bytes`` and ``db_bytes_per_learner`` (the whole
  database, indexes included), ``report_index_bytes_per_learner`` (what the report's indexes add);
* ``other_cpu``: CPU (in cores) the rest of the machine used while the report ran, and ``contended`` (true
  from bench.bot's CONTENDED on: the times are suspect, run again on a quiet machine); ``cpus``.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import events
from bench.bot import CONTENDED, _machine_busy
from bot.course.model import Content
from bot.library.load import load_valid
from bot.stats import query, report, text

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 5.0


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def build(path: Path, content: Content, learners: int, seed: int) -> dict[str, float]:
    """Write the simulated course into a fresh database at ``path``; return its figures."""
    started = time.perf_counter()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode = WAL")  # as the bot keeps it
        events.create_table(conn)
        count = events.write(conn, events.simulate(content.english, learners, seed=seed))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        bare = path.stat().st_size
        log(f"{count} events of {learners} learners written in {time.perf_counter() - started:.0f} s")
        conn.executescript(query.INDEXES)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return {"events": count, "bare_bytes": bare, "build_s": time.perf_counter() - started}


def timed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def full_scan(path: Path) -> None:
    """The peer: one pass over every row of the events table, reading a column of each."""
    with sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True) as conn:
        conn.execute("SELECT count(*), sum(length(kind)) FROM events NOT INDEXED").fetchall()
    conn.close()


def run_report(path: Path, content: Content, filters: query.Filters) -> str:
    """What `coursebot stats` does once the content is loaded."""
    return text.render(report.build(content, query.read(path, filters), filters))


def measure(path: Path, content: Content, repeat: int) -> dict[str, object]:
    full_scan(path)  # the first pass warms the page cache for every measurement alike
    scans = [timed(lambda: full_scan(path)) for _ in range(repeat)]
    busy, own = _machine_busy(), time.process_time()
    wall = time.perf_counter()
    runs = [timed(lambda: run_report(path, content, query.Filters())) for _ in range(repeat)]
    wall = time.perf_counter() - wall
    other = max(0.0, (_machine_busy() - busy) - (time.process_time() - own)) / wall
    lesson = content.english.lessons[2].id
    filtered = query.Filters(since=query.moment("2026-10-15"), language="ru")
    report_s = statistics.median(runs)
    scan_s = statistics.median(scans)
    return {
        "report_s": round(report_s, 3),
        "report_runs_s": [round(run, 3) for run in runs],
        "target_s": TARGET_S,
        "target_met": report_s <= TARGET_S,
        "full_scan_s": round(scan_s, 3),
        "report_over_scan": round(report_s / scan_s, 2),
        "lesson_report_s": round(timed(lambda: run_report(path, content, query.Filters(lessons=(lesson,)))), 3),
        "filtered_report_s": round(timed(lambda: run_report(path, content, filtered)), 3),
        "other_cpu": round(other, 2),
        "contended": other >= CONTENDED,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3, help="report runs to take the median of")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", metavar="DIR", help="build the database in DIR and keep it (reused if there)")
    parser.add_argument("--quick", action="store_true", help="2,000 learners, one run: a smoke test")
    args = parser.parse_args(argv)
    if args.quick:
        args.learners, args.repeat = 2_000, 1
    content = load_valid(ROOT / "lessons", ROOT / "locales")
    with tempfile.TemporaryDirectory(prefix="coursebot-stats-bench-") as scratch:
        folder = Path(args.keep) if args.keep else Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"events-{args.learners}-{args.seed}.sqlite3"
        if path.exists():
            with sqlite3.connect(path) as conn:
                built: dict[str, float] = {"events": conn.execute("SELECT count(*) FROM events").fetchone()[0]}
            conn.close()
            log(f"reusing {path}")
        else:
            built = build(path, content, args.learners, args.seed)
        size = path.stat().st_size
        result: dict[str, object] = {
            "learners": args.learners,
            "events": built["events"],
            "events_per_learner": round(built["events"] / args.learners, 1),
            "db_bytes": size,
            "db_bytes_per_learner": round(size / args.learners),
            "cpus": os.cpu_count(),
            "quick": args.quick,
        }
        if "bare_bytes" in built:
            result["report_index_bytes_per_learner"] = round((size - built["bare_bytes"]) / args.learners)
            result["build_s"] = round(built["build_s"], 1)
        log("timing the report")
        result |= measure(path, content, args.repeat)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
