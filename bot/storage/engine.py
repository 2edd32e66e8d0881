"""The SQLite engine under every table group: one connection, one writer, every value bound (datasette's style).

The table groups (bot.storage.inbox, learners, lessons, quiz, practice, events, drills, outcomes) are flat modules of
queries; each is a class over this engine, and bot.storage.db joins them into the one ``Database`` the bot opens.
Reads go through ``_one``/``_all``; every write goes through ``_write`` (one transaction, one writer at a time) or
``_write_one`` (one statement). A second engine (PostgreSQL) keeps the same methods with its own SQL.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Self, TypeAlias, TypeVar, cast

import aiosqlite

from bot.errors import StorageError
from bot.storage.migrations import MIGRATIONS

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 5000

T = TypeVar("T")


Params: TypeAlias = tuple[Any, ...] | dict[str, Any]
# A row read by column name: a sqlite3.Row, or a JSON object when one statement reads several tables at once.
Row: TypeAlias = sqlite3.Row | dict[str, Any]
# What time it is, as an aware datetime; tests pass their own so no test waits for time to pass.
Clock: TypeAlias = Callable[[], dt.datetime]


def utc_now() -> dt.datetime:
    """Return the current time in UTC: the database's clock unless one is injected."""
    return dt.datetime.now(dt.UTC)


def timestamp(moment: dt.datetime) -> str:
    """Return ``moment`` as the database stores times: UTC, ISO 8601 to the millisecond."""
    return moment.astimezone(dt.UTC).isoformat(timespec="milliseconds")


class Engine:
    """The progress database's connection. Open it once with ``await Database.open(path)``; ``close()`` is
    idempotent."""

    def __init__(self, conn: aiosqlite.Connection, path: Path, clock: Clock = utc_now, events_days: int | None = None):
        self._conn = conn
        self.path = path
        self.clock = clock
        # How long learning events are kept: None keeps them, 0 records none (bot.config: COURSEBOT_EVENTS_DAYS).
        self.events_days = events_days
        self._writer = asyncio.Lock()
        self._closed = False

    def _now(self) -> str:
        return timestamp(self.clock())

    @classmethod
    async def open(cls, path: Path, *, clock: Clock = utc_now, events_days: int | None = None) -> Self:
        """Open (creating if needed) and migrate the database at ``path``.

        ``clock`` stamps every write; learning events are kept ``events_days`` days (None: for good).
        """
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: transactions are explicit, so each write decides its own.
            conn = await aiosqlite.connect(path, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(f"cannot open the database {path}: {exc}") from exc
        conn.row_factory = sqlite3.Row
        db = cls(conn, path, clock, events_days)
        try:
            # PRAGMA takes no bound parameters; the value is our own integer.
            await conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_MS)}")
            mode = await db._one("PRAGMA journal_mode = WAL")
            if mode is None or mode["journal_mode"].lower() != "wal":
                log.warning("SQLite refused WAL mode for %s (journal_mode=%s)", path, mode and mode["journal_mode"])
            await conn.execute("PRAGMA synchronous = NORMAL")
            await conn.execute("PRAGMA foreign_keys = ON")
            await db._migrate()
        except sqlite3.DatabaseError as exc:
            await conn.close()
            raise StorageError(f"the database {path} is unusable: {exc}") from exc
        except BaseException:
            await conn.close()
            raise
        return db

    async def _migrate(self) -> None:
        version = await self.schema_version()
        if version > len(MIGRATIONS):
            raise StorageError(
                f"the database {self.path} has schema version {version}, newer than this "
                f"coursebot knows ({len(MIGRATIONS)}); run a newer coursebot or restore a backup"
            )
        for number in range(version + 1, len(MIGRATIONS) + 1):
            # One script, one transaction: a migration and its version number land together or not at all.
            # PRAGMA takes no bound parameters; number is our own integer.
            script = f"BEGIN IMMEDIATE;\n{MIGRATIONS[number - 1]};\nPRAGMA user_version = {int(number)};\nCOMMIT;"
            async with self._writer:
                try:
                    await self._conn.executescript(script)
                except sqlite3.Error:
                    if self._conn.in_transaction:
                        await self._conn.execute("ROLLBACK")
                    raise
            log.info("database %s migrated to schema version %d", self.path, number)

    async def close(self) -> None:
        """Close the connection; calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        async with self._writer:
            await self._conn.close()

    @asynccontextmanager
    async def _write(self, *, to_disk: bool = False) -> AsyncIterator[aiosqlite.Connection]:
        """Run a block as one transaction, one writer at a time.

        Every commit survives a crash of the bot (WAL, synchronous NORMAL); ``to_disk`` waits until it would survive
        a crash of the machine too (synchronous FULL: the WAL is synced at commit), for what cannot be redone.
        """
        async with self._writer:
            if to_disk:
                await self._conn.execute("PRAGMA synchronous = FULL")
            try:
                await self._conn.execute("BEGIN IMMEDIATE")
                try:
                    yield self._conn
                except BaseException:
                    await self._conn.execute("ROLLBACK")
                    raise
                else:
                    await self._conn.execute("COMMIT")
            finally:
                if to_disk:
                    await self._conn.execute("PRAGMA synchronous = NORMAL")

    async def _transaction(self, work: Callable[[sqlite3.Connection], T], *, to_disk: bool = False) -> T:
        """Run ``work`` on the database's thread as one transaction, one writer at a time, in one hop.

        An update's write is several statements; run one by one, each would cost a round trip to the database
        thread (and the CPU of one on the event loop). Here they all run there in one go: ``work`` gets the
        connection, runs its statements (bound, as everywhere) and may raise to roll everything back. ``to_disk`` as
        for ``_write``.
        """
        async with self._writer:
            # aiosqlite runs a function on its thread with _execute: its own methods are built on it.
            done = await self._conn._execute(self._run_transaction, work, to_disk)  # type: ignore[no-untyped-call]
            return cast(T, done)

    def _run_transaction(self, work: Callable[[sqlite3.Connection], T], to_disk: bool) -> T:
        raw = self._conn._conn  # the sqlite3 connection, on its own thread here
        if to_disk:
            raw.execute("PRAGMA synchronous = FULL")
        try:
            raw.execute("BEGIN IMMEDIATE")
            try:
                result = work(raw)
            except BaseException:
                raw.execute("ROLLBACK")
                raise
            raw.execute("COMMIT")
            return result
        finally:
            if to_disk:
                raw.execute("PRAGMA synchronous = NORMAL")

    async def _write_one(self, sql: str, params: Params = ()) -> int:
        """Run one statement as its own transaction (autocommit); return the rows it changed.

        One round trip to the database thread instead of three: this is on every tap's path.
        """
        async with self._writer:
            cursor = await self._conn.execute(sql, params)
            return cursor.rowcount

    async def _one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        rows = await self._all(sql, params)
        return rows[0] if rows else None

    async def _all(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        # The connection's row factory makes every row a sqlite3.Row.
        return [row for row in await self._conn.execute_fetchall(sql, params) if isinstance(row, sqlite3.Row)]

    async def schema_version(self) -> int:
        """Return the number of the last migration applied."""
        row = await self._one("PRAGMA user_version")
        return int(row["user_version"]) if row is not None else 0

    async def check_writable(self) -> None:
        """Take a write transaction and commit it (it changes nothing): raises if the database cannot be written."""
        version = await self.schema_version()
        async with self._write() as conn:
            # PRAGMA takes no bound parameters; version is our own integer.
            await conn.execute(f"PRAGMA user_version = {int(version)}")
