"""Read the learning events, aggregated in SQL: the figures the stats report is made of.

The events table (one row per event, the Telegram user id the only personal datum) is written by the bot as
learners act; this module only reads it, over a read-only connection, so a report can run beside the live bot:
from the SQLite file, or from PostgreSQL (COURSEBOT_DB=postgresql://...) in read-only transactions. Each query is
written once for both engines; ``_Dialect`` holds the two things they write differently.

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
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from bot.errors import CoursebotError
from bot.storage.backend import is_url, pyformat, redacted
from bot.storage.migrations import MIGRATIONS

# The report's indexes. Every query below reads one of them alone (covering), in the order its GROUP BY needs:
# events by kind, lesson and item, then learner and time; and each slide's recorded seconds in order, for medians.
# The report's indexes, as the bot's database has them since migration 7 (a copy built without migrations adds them).
INDEXES = MIGRATIONS[6]
INDEX_NAMES = ("events_report", "events_slide_seconds")
CONNECT_TIMEOUT_S = 10


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


def read(target: Path | str, filters: Filters) -> Figures:
    """Read every figure of the report from the events database: an SQLite file's path or a ``postgresql://`` URL."""
    engine: _Engine = _Postgres(str(target)) if is_url(target) else _Sqlite(Path(target))
    figures = Figures()
    with engine.connect() as conn:
        present = engine.indexes(conn)
    figures.missing_indexes = tuple(name for name in INDEX_NAMES if name not in present)
    dialect = engine.dialect(present)
    # Two connections, two threads: SQLite runs each query without holding the GIL, psycopg waits for PostgreSQL
    # without it.
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = [
            pool.submit(_run, engine, reader, dialect, filters, figures) for reader in (_answers, _slides_and_practice)
        ]
        for future in done:
            future.result()
    return figures


class Cursor(Protocol):
    """What a statement gives back on either engine: its rows, as tuples."""

    def __iter__(self) -> Iterator[Any]: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """A read-only connection to the events: the queries' ``?`` placeholders on either engine."""

    def execute(self, sql: str, parameters: Any = (), /) -> Cursor: ...


class _Dialect:
    """The little the two engines write differently; every query below is otherwise one text for both.

    - ``source``: the table as a query reads it. SQLite reads it through the report's index when the database has
      it (the planner would sometimes take the narrower contract index and fetch every row from the table);
      PostgreSQL's planner is left to choose.
    - ``first``: a column's value on a learner's earliest event of the group. SQLite takes a bare column from the
      row of the one ``MIN(at)`` in the same SELECT (``by_time``), and the index hands the rows over by learner, so
      the grouping needs no sort; PostgreSQL has no bare columns, and takes the first of the group's values in
      time order (of two events in the same millisecond, the one recorded first).
    """

    def __init__(self, engine: str, indexes: set[str]):
        self.engine = engine
        self.indexes = indexes
        self.by_time = ", MIN(at)" if engine == "sqlite" else ""

    def source(self, index: str) -> str:
        return f"events INDEXED BY {index}" if self.engine == "sqlite" and index in self.indexes else "events"

    def first(self, column: str) -> str:
        return column if self.engine == "sqlite" else f"(array_agg({column} ORDER BY at, id))[1]"


class _Engine(Protocol):
    """Where the events are, and how to open a read-only connection to them."""

    def connect(self) -> AbstractContextManager[Connection]: ...

    def indexes(self, conn: Connection) -> set[str]:
        """Return the names of the events table's indexes."""
        ...

    def dialect(self, indexes: set[str]) -> _Dialect: ...

    def failed(self, exc: Exception) -> StatsError | None:
        """Return the one-line error a failed query is, or None for an exception this engine does not raise."""
        ...


Reader = Callable[[Connection, _Dialect, Filters, Figures], None]


def _run(engine: _Engine, reader: Reader, dialect: _Dialect, filters: Filters, out: Figures) -> None:
    with engine.connect() as conn:
        try:
            reader(conn, dialect, filters, out)
        except Exception as exc:
            error = engine.failed(exc)
            if error is None:
                raise
            raise error from None


class _Sqlite:
    """An SQLite file, opened read-only (so the live bot is never blocked)."""

    def __init__(self, path: Path):
        self.path = path

    @contextlib.contextmanager
    def connect(self) -> Iterator[Connection]:
        """Open the events database read-only, and close it after."""
        path = self.path
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

    def indexes(self, conn: Connection) -> set[str]:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}

    def dialect(self, indexes: set[str]) -> _Dialect:
        return _Dialect("sqlite", indexes)

    def failed(self, exc: Exception) -> StatsError | None:
        if isinstance(exc, sqlite3.DatabaseError):
            return StatsError(f"cannot read the learning events in {self.path}: {exc}")
        return None


class _Postgres:
    """A PostgreSQL database, read in read-only transactions (each connection one snapshot)."""

    def __init__(self, url: str):
        self.url = url
        self.where = redacted(url)

    @contextlib.contextmanager
    def connect(self) -> Iterator[Connection]:
        # Imported only when chosen: a report on an SQLite file never loads psycopg.
        import psycopg
        from psycopg.conninfo import conninfo_to_dict

        try:
            conninfo_to_dict(self.url)
        except psycopg.Error as exc:
            raise StatsError(
                f"{self.where} is not a PostgreSQL URL (postgresql://user:password@host:port/name): {_one_line(exc)}"
            ) from None
        try:
            conn = psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT_S, prepare_threshold=None)
        except psycopg.ProgrammingError as exc:
            raise StatsError(f"{self.where} is not a PostgreSQL URL: {_one_line(exc)}") from None
        except psycopg.Error as exc:
            raise StatsError(f"cannot reach the database {self.where}: {_one_line(exc)}") from None
        try:
            conn.read_only = True
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            found = conn.execute("SELECT to_regclass('events') IS NOT NULL").fetchone()
            if not (found and found[0]):
                raise StatsError(f"{self.where} has no learning events table: the bot creates it when it starts")
            yield _Placeholders(conn)
        except psycopg.Error as exc:
            raise StatsError(f"cannot read the learning events in {self.where}: {_one_line(exc)}") from None
        finally:
            conn.close()

    def indexes(self, conn: Connection) -> set[str]:
        rows = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'events'"
        )
        return {row[0] for row in rows}

    def dialect(self, indexes: set[str]) -> _Dialect:
        return _Dialect("postgresql", indexes)

    def failed(self, exc: Exception) -> StatsError | None:
        import psycopg

        if isinstance(exc, psycopg.Error):
            return StatsError(f"cannot read the learning events in {self.where}: {_one_line(exc)}")
        return None


class _Placeholders:
    """A psycopg connection that takes the queries as written (``?``), as the storage's PostgreSQL engine does."""

    def __init__(self, conn: Any):  # Any: psycopg is imported only when PostgreSQL is read
        self._conn = conn

    def execute(self, sql: str, parameters: Any = (), /) -> Cursor:
        cursor: Cursor = self._conn.execute(pyformat(sql), parameters)
        return cursor


def _one_line(exc: Exception) -> str:
    """Return what a driver's error says, in one line (libpq's messages run over several)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    # libpq quotes a URL it cannot parse, password and all.
    return redacted("; ".join(lines)) or type(exc).__name__


def _answers(conn: Connection, d: _Dialect, f: Filters, out: Figures) -> None:
    """Each learner's first answer to each question (right or not, and its option), and to each drill."""
    where, values = f.sql()
    events = d.source("events_report")
    rows = conn.execute(
        "SELECT lesson_id, item_id, option_id, verdict, COUNT(*) FROM ("
        f"  SELECT lesson_id, item_id, {d.first('option_id')} AS option_id, {d.first('verdict')} AS verdict{d.by_time}"
        f"  FROM {events} WHERE kind = 'answer'{where} GROUP BY lesson_id, item_id, user_id"
        ") AS first_answers GROUP BY lesson_id, item_id, option_id, verdict",
        values,
    )
    for lesson, item, option, verdict, learners in rows:
        total, right = out.first_tries.get((lesson, item), (0, 0))
        out.first_tries[(lesson, item)] = (total + learners, right + (learners if verdict == "right" else 0))
        key = (lesson, item, str(option))
        out.chosen[key] = out.chosen.get(key, 0) + learners
    # Each learner's drill answers: the first one's verdict, and whether any was right.
    rows = conn.execute(
        f"SELECT lesson_id, item_id, COUNT(*), {_count_of('first', 'right')}, SUM(solved) FROM ("
        f"  SELECT lesson_id, item_id, {d.first('verdict')} AS first,"
        f"  MAX({_flag('verdict', 'right')}) AS solved{d.by_time}"
        f"  FROM {events} WHERE kind = 'drill'{where} GROUP BY lesson_id, item_id, user_id"
        ") AS drill_learners GROUP BY lesson_id, item_id",
        values,
    )
    out.drills = {(lesson, item): (learners, first, solved) for lesson, item, learners, first, solved in rows}


def _flag(column: str, value: str) -> str:
    """Return 1 where ``column`` is ``value`` (a fixed word of the events), else 0: an integer on both engines."""
    return f"CASE WHEN {column} = '{value}' THEN 1 ELSE 0 END"


def _count_of(column: str, value: str) -> str:
    """Return how many rows of the group have ``column`` = ``value``."""
    return f"SUM({_flag(column, value)})"


def _slides_and_practice(conn: Connection, d: _Dialect, f: Filters, out: Figures) -> None:
    """Learners shown each slide and the seconds slide events carry; runs, failed checks, hints, lessons done."""
    where, values = f.sql()
    events = d.source("events_report")
    # The index hands each slide's events over by learner: counting them distinct needs no sort.
    rows = conn.execute(
        f"SELECT lesson_id, item_id, COUNT(DISTINCT user_id) FROM {events}"
        f" WHERE kind = 'slide'{where} GROUP BY lesson_id, item_id",
        values,
    )
    out.reached = {(lesson, item): learners for lesson, item, learners in rows}
    _slide_seconds(conn, d.source("events_slide_seconds"), where, values, out)
    rows = conn.execute(
        f"SELECT lesson_id, runs, COUNT(*), {_count_of('first', 'passed')},"
        " SUM(CASE WHEN passes > 0 THEN 1 ELSE 0 END) FROM ("
        f"  SELECT lesson_id, COUNT(*) AS runs, {d.first('verdict')} AS first,"
        f"  {_count_of('verdict', 'passed')} AS passes{d.by_time}"
        f"  FROM {events} WHERE kind = 'run'{where} GROUP BY lesson_id, item_id, user_id"
        ") AS runners GROUP BY lesson_id, runs",
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
    out.finished = dict(rows)


def _slide_seconds(conn: Connection, events: str, where: str, values: list[Any], out: Figures) -> None:
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
