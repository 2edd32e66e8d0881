"""The PostgreSQL engine: several bot processes on one database, through a psycopg 3 connection pool.

Connections are in autocommit, so a read is one round trip and each write block is one explicit transaction.
Prepared statements are off (``prepare_threshold=None``): the pool then also works behind PgBouncer in transaction
mode. Locks are PostgreSQL's advisory locks held until the transaction ends (``pg_advisory_xact_lock``), so a lock
is never left behind by a process that died.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import psycopg
from psycopg.rows import BaseRowFactory, RowMaker
from psycopg.types.string import TextLoader
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from bot.errors import StorageError
from bot.storage.backend import MIGRATION_LOCK, Params, Row, SyncConnection, pyformat, redacted

log = logging.getLogger(__name__)

T = TypeVar("T")

# Connections per bot process for its reads and small writes: updates handled at once wait for one beyond this.
POOL_SIZE = 10
# Connections for an update's one write (Backend.run), on worker threads.
WORK_POOL_SIZE = 5
# Connections that hold learners' locks, apart from the queries' pool so holding locks can never starve the queries:
# a process handles at most this many learners' updates at once.
LOCK_POOL_SIZE = 16
# A process stopped (SIGSTOP) while it holds a learner's lock would keep that learner waiting for good; PostgreSQL
# ends a lock's session once it has been idle in its transaction this long, and the lock with it. Longer than any
# one update takes (a code run is capped well below it).
LOCK_IDLE_LIMIT_MS = 90_000
CONNECT_TIMEOUT_S = 10.0
# The schema version, as SQLite keeps it in PRAGMA user_version.
VERSION_TABLE = "coursebot_schema"


class PgRow:
    """A row read by column name or position, like sqlite3.Row."""

    __slots__ = ("_index", "_values")

    def __init__(self, index: dict[str, int], values: Sequence[Any]):
        self._index = index
        self._values = values

    def __getitem__(self, key: int | str, /) -> Any:
        return self._values[self._index[key] if isinstance(key, str) else key]

    def keys(self) -> list[str]:
        return list(self._index)

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Any:
        return iter(self._values)

    def __eq__(self, other: object) -> bool:
        return tuple(self._values) == (tuple(other) if isinstance(other, (tuple, PgRow)) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PgRow({dict(zip(self._index, self._values, strict=True))!r})"


def _rows(cursor: Any) -> RowMaker[PgRow]:
    # Any: psycopg's cursor base class is private; every cursor has the description read here.
    index = {column.name: i for i, column in enumerate(cursor.description or ())}

    def make(values: Sequence[Any]) -> PgRow:
        return PgRow(index, values)

    return make


ROWS: BaseRowFactory[PgRow] = _rows


async def _configure(conn: psycopg.AsyncConnection[Any]) -> None:
    # JSON comes back as its text, as SQLite returns it: the storage parses it itself (bot.storage.snapshots).
    conn.adapters.register_loader("json", TextLoader)
    conn.adapters.register_loader("jsonb", TextLoader)


def _configure_sync(conn: psycopg.Connection[Any]) -> None:
    conn.adapters.register_loader("json", TextLoader)
    conn.adapters.register_loader("jsonb", TextLoader)


class PostgresSyncConnection:
    """A psycopg connection as a ``Backend.run`` work function sees it: the storage's placeholders, translated."""

    def __init__(self, conn: psycopg.Connection[PgRow]):
        self._conn = conn

    def execute(self, sql: str, parameters: Any = (), /) -> psycopg.Cursor[PgRow]:
        return self._conn.execute(pyformat(sql), parameters)


class PostgresTransaction:
    """A transaction on one pooled connection (bot.storage.backend.Transaction)."""

    def __init__(self, conn: psycopg.AsyncConnection[PgRow]):
        self._conn = conn

    async def execute(self, sql: str, params: Params = ()) -> int:
        cursor = await self._conn.execute(pyformat(sql), params)
        return cursor.rowcount

    async def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        if rows:
            async with self._conn.cursor() as cursor:
                await cursor.executemany(pyformat(sql), rows)

    async def all(self, sql: str, params: Params = ()) -> list[Row]:
        cursor = await self._conn.execute(pyformat(sql), params)
        return list(await cursor.fetchall())

    async def one(self, sql: str, params: Params = ()) -> Row | None:
        cursor = await self._conn.execute(pyformat(sql), params)
        return await cursor.fetchone()

    async def lock(self, key: int) -> None:
        await self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (key,))

    async def try_lock(self, key: int) -> bool:
        cursor = await self._conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (key,))
        row = await cursor.fetchone()
        return bool(row is not None and row[0])


class PostgresBackend:
    """A PostgreSQL database behind the storage (bot.storage.backend.Backend). Open it with ``await open(url)``."""

    name = "postgresql"

    def __init__(
        self,
        pool: AsyncConnectionPool[psycopg.AsyncConnection[PgRow]],
        locks: AsyncConnectionPool[psycopg.AsyncConnection[PgRow]],
        url: str,
    ):
        self._pool = pool
        self._locks = locks
        # Connections for Backend.run's work functions, used on worker threads; opened at the first.
        self._sync: ConnectionPool[psycopg.Connection[PgRow]] | None = None

        self.url = url
        self.where = redacted(url)
        self._closed = False

    @classmethod
    async def open(cls, url: str, *, pool_size: int = POOL_SIZE, timeout: float = CONNECT_TIMEOUT_S) -> PostgresBackend:
        where = redacted(url)
        # One connection first, so an unreachable server or a wrong password says so at once, in one line.
        try:
            probe = await psycopg.AsyncConnection.connect(url, connect_timeout=max(1, int(timeout)))
        except psycopg.Error as exc:
            reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            raise StorageError(f"cannot reach the database {where}: {reason}") from exc
        await probe.close()
        pool: AsyncConnectionPool[psycopg.AsyncConnection[PgRow]] = AsyncConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={"autocommit": True, "prepare_threshold": None, "row_factory": ROWS},
            open=False,
            configure=_configure,
            timeout=timeout,
            name="coursebot",
        )
        locks: AsyncConnectionPool[psycopg.AsyncConnection[PgRow]] = AsyncConnectionPool(
            url,
            min_size=0,
            max_size=LOCK_POOL_SIZE,
            kwargs={
                "autocommit": True,
                "prepare_threshold": None,
                "row_factory": ROWS,
                "options": f"-c idle_in_transaction_session_timeout={int(LOCK_IDLE_LIMIT_MS)}",
            },
            open=False,
            timeout=3600.0,  # an update waits its turn among this process's updates, as PerLearnerOrder's do
            name="coursebot-locks",
        )
        try:
            await pool.open(wait=True, timeout=timeout)
            await locks.open()
        except (PoolTimeout, psycopg.Error) as exc:
            await pool.close()
            await locks.close()
            raise StorageError(f"cannot reach the database {where}: {exc}") from exc
        return cls(pool, locks, url)

    @asynccontextmanager
    async def learner_lock(self, key: int) -> AsyncIterator[None]:
        """Hold ``pg_advisory_xact_lock(key)`` on a connection of its own for the block: a learner's updates at other
        replicas wait for it. The lock goes with the transaction, so a replica that dies lets it go."""
        async with self._lock_connection(key) as conn:
            try:
                yield
            finally:
                try:
                    await conn.execute("COMMIT")
                except psycopg.Error as exc:
                    # The update is handled; only the lock went early (its session outlived LOCK_IDLE_LIMIT_MS).
                    log.warning("the lock of learner %s ended before its update did: %s", key, exc)

    @asynccontextmanager
    async def _lock_connection(self, key: int) -> AsyncIterator[psycopg.AsyncConnection[PgRow]]:
        try:
            async with self._locks.connection() as conn:
                await conn.execute("BEGIN")
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
                yield conn
        except psycopg.Error as exc:
            raise StorageError(f"the lock of learner {key} at {self.where} failed: {exc}") from exc

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[PgRow]]:
        try:
            async with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise StorageError(f"no connection to the database {self.where} came free: {exc}") from exc
        except psycopg.Error as exc:
            # One kind of failure for the bot to handle, whichever engine it runs on.
            raise StorageError(f"the database {self.where} failed: {exc}") from exc

    @asynccontextmanager
    async def transaction(self, *, to_disk: bool = False) -> AsyncIterator[PostgresTransaction]:
        """One transaction on one connection; every commit is on disk already (synchronous_commit is on)."""
        async with self._connection() as conn, conn.transaction():
            yield PostgresTransaction(conn)

    async def run(self, work: Callable[[SyncConnection], T], *, to_disk: bool = False) -> T:
        """Run ``work`` on a worker thread, in one transaction on a pooled connection of its own."""
        if self._sync is None:
            self._sync = ConnectionPool(
                self.url,
                min_size=1,
                max_size=WORK_POOL_SIZE,
                kwargs={"autocommit": True, "prepare_threshold": None, "row_factory": ROWS},
                open=False,
                configure=_configure_sync,
                timeout=CONNECT_TIMEOUT_S,
                name="coursebot-work",
            )
            await asyncio.to_thread(self._sync.open, True, CONNECT_TIMEOUT_S)
        return await asyncio.to_thread(self._run, self._sync, work)

    def _run(self, pool: ConnectionPool[psycopg.Connection[PgRow]], work: Callable[[SyncConnection], T]) -> T:
        try:
            with pool.connection() as conn, conn.transaction():
                return work(PostgresSyncConnection(conn))
        except PoolTimeout as exc:
            raise StorageError(f"no connection to the database {self.where} came free: {exc}") from exc
        except psycopg.Error as exc:
            raise StorageError(f"the database {self.where} failed: {exc}") from exc

    async def write_one(self, sql: str, params: Params = ()) -> int:
        async with self._connection() as conn:
            cursor = await conn.execute(pyformat(sql), params)
            return cursor.rowcount

    async def all(self, sql: str, params: Params = ()) -> list[Row]:
        async with self._connection() as conn:
            cursor = await conn.execute(pyformat(sql), params)
            return list(await cursor.fetchall())

    async def one(self, sql: str, params: Params = ()) -> Row | None:
        async with self._connection() as conn:
            cursor = await conn.execute(pyformat(sql), params)
            return await cursor.fetchone()

    async def schema_version(self) -> int:
        row = await self.one("SELECT CASE WHEN to_regclass(?) IS NULL THEN 0 ELSE -1 END AS missing", (VERSION_TABLE,))
        if row is not None and row["missing"] == 0:
            return 0
        row = await self.one("SELECT version FROM coursebot_schema")
        return int(row["version"]) if row is not None else 0

    async def check_writable(self) -> None:
        async with self.transaction() as conn:
            await conn.execute("UPDATE coursebot_schema SET version = version")

    async def migrate(self, migrations: Sequence[str]) -> list[int]:
        """Apply each missing migration in its own transaction, under an advisory lock: replicas that start
        together wait for the first, then find nothing left to do."""
        applied: list[int] = []
        while True:
            async with self._connection() as conn, conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                await conn.execute("CREATE TABLE IF NOT EXISTS coursebot_schema (version INTEGER NOT NULL)")
                cursor = await conn.execute("SELECT version FROM coursebot_schema")
                row = await cursor.fetchone()
                version = int(row[0]) if row is not None else 0
                if row is None:
                    await conn.execute("INSERT INTO coursebot_schema (version) VALUES (0)")
                if version >= len(migrations):
                    return applied
                number = version + 1
                # No parameters: the script's statements go as one simple query, inside this transaction.
                await conn.execute(migrations[number - 1].encode())
                await conn.execute("UPDATE coursebot_schema SET version = %s", (number,))
            applied.append(number)

    async def tables(self) -> list[str]:
        rows = await self.all(
            "SELECT c.relname AS name FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace"
            " WHERE c.relkind = 'r' AND n.nspname = current_schema() AND c.relname != ? ORDER BY c.oid",
            (VERSION_TABLE,),
        )
        return [row["name"] for row in rows]

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._sync is not None:
            await asyncio.to_thread(self._sync.close)
        await self._locks.close()
        await self._pool.close()
