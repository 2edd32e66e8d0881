"""The engine under every table group: one database (an SQLite file, or PostgreSQL), every value bound.

The table groups (bot.storage.inbox, learners, lessons, quiz, practice, events, drills, outcomes) are flat modules of
queries; each is a class over this engine, and bot.storage.db joins them into the one ``Database`` the bot opens.
Reads go through ``_one``/``_all``; every write goes through ``_write`` (one transaction) or ``_write_one`` (one
statement). Below it, a backend (bot.storage.backend) runs each query as written on SQLite (bot.storage.sqlite: one
connection, one writer at a time) or PostgreSQL (bot.storage.postgres: a pool of connections).
"""

from __future__ import annotations

import datetime as dt
import logging
import sqlite3
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Self, TypeAlias, TypeVar

from bot.errors import StorageError
from bot.storage import backend
from bot.storage.backend import Backend, Params, SyncConnection, Transaction, is_url
from bot.storage.migrations import MIGRATIONS
from bot.storage.migrations_pg import POSTGRES_MIGRATIONS
from bot.storage.sqlite import BUSY_TIMEOUT_MS, SqliteBackend

log = logging.getLogger(__name__)

__all__ = ["BUSY_TIMEOUT_MS", "Clock", "Engine", "Params", "Row", "Transaction", "timestamp", "utc_now"]

T = TypeVar("T")

# A row read by column name: the backend's row, or a JSON object when one statement reads several tables at once.
Row: TypeAlias = backend.Row | dict[str, Any]
# What time it is, as an aware datetime; tests pass their own so no test waits for time to pass.
Clock: TypeAlias = Callable[[], dt.datetime]


def utc_now() -> dt.datetime:
    """Return the current time in UTC: the database's clock unless one is injected."""
    return dt.datetime.now(dt.UTC)


def timestamp(moment: dt.datetime) -> str:
    """Return ``moment`` as the database stores times: UTC, ISO 8601 to the millisecond."""
    return moment.astimezone(dt.UTC).isoformat(timespec="milliseconds")


class Engine:
    """The progress database's connection. Open it once with ``await Database.open(path or URL)``; ``close()`` is
    idempotent."""

    def __init__(self, store: Backend, clock: Clock = utc_now, events_days: int | None = None):
        self.backend = store
        # The SQLite file (None on PostgreSQL); ``where`` names either, for messages.
        self.path = store.path if isinstance(store, SqliteBackend) else None
        self.where = store.where
        self.clock = clock
        # How long learning events are kept: None keeps them, 0 records none (bot.config: COURSEBOT_EVENTS_DAYS).
        self.events_days = events_days
        # The process whose claim an update's write must still hold (bot.updates.Inbox sets it on a shared database;
        # None: one process, every claim its own). See bot.storage.outcomes.write_outcome.
        self.claimant: str | None = None

    def _now(self) -> str:
        return timestamp(self.clock())

    @classmethod
    async def open(
        cls, target: Path | str, *, clock: Clock = utc_now, events_days: int | None = None, pool_size: int = 10
    ) -> Self:
        """Open (creating if needed) and migrate the database: an SQLite file's path, or a ``postgresql://`` URL.

        ``clock`` stamps every write; learning events are kept ``events_days`` days (None: for good);
        ``pool_size`` is how many PostgreSQL connections this process holds at most.
        """
        store: Backend
        if is_url(target):
            # Imported only when chosen: a bot on SQLite never loads psycopg.
            from bot.storage.postgres import PostgresBackend

            store = await PostgresBackend.open(str(target), pool_size=pool_size)
        else:
            store = await SqliteBackend.open(Path(target))
        db = cls(store, clock, events_days)
        try:
            await db._migrate()
        except sqlite3.DatabaseError as exc:
            await store.close()
            raise StorageError(f"the database {store.where} is unusable: {exc}") from exc
        except BaseException:
            await store.close()
            raise
        return db

    async def _migrate(self) -> None:
        migrations = MIGRATIONS if self.backend.name == "sqlite" else POSTGRES_MIGRATIONS
        version = await self.schema_version()
        if version > len(migrations):
            raise StorageError(
                f"the database {self.where} has schema version {version}, newer than this "
                f"coursebot knows ({len(migrations)}); run a newer coursebot or restore a backup"
            )
        for number in await self.backend.migrate(migrations):
            log.info("database %s migrated to schema version %d", self.where, number)

    async def close(self) -> None:
        """Close the connection; calling it again does nothing."""
        await self.backend.close()

    def _write(self, *, to_disk: bool = False) -> AbstractAsyncContextManager[Transaction]:
        """Run a block as one transaction (``to_disk``: one that survives a crash of the machine too)."""
        return self.backend.transaction(to_disk=to_disk)

    async def _transaction(self, work: Callable[[SyncConnection], T], *, to_disk: bool = False) -> T:
        """Run ``work`` as one transaction in one hop, on the database's own thread (bot.storage.backend.Backend.run).

        An update's write is several statements; run one by one, each would cost a round trip from the event loop
        (and the CPU of one there). ``work`` gets the connection, runs its statements (bound, as everywhere) and may
        raise to roll everything back. ``to_disk`` as for ``_write``.
        """
        return await self.backend.run(work, to_disk=to_disk)

    async def _write_one(self, sql: str, params: Params = ()) -> int:
        """Run one statement as its own transaction; return the rows it changed (one round trip: every tap's path)."""
        return await self.backend.write_one(sql, params)

    async def _one(self, sql: str, params: Params = ()) -> backend.Row | None:
        return await self.backend.one(sql, params)

    async def _all(self, sql: str, params: Params = ()) -> list[backend.Row]:
        return await self.backend.all(sql, params)

    async def schema_version(self) -> int:
        """Return the number of the last migration applied."""
        return await self.backend.schema_version()

    async def check_writable(self) -> None:
        """Take a write transaction and commit it (it changes nothing): raises if the database cannot be written."""
        await self.backend.check_writable()
