"""The SQLite engine: one file, one aiosqlite connection, one writer at a time (WAL, synchronous NORMAL).

One bot process owns the file, so the in-process writer lock is every lock there is: a learner's lock and the
once-only work's lock are held already by whoever holds the writer.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar, cast

import aiosqlite

from bot.errors import StorageError
from bot.storage.backend import Params, Row, SyncConnection

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 5000

T = TypeVar("T")


class SqliteTransaction:
    """A transaction on the one connection (bot.storage.backend.Transaction)."""

    def __init__(self, conn: aiosqlite.Connection):
        self._conn = conn

    async def execute(self, sql: str, params: Params = ()) -> int:
        cursor = await self._conn.execute(sql, params)
        return cursor.rowcount

    async def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        await self._conn.executemany(sql, rows)

    async def all(self, sql: str, params: Params = ()) -> list[Row]:
        return await _all(self._conn, sql, params)

    async def one(self, sql: str, params: Params = ()) -> Row | None:
        rows = await _all(self._conn, sql, params)
        return rows[0] if rows else None

    async def lock(self, key: int) -> None:
        """Nothing to wait for: this transaction holds the only writer."""

    async def try_lock(self, key: int) -> bool:
        return True


async def _all(conn: aiosqlite.Connection, sql: str, params: Params) -> list[Row]:
    # The connection's row factory makes every row a sqlite3.Row.
    return [row for row in await conn.execute_fetchall(sql, params) if isinstance(row, sqlite3.Row)]


def _create_private(path: Path) -> None:
    """Create the database's folder (0700) and file (0600) if missing: learners' progress is nobody else's.

    SQLite gives its -wal and -shm files the database file's mode.
    """
    # Each missing folder on the way (mkdir's parents=True would make the upper ones with the umask's mode).
    for folder in reversed([path.parent, *path.parent.parents]):
        if not folder.exists():
            folder.mkdir(mode=0o700)
    if not path.exists():
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))


class SqliteBackend:
    """The SQLite file behind the storage (bot.storage.backend.Backend). Open it with ``await SqliteBackend.open``."""

    name = "sqlite"

    def __init__(self, conn: aiosqlite.Connection, path: Path):
        self._conn = conn
        self.path = path
        self.where = str(path)
        self._writer = asyncio.Lock()
        self._closed = False

    @classmethod
    async def open(cls, path: Path) -> SqliteBackend:
        try:
            _create_private(path)
            # isolation_level=None: transactions are explicit, so each write decides its own.
            conn = await aiosqlite.connect(path, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(f"cannot open the database {path}: {exc}") from exc
        conn.row_factory = sqlite3.Row
        engine = cls(conn, path)
        try:
            # PRAGMA takes no bound parameters; the value is our own integer.
            await conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_MS)}")
            mode = await engine.one("PRAGMA journal_mode = WAL")
            if mode is None or mode["journal_mode"].lower() != "wal":
                log.warning("SQLite refused WAL mode for %s (journal_mode=%s)", path, mode and mode["journal_mode"])
            await conn.execute("PRAGMA synchronous = NORMAL")
            await conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.DatabaseError as exc:
            await conn.close()
            raise StorageError(f"the database {path} is unusable: {exc}") from exc
        return engine

    async def schema_version(self) -> int:
        row = await self.one("PRAGMA user_version")
        return int(row["user_version"]) if row is not None else 0

    async def check_writable(self) -> None:
        version = await self.schema_version()
        async with self.transaction() as conn:
            # PRAGMA takes no bound parameters; version is our own integer.
            await conn.execute(f"PRAGMA user_version = {int(version)}")

    async def migrate(self, migrations: Sequence[str]) -> list[int]:
        applied: list[int] = []
        version = await self.schema_version()
        for number in range(version + 1, len(migrations) + 1):
            # One script, one transaction: a migration and its version number land together or not at all.
            # PRAGMA takes no bound parameters; number is our own integer.
            script = f"BEGIN IMMEDIATE;\n{migrations[number - 1]};\nPRAGMA user_version = {int(number)};\nCOMMIT;"
            async with self._writer:
                try:
                    await self._conn.executescript(script)
                except sqlite3.Error:
                    if self._conn.in_transaction:
                        await self._conn.execute("ROLLBACK")
                    raise
            applied.append(number)
        return applied

    async def tables(self) -> list[str]:
        rows = await self.all("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid")
        return [row["name"] for row in rows if not row["name"].startswith("sqlite_")]

    @asynccontextmanager
    async def learner_lock(
        self, key: int, read: tuple[str, tuple[int, ...]] | None = None
    ) -> AsyncIterator[list[Row] | None]:
        """One process owns the file: its in-process lock per learner (bot.updates.PerLearnerOrder) is the lock."""
        if read is None:
            yield None
            return
        sql, params = read
        yield await self.all(sql, params)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        async with self._writer:
            await self._conn.close()

    @asynccontextmanager
    async def transaction(self, *, to_disk: bool = False) -> AsyncIterator[SqliteTransaction]:
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
                    yield SqliteTransaction(self._conn)
                except BaseException:
                    await self._conn.execute("ROLLBACK")
                    raise
                else:
                    await self._conn.execute("COMMIT")
            finally:
                if to_disk:
                    await self._conn.execute("PRAGMA synchronous = NORMAL")

    async def run(self, work: Callable[[SyncConnection], T], *, to_disk: bool = False) -> T:
        async with self._writer:
            # aiosqlite runs a function on its thread with _execute: its own methods are built on it.
            done = await self._conn._execute(self._run, work, to_disk)  # type: ignore[no-untyped-call]
            return cast(T, done)

    def _run(self, work: Callable[[SyncConnection], T], to_disk: bool) -> T:
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

    async def write_one(self, sql: str, params: Params = ()) -> int:
        """One statement in autocommit: one round trip to the database thread instead of three (every tap's path)."""
        async with self._writer:
            cursor = await self._conn.execute(sql, params)
            return cursor.rowcount

    async def all(self, sql: str, params: Params = ()) -> list[Row]:
        return await _all(self._conn, sql, params)

    async def one(self, sql: str, params: Params = ()) -> Row | None:
        rows = await _all(self._conn, sql, params)
        return rows[0] if rows else None
