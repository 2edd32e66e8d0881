"""Reads and write transactions per update, and CPU per update, against the code before flows (one run, ratios).

    .venv/bin/python bench/flows.py [--quick] [--base d18d507] [--no-cpu]

Prints ONE JSON object on stdout (progress goes to stderr). The tree of ``--base`` (the commit before the flows
change: git archive into a temporary folder) and this checkout run the same probe, each in its own process against
its own stand-in and database:

* ``reads`` and ``writes`` per update, for a slide tap (Next), a right drill choice (a fill-in, not the lesson's last)
  and a graded run (the exercise's solution, sent in practice; only with bubblewrap, for the real runner), counted by
  a SQLite trace callback on the bot's connection. A read is a SELECT; a write is a write transaction (BEGIN ...
  COMMIT, or one statement outside one). The inbox's own bookkeeping (storing the update, marking it handled) is the
  same for every update and counted apart (``inbox_writes``). The reminder sweep's minute job is off (no update's).
* ``cpu_ms_per_update``: bench/bot.py's ``bot_cpu_ms_per_update`` under its realistic load (slide taps), run for the
  base tree with its own bench/bot.py and for this checkout with this one, one after the other (``--no-cpu`` skips
  it). ``cpu_ratio`` = new / base: the target is <= 0.75.

Targets (issue 16): a drill tap at most 2 reads and 1 write transaction, a slide tap 1 read and 1 write; a graded run
(when measured) at most 2 reads and 1 write, as when the flows landed. The learner's activity (the reminder's hour) and
the streak's day cost none of these: activity is a change of the update's one write, and the time zone and recent
activity come with the learner's read (bot.snapshot); the first update in a step (ACTIVITY_STEP) plans the reminder
again, which the probe's updates, seconds apart, never are.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable
from inspect import signature
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {
    "drill": {"reads": 2, "writes": 1},
    "slide": {"reads": 1, "writes": 1},
    "graded_run": {"reads": 2, "writes": 1},
    "cpu_ratio": 0.75,
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Statements:
    """Every statement the bot's connection runs, as SQLite's trace callback reports it (from the database thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: list[str] = []

    def __call__(self, sql: str) -> None:
        with self._lock:
            self._seen.append(sql)

    def take(self) -> list[str]:
        with self._lock:
            seen, self._seen = self._seen, []
        return seen


def count(statements: list[str]) -> dict[str, int]:
    """Return the reads, write transactions and inbox writes among ``statements``."""
    reads = writes = inbox = 0
    transaction: list[str] | None = None
    for sql in statements:
        head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if head == "PRAGMA":
            continue
        if head == "BEGIN":
            transaction = []
            continue
        if head in ("COMMIT", "ROLLBACK", "END"):
            body, transaction = transaction or [], None
            if any("inbox" in s for s in body):
                inbox += 1
            elif body:
                writes += 1
                reads += sum(1 for s in body if s.lstrip().upper().startswith("SELECT"))
            continue
        if transaction is not None:
            transaction.append(sql)
        elif "inbox" in sql:
            inbox += 1
        elif head in ("SELECT", "WITH"):
            reads += 1
        elif head in ("INSERT", "UPDATE", "DELETE", "REPLACE"):
            writes += 1
    return {"reads": reads, "writes": writes, "inbox_writes": inbox}


def mean(samples: list[dict[str, int]]) -> dict[str, float]:
    return {key: round(sum(s[key] for s in samples) / len(samples), 2) for key in samples[0]} if samples else {}


async def probe(runs: int, graded: bool) -> dict[str, object]:
    """Count what one update of each kind reads and writes, on the bot of the tree this process imports."""
    from bot.app import CourseBot
    from bot.config import Config
    from bot.library.load import load_valid
    from tests.journey import data_button, drill_move, read_slides, send_and_wait, tap_and_wait_edit
    from tests.standin import BotApiStandin

    course = load_valid(Path("lessons"), Path("locales")).english
    lesson = course.lessons[0]
    fill = next(d for d in lesson.drills[:-1] if d.kind != "parsons")
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        async with BotApiStandin() as standin:
            config = Config(
                token=standin.token,
                api_base_url=standin.api_base_url,
                db_path=Path(tmp) / "coursebot.sqlite3",
                lessons_dir=Path("lessons"),
                locales_dir=Path("locales"),
                max_retries=3,
                runner="embedded" if graded else "off",
                watch=False,
            )
            # The reminder sweep's minute job (a tree that has one) is no update's cost: off, so it never lands in a
            # measured update's window (its DELETE of old activity once did, as a drill tap's second write).
            quiet = {"sweep_every_minute": False} if "sweep_every_minute" in signature(CourseBot).parameters else {}
            async with CourseBot(config, **quiet) as bot:
                trace = Statements()
                # The aiosqlite connection (behind the SQLite backend since the PostgreSQL engine came; the db's own
                # before): the callback is set on its own thread.
                store = getattr(bot.db, "backend", bot.db)
                conn = store._conn
                await conn._execute(conn._conn.set_trace_callback, trace)

                async def measured(act: Callable[[], Awaitable[object]]) -> dict[str, int]:
                    await standin.settle()
                    trace.take()
                    await act()
                    await standin.settle()
                    return count(trace.take())

                slides, drills, runs_graded = [], [], []
                for n in range(runs):
                    ada = standin.learner(user_id=9100 + n)
                    menu = await send_and_wait(ada, "/start")
                    first = await tap_and_wait_edit(ada, menu, "Start the course")
                    holder = {"message": first}

                    async def next_slide(ada=ada, holder=holder) -> None:
                        holder["message"] = await tap_and_wait_edit(ada, holder["message"], "Next")

                    slides.append(await measured(next_slide))
                    last = await read_slides(ada, holder["message"], lesson)
                    since = ada.cursor()
                    await ada.tap(last, data_button(last, f"dl:{lesson.id}")["text"])
                    screen = await ada.wait_message(since=since)
                    shown = await tap_and_wait_edit(
                        ada, screen, data_button(screen, f"dv:{lesson.id}:{fill.id}")["text"]
                    )

                    async def right_choice(ada=ada, shown=shown) -> None:
                        button = data_button(shown, drill_move(lesson, fill.id, "c", fill.correct))
                        await tap_and_wait_edit(ada, shown, button["text"])

                    drills.append(await measured(right_choice))
                    if graded:
                        since = ada.cursor()
                        await ada.tap(last, callback_data=f"p:{lesson.id}")
                        await ada.wait_message(lambda m: "Practice" in m.get("text", ""), since=since, timeout=10)

                        async def graded_run(ada=ada) -> None:
                            await send_and_wait(
                                ada,
                                f"```python\n{lesson.exercise.solution}\n```",
                                lambda m: "checks passed" in m.get("text", "") or "Not yet" in m.get("text", ""),
                                timeout=60,
                            )

                        runs_graded.append(await measured(graded_run))
                out = {"slide": mean(slides), "drill": mean(drills)}
                if graded:
                    out["graded_run"] = mean(runs_graded)
    return out


def _probe_in(tree: Path, runs: int, graded: bool) -> dict[str, object]:
    """Run the probe on the bot of ``tree`` (a checkout), in a process of its own."""
    script = tree / "bench" / "_flows_probe.py"
    shutil.copy(__file__, script)
    try:
        done = subprocess.run(
            # As a module from the tree's root: bench/bot.py must not shadow the bot package.
            [
                sys.executable,
                "-m",
                "bench._flows_probe",
                "--probe",
                "--runs",
                str(runs),
                *(["--graded"] if graded else []),
            ],
            cwd=tree,
            env={**os.environ, "PYTHONPATH": str(tree), "COURSEBOT_LOG_LEVEL": "WARNING"},
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        script.unlink(missing_ok=True)
    if done.returncode != 0:
        raise RuntimeError(f"the probe failed in {tree}:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout)


def _cpu_in(tree: Path, quick: bool) -> float | None:
    """Return bench/bot.py's CPU per slide tap for the bot of ``tree``, run with that tree's own bench/bot.py."""
    done = subprocess.run(
        [sys.executable, "bench/bot.py", "--only", "coursebot", *(["--quick"] if quick else [])],
        cwd=tree,  # bench/bot.py puts its own tree first on sys.path, and starts `python -m bot` there
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench/bot.py failed in {tree}:\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout)
    value = result["details"]["coursebot"]["realistic"]["bot_cpu_ms_per_update"]
    return float(value) if value is not None else None


def ratio(new: float | None, base: float | None) -> float | None:
    return round(new / base, 3) if new is not None and base else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="one learner per kind, bench/bot.py --quick (smoke test)")
    p.add_argument("--base", default="d18d507", help="the commit to compare with (default: before the flows change)")
    p.add_argument("--no-cpu", action="store_true", help="skip the CPU comparison (bench/bot.py, minutes)")
    p.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--runs", type=int, default=3, help=argparse.SUPPRESS)
    p.add_argument("--graded", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.probe:
        print(json.dumps(asyncio.run(probe(args.runs, args.graded))))
        return 0
    graded = shutil.which("bwrap") is not None
    runs = 1 if args.quick else 3
    with tempfile.TemporaryDirectory(prefix="coursebot-base-") as tmp:
        base = Path(tmp)
        archive = subprocess.run(["git", "archive", args.base], cwd=ROOT, capture_output=True, check=True, timeout=60)
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True, timeout=60)
        log(f"probing the base tree ({args.base}) and this checkout, {runs} learner(s) each")
        before = _probe_in(base, runs, graded)
        after = _probe_in(ROOT, runs, graded)
        out: dict[str, object] = {"base": args.base, "before": before, "after": after}
        out["ratios"] = {
            kind: {key: ratio(after[kind][key], before[kind][key]) for key in ("reads", "writes")}
            for kind in before
            if kind in after
        }
        if not args.no_cpu:
            log("bench/bot.py on the base tree, then on this checkout (one after the other)")
            cpu_before = _cpu_in(base, args.quick)
            cpu_after = _cpu_in(ROOT, args.quick)
            out["cpu_ms_per_update"] = {"before": cpu_before, "after": cpu_after}
            out["cpu_ratio"] = ratio(cpu_after, cpu_before)
    out["targets"] = TARGETS
    met = {
        kind: after[kind]["reads"] <= TARGETS[kind]["reads"] and after[kind]["writes"] <= TARGETS[kind]["writes"]
        for kind in ("slide", "drill", "graded_run")
        if kind in after  # a graded run only with bubblewrap
    }
    if "cpu_ratio" in out:
        met["cpu"] = out["cpu_ratio"] is not None and out["cpu_ratio"] <= TARGETS["cpu_ratio"]
    out["met"] = met
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
