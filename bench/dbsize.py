"""The database's size per learner after the whole course, learning events included.

    .venv/bin/python bench/dbsize.py [--learners N] [--quick]

Runs the bot (in this process, its real HTTP stack against the loopback stand-in, a real SQLite file, the runner
off) while ``--learners`` learners (default 20; quick 2) each take the whole course as tests/test_bot_course.py
does: every slide of every lesson, every Quick Check question, every drill, then /progress. Then the bot stops,
the WAL is checkpointed into the file, and the file is measured.

Prints ONE JSON object:
  bytes_per_learner             (file size after the course - file size of the empty, migrated database) / learners
  bytes_per_learner_vacuumed    the same after VACUUM (no free pages: what the rows take)
  updates_per_learner           updates each learner sent to take the course
  tables                        per table (its indexes included, after VACUUM): rows and bytes per learner (dbstat;
                                whole 4 KiB pages, so take 20 learners or more for a table's figure)
  inbox_note                    the inbox keeps a handled update's id for two days (bot.updates), then forgets it
Practice exercises are not run (the runner is off): each run adds one attempt row and two events.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bot.app import CourseBot  # noqa: E402
from bot.config import Config  # noqa: E402
from bot.library.load import load_valid  # noqa: E402
from bot.storage.db import Database  # noqa: E402
from tests.journey import answer_quiz, read_slides, send_and_wait, solve_drills, tap_and_wait_edit  # noqa: E402
from tests.standin import BotApiStandin  # noqa: E402

LESSONS, LOCALES = ROOT / "lessons", ROOT / "locales"
FIRST_USER = 20_001
CONCURRENCY = 10  # learners taking the course at once


def log(message: str) -> None:
    print(f"[dbsize {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def take_the_course(standin: BotApiStandin, user_id: int, course) -> None:
    """One learner: /start, then every lesson's slides, Quick Check and drills, then /progress."""
    learner = standin.learner(user_id, first_name=f"L{user_id}", language_code="en")
    menu = await send_and_wait(learner, "/start", timeout=30)
    message = await tap_and_wait_edit(learner, menu, "Start the course")
    for lesson in course.lessons:
        last = await read_slides(learner, message, lesson)
        result = await answer_quiz(learner, last, lesson)
        await solve_drills(learner, result, lesson)
        if course.next_lesson(lesson) is None:
            break
        message = await tap_and_wait_edit(learner, result, "Next lesson")
    report = await send_and_wait(learner, "/progress", timeout=30)
    if "The course is complete" not in report["text"]:
        raise RuntimeError(f"learner {user_id} finished, but /progress does not say so: {report['text'][:200]}")


def file_bytes(path: Path) -> int:
    """The database file's size with its WAL checkpointed into it (what a backup of it holds)."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path.stat().st_size


def tables(path: Path) -> dict[str, dict[str, int]]:
    """Rows and bytes (indexes included) of every table, from SQLite's dbstat."""
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as conn:
        owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE type IN ('table', 'index')"))
        found: dict[str, dict[str, int]] = {}
        for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            table = owner.get(name, name)
            entry = found.setdefault(table, {"rows": 0, "bytes": 0})
            entry["bytes"] += size
        for table, entry in found.items():
            if table in owner.values() and not table.startswith("sqlite_"):
                (entry["rows"],) = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()  # our own table names
    conn.close()
    return found


async def measure(learners: int, workdir: Path) -> dict:
    course = load_valid(LESSONS, LOCALES).english
    empty_path = workdir / "empty.sqlite3"
    await (await Database.open(empty_path)).close()
    empty = file_bytes(empty_path)
    db_path = workdir / "coursebot.sqlite3"
    async with BotApiStandin() as standin:
        config = Config(
            token=standin.token,
            api_base_url=standin.api_base_url,
            db_path=db_path,
            lessons_dir=LESSONS,
            locales_dir=LOCALES,
            runner="off",
            watch=False,
        )
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one(user_id: int) -> None:
            async with gate:
                await take_the_course(standin, user_id, course)

        started = time.monotonic()
        async with CourseBot(config):
            await asyncio.gather(*(one(FIRST_USER + i) for i in range(learners)))
            await standin.settle(quiet=0.3, timeout=30)
        log(f"{learners} learners took the course in {time.monotonic() - started:.1f}s")
    size = file_bytes(db_path)
    vacuumed_path = workdir / "vacuumed.sqlite3"
    shutil.copyfile(db_path, vacuumed_path)
    with sqlite3.connect(vacuumed_path) as conn:
        conn.execute("VACUUM")
    conn.close()
    vacuumed = file_bytes(vacuumed_path)
    # Measured compacted: a handled update's text is dropped in place, which leaves its pages part empty until reused.
    per_table = tables(vacuumed_path)
    updates = per_table.get("inbox", {}).get("rows", 0)  # every update is in the inbox for two days
    return {
        "learners": learners,
        "bytes_per_learner": round((size - empty) / learners),
        "bytes_per_learner_vacuumed": round((vacuumed - empty) / learners),
        "file_bytes": size,
        "empty_file_bytes": empty,
        "updates_per_learner": round(updates / learners, 1) if updates else None,
        "tables": {
            name: {
                "rows_per_learner": round(entry["rows"] / learners, 1),
                "bytes_per_learner": round(entry["bytes"] / learners),
            }
            for name, entry in sorted(per_table.items(), key=lambda item: -item[1]["bytes"])
        },
        "inbox_note": "the inbox keeps each handled update's id for two days, then forgets it (bot.updates)",
        "practice_note": "practice exercises not run (runner off): each run adds one attempt row and two events",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, help="learners taking the course (default 20; quick 2)")
    parser.add_argument("--quick", action="store_true", help="two learners (smoke test)")
    args = parser.parse_args(argv)
    learners = args.learners or (2 if args.quick else 20)
    if not 1 <= learners <= 500:
        parser.error("--learners must be 1..500")
    with tempfile.TemporaryDirectory(prefix="coursebot-dbsize-") as tmp:
        result = asyncio.run(measure(learners, Path(tmp)))
    print(json.dumps(result, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
