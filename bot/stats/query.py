"""Read the learning events, aggregated in SQL: the figures the stats report is made of.

The events table (one row per event, the Telegram user id the only personal datum) is written by the bot as
learners act; this module only reads it, over a read-only connection, so a report can run beside the live bot.

Every figure is one aggregate query over a covering index (INDEXES); values are always bound, and the only text
put into the SQL is fixed (index names, the '?' conditions of the filters). With 100,000 learners (about 3.7
million events) the whole report takes a few seconds on two cores: the queries run in two threads, on two
read-only connections: the first answers alone, the rest beside them (about as much work).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.errors import CoursebotError
from bot.storage.migrations import MIGRATIONS

# The report's indexes. Every query below reads one of them alone (covering), in the order its GROUP BY needs:
# events by kind, lesson and item, then learner and time; and each slide's recorded seconds in order, for medians.
# The report's indexes, as the bot's database has them since migration 7 (a copy built without migrations adds them).
INDEXES = MIGRATIONS[6]
INDEX_NAMES = ("events_report", "events_slide_seconds")


class StatsError(CoursebotError):
    """The learning events cannot be read (no database, no events table, a damaged file)."""


@dataclass(frozen=True)
class Filters:
    """Which events a report counts: some lessons, since a moment, in one course language (None: all)."""

    lessons: tuple[str, ...] | None = None
    since: str | None = None  # an ISO-8601 date or moment, UTC; events at or after it
    language: str | None = None

    def sql(self) -> tuple[str, list[Any]]:
        """Return the filters as ' AND ...' conditions and the values they bind."""
        conditions: list[str] = []
        values: list[Any] = []
        if self.lessons is not None:
            conditions.append(f"lesson_id IN ({', '.join('?' * len(self.lessons))})")
            values += self.lessons
        if self.since is not None:
            conditions.append("at >= ?")
            values.append(self.since)
        if self.language is not None:
            conditions.append("language = ?")
            values.append(self.language)
        return "".join(f" AND {condition}" for condition in conditions), values


def moment(text: str) -> str:
    """Return a date or moment ('2026-11-01', '2026-11-01T12:00+02:00') as events store time: UTC, ISO-8601, ms.

    A moment without a zone is taken as UTC. Raises ValueError for anything else.
    """
    when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    when = when.astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


Key = tuple[str, str]  # (lesson id, item id)


@dataclass
class Figures:
    """What the events say, by lesson and item, before any content is attached."""

    reached: dict[Key, int] = field(default_factory=dict)  # learners shown each slide
    seconds: dict[Key, tuple[int, float]] = field(default_factory=dict)  # per slide event: how many, the median
    first_tries: dict[Key, tuple[int, int]] = field(default_factory=dict)  # per question: learners, right at first
    # (lesson, question, option) -> learners whose first answer it was
    chosen: dict[tuple[str, str, str], int] = field(default_factory=dict)
    # Per lesson, learners grouped by how many runs they made: attempts -> (learners, first run passed, passed).
    attempts: dict[str, dict[int, tuple[int, int, int]]] = field(default_factory=dict)
    failed_checks: dict[Key, int] = field(default_factory=dict)  # (lesson, check) -> failed runs
    hints: dict[Key, int] = field(default_factory=dict)  # (lesson, hint number) -> learners who opened it
    finished: dict[str, int] = field(default_factory=dict)  # lesson -> learners who completed it
    # Per drill: learners who answered it, right on their first answer, right at last (solved).
    drills: dict[Key, tuple[int, int, int]] = field(default_factory=dict)
    missing_indexes: tuple[str, ...] = ()  # the report's indexes the database lacks: it is slower without them


def read(path: Path, filters: Filters) -> Figures:
    """Read every figure of the report from the events database at ``path``."""
    figures = Figures()
    with _connect(path) as conn:
        present = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    figures.missing_indexes = tuple(name for name in INDEX_NAMES if name not in present)
    source = _Source(present)
    # Two connections, two threads: SQLite runs each query without holding the GIL.
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = [
            pool.submit(_run, path, reader, source, filters, figures) for reader in (_answers, _slides_and_practice)
        ]
        for future in done:
            future.result()
    return figures


class _Source:
    """The table as each query reads it: through the report's index when the database has it."""

    def __init__(self, indexes: set[str]):
        self.indexes = indexes

    def __call__(self, index: str) -> str:
        # The planner would sometimes take the narrower contract index and fetch every row from the table.
        return f"events INDEXED BY {index}" if index in self.indexes else "events"


Reader = Callable[[sqlite3.Connection, "_Source", Filters, Figures], None]


def _run(path: Path, reader: Reader, source: _Source, filters: Filters, out: Figures) -> None:
    with _connect(path) as conn:
        try:
            reader(conn, source, filters, out)
        except sqlite3.DatabaseError as exc:
            raise StatsError(f"cannot read the learning events in {path}: {exc}") from None


@contextlib.contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    """Open the events database read-only (so the live bot is never blocked), and close it after."""
    if not path.is_file():
        raise StatsError(f"there is no database at {path} (COURSEBOT_DB): nothing has been recorded there")
    try:
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=5.0)
    except sqlite3.DatabaseError as exc:
        raise StatsError(f"cannot open {path} as a database: {exc}") from None
    try:
        # Sorts and temporary tables in memory, and room to keep the indexes' pages.
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute("PRAGMA cache_size = -262144")
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone() is None:
            raise StatsError(f"{path} has no learning events table: the bot creates it when it starts")
        yield conn
    except sqlite3.DatabaseError as exc:
        raise StatsError(f"cannot read {path} as a database: {exc}") from None
    finally:
        conn.close()


def _answers(conn: sqlite3.Connection, source: _Source, f: Filters, out: Figures) -> None:
    """Each learner's first answer to each question (right or not, and its option), and to each drill."""
    where, values = f.sql()
    # SQLite takes a bare column from the row of the one MIN() (here each learner's first answer), and the index
    # hands the answers over by question and learner, so the inner grouping needs no sort.
    rows = conn.execute(
        "SELECT lesson_id, item_id, option_id, verdict, COUNT(*) FROM ("
        f"  SELECT lesson_id, item_id, option_id, verdict, MIN(at) FROM {source('events_report')}"
        f"  WHERE kind = 'answer'{where} GROUP BY lesson_id, item_id, user_id"
        ") GROUP BY lesson_id, item_id, option_id, verdict",
        values,
    )
    for lesson, item, option, verdict, learners in rows:
        total, right = out.first_tries.get((lesson, item), (0, 0))
        out.first_tries[(lesson, item)] = (total + learners, right + (learners if verdict == "right" else 0))
        key = (lesson, item, str(option))
        out.chosen[key] = out.chosen.get(key, 0) + learners
    # Each learner's drill answers: the first one's verdict (the bare column of MIN), and whether any was right.
    rows = conn.execute(
        "SELECT lesson_id, item_id, COUNT(*), SUM(first = 'right'), SUM(solved) FROM ("
        "  SELECT lesson_id, item_id, verdict AS first, MAX(verdict = 'right') AS solved, MIN(at)"
        f"  FROM {source('events_report')} WHERE kind = 'drill'{where} GROUP BY lesson_id, item_id, user_id"
        ") GROUP BY lesson_id, item_id",
        values,
    )
    out.drills = {(lesson, item): (learners, first, solved) for lesson, item, learners, first, solved in rows}


def _slides_and_practice(conn: sqlite3.Connection, source: _Source, f: Filters, out: Figures) -> None:
    """Learners shown each slide and the seconds slide events carry; runs, failed checks, hints, lessons done."""
    where, values = f.sql()
    events = source("events_report")
    # The index hands each slide's events over by learner: counting them distinct needs no sort.
    rows = conn.execute(
        f"SELECT lesson_id, item_id, COUNT(DISTINCT user_id) FROM {events}"
        f" WHERE kind = 'slide'{where} GROUP BY lesson_id, item_id",
        values,
    )
    out.reached = {(lesson, item): learners for lesson, item, learners in rows}
    _slide_seconds(conn, source("events_slide_seconds"), where, values, out)
    rows = conn.execute(
        "SELECT lesson_id, runs, COUNT(*), SUM(first = 'passed'), SUM(passes > 0) FROM ("
        "  SELECT lesson_id, COUNT(*) AS runs, verdict AS first, SUM(verdict = 'passed') AS passes, MIN(at)"
        f"  FROM {events} WHERE kind = 'run'{where} GROUP BY lesson_id, item_id, user_id"
        ") GROUP BY lesson_id, runs",
        values,
    )
    for lesson, runs, learners, first, passed in rows:
        out.attempts.setdefault(lesson, {})[runs] = (learners, first, passed)
    rows = conn.execute(
        f"SELECT lesson_id, failed_check, COUNT(*) FROM {events}"
        f" WHERE kind = 'run' AND failed_check IS NOT NULL{where} GROUP BY lesson_id, failed_check",
        values,
    )
    out.failed_checks = {(lesson, check): count for lesson, check, count in rows}
    rows = conn.execute(
        f"SELECT lesson_id, item_id, COUNT(DISTINCT user_id) FROM {events}"
        f" WHERE kind = 'hint'{where} GROUP BY lesson_id, item_id",
        values,
    )
    out.hints = {(lesson, str(item)): learners for lesson, item, learners in rows}
    rows = conn.execute(
        f"SELECT lesson_id, COUNT(DISTINCT user_id) FROM {events} WHERE kind = 'done'{where} GROUP BY lesson_id",
        values,
    )
    out.finished = dict(rows.fetchall())


def _slide_seconds(conn: sqlite3.Connection, events: str, where: str, values: list[Any], out: Figures) -> None:
    """Read how many seconds each slide event carries and their median, walking the seconds index in order."""
    seconds = f"kind = 'slide' AND seconds IS NOT NULL{where}"
    counts = conn.execute(
        f"SELECT lesson_id, item_id, COUNT(*) FROM {events} WHERE {seconds} GROUP BY lesson_id, item_id", values
    ).fetchall()
    for lesson, item, count in counts:
        # The middle one (or two) of the slide's values in order: the index hands them over sorted.
        middle = conn.execute(
            f"SELECT seconds FROM {events} WHERE {seconds} AND lesson_id = ? AND item_id = ?"
            " ORDER BY seconds LIMIT ? OFFSET ?",
            [*values, lesson, item, 2 - count % 2, (count - 1) // 2],
        ).fetchall()
        out.seconds[(lesson, item)] = (count, sum(value for (value,) in middle) / len(middle))
