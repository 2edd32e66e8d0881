"""The PostgreSQL engine: several bot processes on one database, through a psycopg 3 connection pool.

Connections are in autocommit, so a read is one round trip and each write block is one explicit transaction.
Prepared statements are off (``prepare_threshold=None``): the pool then also works behind PgBouncer in transaction
mode. Locks are PostgreSQL's advisory locks held until the transaction ends (``pg_advisory_xact_lock``), so a lock
is never left behind by a process that died.

A connection lost to a restart of the server (its pooled connections cut, new ones refused while it starts) is waited
out: what can be run again is, on a fresh connection, for up to RECONNECT_LIMIT_S (see ``Attempts``); only then does
the step fail with StorageError. An error of the statement itself (a constraint, the syntax, a serialization
failure) is never retried here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

import psycopg
from psycopg import sql
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
# How long a bot starting waits for a server that says it is shutting down or starting up (a restart).
STARTUP_WAIT_S = 30.0
# How long an operation waits out a lost connection before it fails (StorageError, and the learner is told the step
# was not saved). A restart of PostgreSQL (pg_ctl restart, a container restarted, a managed database's failover)
# takes a few seconds; 15 s outlasts that with room, yet stays within what a learner waits for a reply to a tap, and
# a server down for good frees the learner's lock and the update's connection instead of piling updates up behind it.
RECONNECT_LIMIT_S = 15.0
# The pause before the next attempt: the first soon (most losses are pooled connections the restart cut, and a fresh
# one works at once), then doubling up to a second, so a server still starting up is not hammered.
RETRY_FIRST_S = 0.05
RETRY_MAX_S = 1.0
# How long one try waits for a pooled connection once a loss was seen: short, so each try asks the pool again (and
# the pool starts a fresh connection attempt) rather than one try waiting out the limit on a pool that gave up.
TRY_TIMEOUT_S = 1.0
# How long the pool keeps trying to make one connection (its pauses double: 1, 2, 4, 8 s...). Left at psycopg_pool's
# five minutes, a server back after 8 s would next be tried at 15 s, past RECONNECT_LIMIT_S; short, the pool gives
# the attempt up and the next try's request starts another at once.
POOL_RECONNECT_S = 2.0
# SQLSTATEs of a session the server ended (admin_shutdown, crash_shutdown) or a connection it does not take yet
# (cannot_connect_now: starting up, shutting down); class 08 is the connection exceptions. libpq's own failures (the
# socket closed, connection refused, "the connection is lost") carry no SQLSTATE at all.
LOST_STATES = frozenset({"57P01", "57P02", "57P03"})
# A learner's lock: a transaction of its own holds it (BEGIN in the same simple query: see _lock_connection).
LOCK = "BEGIN; SELECT pg_advisory_xact_lock(%s)"
# The schema version, as SQLite keeps it in PRAGMA user_version.
VERSION_TABLE = "coursebot_schema"


def connection_lost(exc: BaseException) -> bool:
    """Return whether ``exc`` says the connection to the server is gone or not taken yet (so a fresh one may work),
    rather than that a statement failed (a constraint, the syntax, a serialization failure, a cancel)."""
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in LOST_STATES


def _reason(exc: BaseException) -> str:
    """Return the first line of what ``exc`` says (libpq adds a second: "This probably means...")."""
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


class Losses:
    """When this process last lost a connection to the database (time.monotonic()), for all its operations: while
    one is recent, a pool that hands out no connection in time is taken for a server still away, not for a busy
    pool."""

    def __init__(self) -> None:
        self.at: float | None = None

    def recent(self, now: float) -> bool:
        return self.at is not None and now - self.at < RECONNECT_LIMIT_S


class Attempts:
    """The tries of one operation while its connection is lost: when to try again, and when to give up.

    The first try is the normal path and costs nothing here. Once a try lost its connection, the next ones wait a
    little more each time (RETRY_FIRST_S doubling up to RETRY_MAX_S) and take a connection within TRY_TIMEOUT_S,
    until RECONNECT_LIMIT_S after the first loss; then the operation fails with StorageError.
    """

    def __init__(self, where: str, what: str, losses: Losses, clock: Callable[[], float] = time.monotonic):
        self.where = where
        self.what = what
        self._losses = losses
        self._clock = clock
        self._deadline: float | None = None
        self._pause = RETRY_FIRST_S
        self._short = False  # the last try waited TRY_TIMEOUT_S at most for its connection

    def timeout(self, pool: AsyncConnectionPool[Any] | ConnectionPool[Any]) -> float | None:
        """Return how long the next try may wait for a connection of ``pool`` (None: the pool's own timeout).

        Once a connection was lost lately, a try waits briefly, and a pool that hands out none in that time is taken
        for a server still away: the next try asks again, and the pool starts a fresh attempt. Not when the pool's
        every connection is in use: then the try waits its turn as ever, and a timeout says the pool is too small.
        """
        now = self._clock()
        self._short = False
        if self._deadline is None and not self._losses.recent(now):
            return None
        stats = pool.get_stats()  # no I/O: the pool's counts
        if stats["pool_size"] >= stats["pool_max"] and stats["pool_available"] == 0:
            return None
        self._short = True
        left = RECONNECT_LIMIT_S if self._deadline is None else self._deadline - now
        return min(TRY_TIMEOUT_S, max(0.1, left))

    def failed(self, exc: BaseException) -> float:
        """Note a try's failure; return how long to wait before the next, or raise StorageError (in one line) when
        ``exc`` is not a lost connection or the connection stayed lost past RECONNECT_LIMIT_S."""
        now = self._clock()
        lost = connection_lost(exc) or (isinstance(exc, PoolTimeout) and self._short)
        if not lost:
            if isinstance(exc, PoolTimeout):
                raise StorageError(f"no connection to the database {self.where} came free: {exc}") from exc
            # One kind of failure for the bot to handle, whichever engine it runs on.
            raise StorageError(f"the database {self.where} failed: {exc}") from exc
        self._losses.at = now
        first = self._deadline is None
        if self._deadline is None:
            self._deadline = now + RECONNECT_LIMIT_S
        if now >= self._deadline:
            log.error(
                "gave up %s: the database %s stayed unreachable for %.0f s (%s)",
                self.what,
                self.where,
                RECONNECT_LIMIT_S,
                _reason(exc),
            )
            raise StorageError(
                f"the database {self.where} stayed unreachable for {RECONNECT_LIMIT_S:.0f} s: {_reason(exc)}"
            ) from exc
        # One line per operation that lost its connection, at its first loss: a server away for seconds would
        # otherwise log a line per try of every update waiting.
        if first:
            log.warning(
                "lost the connection to the database %s (%s); %s waits for a fresh one",
                self.where,
                _reason(exc),
                self.what,
            )
        else:
            log.debug("%s still has no connection to the database %s (%s)", self.what, self.where, _reason(exc))
        pause = min(self._pause, self._deadline - now)
        self._pause = min(self._pause * 2, RETRY_MAX_S)
        return pause


@dataclass
class _Unsure(Generic[T]):
    """A ``run`` whose COMMIT lost its connection: committed or not, the server knows (pg_xact_status of its id)."""

    xid: str | None = None
    result: T | None = None


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
        # When each pool's idle connections were last checked after a loss (time.monotonic(), by pool name).
        self._checked: dict[str, float] = {}
        self._losses = Losses()

    @classmethod
    async def open(cls, url: str, *, pool_size: int = POOL_SIZE, timeout: float = CONNECT_TIMEOUT_S) -> PostgresBackend:
        where = redacted(url)
        # One connection first, so an unreachable server or a wrong password says so at once, in one line. A
        # server restarting (shutting down, starting up) is waited for: replicas restarted by their supervisor
        # while PostgreSQL restarts too would otherwise exit, and come back only at the supervisor's next try.
        waited_since = time.monotonic()
        while True:
            try:
                probe = await psycopg.AsyncConnection.connect(url, connect_timeout=max(1, int(timeout)))
                break
            except psycopg.Error as exc:
                restarting = isinstance(exc, psycopg.OperationalError) and exc.sqlstate in LOST_STATES
                if restarting and time.monotonic() - waited_since < STARTUP_WAIT_S:
                    log.warning("the database %s is restarting (%s); waiting for it", where, _reason(exc))
                    await asyncio.sleep(0.5)
                    continue
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
            reconnect_timeout=POOL_RECONNECT_S,
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
            reconnect_timeout=POOL_RECONNECT_S,
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
    async def learner_lock(
        self, key: int, read: tuple[str, tuple[int, ...]] | None = None
    ) -> AsyncIterator[list[Row] | None]:
        """Hold ``pg_advisory_xact_lock(key)`` on a connection of its own for the block: a learner's updates at other
        replicas wait for it. The lock goes with the transaction, so a replica that dies lets it go. ``read`` is run
        on that connection once the lock is held, in the same round trip; its rows are yielded (None without)."""
        async with self._lock_connection(key, read) as (conn, rows):
            try:
                yield rows
            finally:
                try:
                    await conn.execute("COMMIT")
                except psycopg.Error as exc:
                    # The update is handled; only the lock went early: its session outlived LOCK_IDLE_LIMIT_MS, or
                    # the server restarted under it. Another replica may have taken the learner's next update
                    # meanwhile; this one's write was checked against its inbox claim all the same
                    # (bot.storage.outcomes.STILL_CLAIMED), so nothing is stored twice.
                    log.warning("the lock of learner %s ended before its update did: %s", key, _reason(exc))

    @asynccontextmanager
    async def _lock_connection(
        self, key: int, read: tuple[str, tuple[int, ...]] | None
    ) -> AsyncIterator[tuple[psycopg.AsyncConnection[PgRow], list[Row] | None]]:
        """Take the learner's lock on a connection of the locks' pool, and run ``read`` after it; a lost connection
        (BEGIN, the lock or the read failed on it) is replaced by another, as ``Attempts`` allows."""
        # BEGIN, the lock and the read go as one simple query: one round trip where each would take one. Several
        # statements in one message need the simple query protocol, which takes no parameters, so psycopg binds the
        # values (integers: a user id, update ids) on this side (a client-side binding cursor). Each statement has a
        # snapshot of its own (READ COMMITTED), taken as it starts: the read sees whatever committed before the lock
        # was granted, as a query sent after it would.
        query = sql.SQL("; ").join([sql.SQL(LOCK), sql.SQL(pyformat(read[0]))]) if read is not None else sql.SQL(LOCK)
        values = (key, *read[1]) if read is not None else (key,)

        async def take(timeout: float | None) -> tuple[psycopg.AsyncConnection[PgRow], list[Row] | None]:
            conn = await self._locks.getconn(timeout)
            try:
                async with psycopg.AsyncClientCursor(conn) as cursor:
                    await cursor.execute(query, values)
                    if read is None:
                        return conn, None
                    cursor.nextset()  # the lock's
                    cursor.nextset()  # the read's
                    return conn, list(await cursor.fetchall())
            except BaseException:
                await self._locks.putconn(conn)
                raise

        conn, rows = await self._retrying(self._locks, f"the lock of learner {key}", take)
        try:
            yield conn, rows
        finally:
            await self._locks.putconn(conn)

    async def _retrying(
        self,
        pool: AsyncConnectionPool[psycopg.AsyncConnection[PgRow]],
        what: str,
        attempt: Callable[[float | None], Awaitable[T]],
    ) -> T:
        """Return what ``attempt`` (given how long it may wait for a pooled connection) returns, trying again on a
        fresh connection while the connection is lost (see Attempts); anything else raises at once."""
        attempts = Attempts(self.where, what, self._losses)
        while True:
            try:
                return await attempt(attempts.timeout(pool))
            except (psycopg.Error, PoolTimeout) as exc:
                pause = attempts.failed(exc)
            await self._check(pool)
            await asyncio.sleep(pause)

    async def _check(self, pool: AsyncConnectionPool[Any]) -> None:
        if self._check_due(pool.name):
            await pool.check()

    def _check_due(self, pool: str) -> bool:
        """Return whether a pool that lost a connection should test its idle ones now (and note that it does).

        psycopg_pool's ``check()`` replaces the broken ones, so the updates that come next get live connections
        instead of each finding a dead one: a round trip per idle connection, after a loss only, at most once per
        RETRY_MAX_S whoever else lost one meanwhile.
        """
        now = time.monotonic()
        if self._checked.get(pool, now - RETRY_MAX_S) > now - RETRY_MAX_S:
            return False
        self._checked[pool] = now
        return True

    async def _begin(self, timeout: float | None) -> psycopg.AsyncConnection[PgRow]:
        """Take a pooled connection and BEGIN on it. BEGIN is the round trip that proves the connection alive
        before a block runs on it, at no cost: the block needs it anyway."""
        conn = await self._pool.getconn(timeout)
        try:
            await conn.execute("BEGIN")
        except BaseException:
            await self._pool.putconn(conn)
            raise
        return conn

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
        """One transaction on one connection; every commit is on disk already (synchronous_commit is on).

        Its BEGIN is retried on a fresh connection while the connection is lost, so the block starts on a live one
        (the BEGIN is the check: a connection the restart cut fails it, at no extra round trip). The block itself is
        not run again (it is the caller's code, awaiting in between): a connection lost while it runs (PostgreSQL
        restarted within those milliseconds) still fails it with StorageError, and what it did is rolled back with
        the session. Lost at its very COMMIT, it may have committed unseen; that too raises, as before this retry.
        """
        conn = await self._retrying(self._pool, "a transaction", self._begin)
        try:
            try:
                yield PostgresTransaction(conn)
            except BaseException:
                if not conn.broken:
                    with contextlib.suppress(psycopg.Error):  # what failed is raised; the pool drops a bad connection
                        await conn.execute("ROLLBACK")
                raise
            await conn.execute("COMMIT")
        except psycopg.Error as exc:
            raise StorageError(f"the database {self.where} failed: {exc}") from exc
        finally:
            await self._pool.putconn(conn)

    async def run(self, work: Callable[[SyncConnection], T], *, to_disk: bool = False) -> T:
        """Run ``work`` on a worker thread, in one transaction on a pooled connection of its own.

        A lost connection runs ``work`` again on a fresh one (see ``_run``): every work function is a transaction
        that either committed or left nothing, and may be run again (it starts afresh: bot.storage.outcomes).
        """
        if self._sync is None:
            self._sync = ConnectionPool(
                self.url,
                min_size=1,
                max_size=WORK_POOL_SIZE,
                kwargs={"autocommit": True, "prepare_threshold": None, "row_factory": ROWS},
                open=False,
                configure=_configure_sync,
                timeout=CONNECT_TIMEOUT_S,
                reconnect_timeout=POOL_RECONNECT_S,
                name="coursebot-work",
            )
            await asyncio.to_thread(self._sync.open, True, CONNECT_TIMEOUT_S)
        return await asyncio.to_thread(self._run, self._sync, work)

    def _run(self, pool: ConnectionPool[psycopg.Connection[PgRow]], work: Callable[[SyncConnection], T]) -> T:
        # On the worker thread: its pauses block only it.
        attempts = Attempts(self.where, "a write transaction", self._losses)
        unsure: _Unsure[T] = _Unsure()
        while True:
            try:
                return self._run_once(pool, work, attempts.timeout(pool), unsure)
            except (psycopg.Error, PoolTimeout) as exc:
                pause = attempts.failed(exc)
            if self._check_due(pool.name):
                pool.check()
            time.sleep(pause)

    def _run_once(
        self,
        pool: ConnectionPool[psycopg.Connection[PgRow]],
        work: Callable[[SyncConnection], T],
        timeout: float | None,
        unsure: _Unsure[T],
    ) -> T:
        """Run ``work`` once, in a transaction of its own, unless the try before committed it already.

        A connection lost before the COMMIT left nothing behind: ``work`` runs again. One lost during the COMMIT
        leaves it unknown whether it committed (PostgreSQL shutting down may end the session after the commit, before
        saying so), so the transaction's id is read with its BEGIN (one query, no extra round trip) and the server
        asked, on the next connection, how that transaction ended. Run again blindly, the update's write would be a
        no-op on the tables (its events and attempts are keyed by the update, its places set, not added to:
        bot.storage.outcomes), but it would report its own drill attempt or answer as "changed meanwhile" and
        accept_updates its own claim as a redelivery; so a committed try returns what it returned.
        """
        with pool.connection(timeout) as conn:
            if unsure.xid is not None:
                row = conn.execute("SELECT pg_xact_status(CAST(%s AS xid8))", (unsure.xid,)).fetchone()
                if row is not None and row[0] == "committed":
                    return cast(T, unsure.result)  # set with the xid, by the try that committed
                # Aborted, or still in progress (a cut network, the old session alive): run again; the keyed write
                # of an update stores nothing twice even then.
                unsure.xid = None
            # One simple query, as psycopg's own BEGIN is: pg_current_xact_id (PostgreSQL 13+) names the transaction.
            cursor = conn.execute("BEGIN; SELECT CAST(pg_current_xact_id() AS text)")
            cursor.nextset()
            begun = cursor.fetchone()
            try:
                result = work(PostgresSyncConnection(conn))
            except BaseException:
                if not conn.broken:
                    with contextlib.suppress(psycopg.Error):  # what failed is raised; the pool drops a bad connection
                        conn.execute("ROLLBACK")
                raise
            unsure.xid, unsure.result = (begun[0] if begun is not None else None), result
            conn.execute("COMMIT")
            unsure.xid = None
            return result

    async def write_one(self, sql: str, params: Params = ()) -> int:
        """Run one statement in autocommit; retried while the connection is lost. Every such statement sets values or
        upserts (never adds to a count), so one that committed but whose answer was lost leaves the same rows when
        run again; its row count may then read 0."""

        async def attempt(timeout: float | None) -> int:
            async with self._pool.connection(timeout) as conn:
                cursor = await conn.execute(pyformat(sql), params)
                return cursor.rowcount

        return await self._retrying(self._pool, "a write", attempt)

    async def all(self, sql: str, params: Params = ()) -> list[Row]:
        """Run one statement in autocommit and return its rows; retried while the connection is lost, as ``one``."""

        async def attempt(timeout: float | None) -> list[Row]:
            async with self._pool.connection(timeout) as conn:
                cursor = await conn.execute(pyformat(sql), params)
                return list(await cursor.fetchall())

        return await self._retrying(self._pool, "a read", attempt)

    async def one(self, sql: str, params: Params = ()) -> Row | None:
        """Run one statement in autocommit and return its first row; retried while the connection is lost. Most are
        reads; the one write (bot.storage.sending's slot, an upsert RETURNING) run again after its answer was lost
        takes a second slot: the sends are paced one slot slower, once."""

        async def attempt(timeout: float | None) -> Row | None:
            async with self._pool.connection(timeout) as conn:
                cursor = await conn.execute(pyformat(sql), params)
                return await cursor.fetchone()

        return await self._retrying(self._pool, "a read", attempt)

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
