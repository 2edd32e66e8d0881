"""One storage API over two database engines: SQLite (one file, the default) and PostgreSQL (several bot processes).

The storage writes each query once, in the subset both engines share: ``?`` or ``:name`` placeholders with bound
values, ``INSERT … ON CONFLICT``, ``RETURNING``, ``CAST``. Each engine (bot.storage.sqlite, bot.storage.postgres)
runs it its own way: SQLite through aiosqlite on one connection with one writer, PostgreSQL through a psycopg 3
pool, its placeholders translated here once per query text.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeAlias, TypeVar

Params: TypeAlias = tuple[Any, ...] | dict[str, Any]
T = TypeVar("T")

# Where COURSEBOT_DB names a PostgreSQL database rather than an SQLite file.
URL_SCHEMES = ("postgresql://", "postgres://")


def is_url(target: object) -> bool:
    """Return whether ``target`` names a PostgreSQL database (a URL) rather than an SQLite file (a path)."""
    return isinstance(target, str) and target.startswith(URL_SCHEMES)


def redacted(url: str) -> str:
    """Return ``url`` without its password, for messages and logs."""
    return re.sub(r"://([^:/@]*):[^@/]*@", r"://\1:***@", url)


class Row(Protocol):
    """A row read by column name or position (sqlite3.Row, and the PostgreSQL engine's rows)."""

    def __getitem__(self, key: int | str, /) -> Any: ...

    def keys(self) -> list[str]: ...


class SyncCursor(Protocol):
    """What a statement run inside ``Backend.run`` gives back (sqlite3's cursor, psycopg's)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class SyncConnection(Protocol):
    """The connection a ``Backend.run`` work function writes through, on the database's own thread: sqlite3's
    connection itself, or bot.storage.postgres's wrapper of a psycopg one (same placeholders, translated)."""

    def execute(self, sql: str, parameters: Any = (), /) -> SyncCursor: ...


class Transaction(Protocol):
    """What one transaction can do; everything in it commits together or not at all."""

    async def execute(self, sql: str, params: Params = ()) -> int:
        """Run one statement; return the rows it changed."""
        ...

    async def executemany(self, sql: str, rows: Sequence[Params]) -> None: ...

    async def all(self, sql: str, params: Params = ()) -> list[Row]: ...

    async def one(self, sql: str, params: Params = ()) -> Row | None: ...

    async def lock(self, key: int) -> None:
        """Hold the lock ``key`` until the transaction ends, waiting for whoever holds it (one learner's updates)."""
        ...

    async def try_lock(self, key: int) -> bool:
        """Take the lock ``key`` until the transaction ends if nobody holds it; return whether it was taken."""
        ...


class Backend(Protocol):
    """A database engine the storage reads and writes through: one per bot process."""

    name: str  # "sqlite" or "postgresql"
    where: str  # the file or the URL without its password, for messages

    def transaction(self, *, to_disk: bool = False) -> AbstractAsyncContextManager[Transaction]:
        """One transaction; ``to_disk`` waits until it would survive a crash of the machine."""
        ...

    async def run(self, work: Callable[[SyncConnection], T], *, to_disk: bool = False) -> T:
        """Run ``work`` as one transaction in one hop off the event loop (SQLite: on aiosqlite's thread; PostgreSQL:
        on a worker thread with a connection of its own); whatever it raises rolls the transaction back."""
        ...

    async def write_one(self, sql: str, params: Params = ()) -> int:
        """Run one statement as its own transaction; return the rows it changed."""
        ...

    async def all(self, sql: str, params: Params = ()) -> list[Row]: ...

    async def one(self, sql: str, params: Params = ()) -> Row | None: ...

    async def schema_version(self) -> int:
        """Return the number of the last migration applied."""
        ...

    async def check_writable(self) -> None:
        """Take a write transaction that changes nothing and commit it: raises if the database cannot be written."""
        ...

    async def migrate(self, migrations: Sequence[str]) -> list[int]:
        """Apply the migrations not applied yet, each with its number, once across processes; return their numbers."""
        ...

    async def tables(self) -> list[str]:
        """Return the names of the storage's tables, in creation order."""
        ...

    def learner_lock(
        self, key: int, read: tuple[str, tuple[int, ...]] | None = None
    ) -> AbstractAsyncContextManager[list[Row] | None]:
        """Hold a learner's lock across processes for a block (one update's handling); nothing on SQLite, whose one
        process orders a learner's updates itself (bot.updates.PerLearnerOrder). With ``read`` (a query and its
        integer values), yield its rows, read once the lock is held (None without)."""
        ...

    async def close(self) -> None: ...


# A quoted string or identifier (copied as it is), a ``::`` cast, a ``?``, a ``:name``, a ``%``, or a call of
# SQLite's json_object, which PostgreSQL calls json_build_object (its own json_object takes arrays), or of SQLite's
# json_each over an array, which PostgreSQL calls json_array_elements_text (both name the element ``value``).
_TOKEN = re.compile(
    r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|::|\?|:([A-Za-z_][A-Za-z0-9_]*)|%|\b(json_object|json_each)\s*\(",
    re.IGNORECASE,
)
# SQLite's JSON functions by their PostgreSQL names.
_JSON_FUNCTIONS = {"json_object": "json_build_object", "json_each": "json_array_elements_text"}


@functools.lru_cache(maxsize=1024)
def pyformat(sql: str) -> str:
    """Translate a query to PostgreSQL as psycopg takes it: ``?`` and ``:name`` placeholders to ``%s`` and
    ``%(name)s``, ``%`` to ``%%``, ``json_object(`` to ``json_build_object(``, and ``json_each(`` (of an array: its
    elements come as text, CAST them) to ``json_array_elements_text(``.

    Quoted text and ``::`` casts are left alone, so a ``?`` or ``:`` inside a string literal stays what it is. The
    other SQLite functions the queries use (instr, julianday, round of a float, json_group_array) are defined in the
    PostgreSQL schema (bot.storage.migrations_pg).
    """

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "?":
            return "%s"
        if token == "%":
            return "%%"
        if match.group(1) is not None:
            return f"%({match.group(1)})s"
        if match.group(2) is not None:
            return f"{_JSON_FUNCTIONS[match.group(2).lower()]}("
        return token

    return _TOKEN.sub(replace, sql)


# A learner's lock key is their Telegram user id (positive, under 2^52); the storage's own locks are negative.
MIGRATION_LOCK = -0x436F_7572_7365_0001  # "Course" 1: one process migrates, the others wait
PURGE_LOCK = -0x436F_7572_7365_0002  # the daily purge of the inbox and the learning events runs in one process
ADOPT_LOCK = -0x436F_7572_7365_0003  # replicas starting (or reloading) together adopt the lessons one after another
