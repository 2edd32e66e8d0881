"""A PostgreSQL restart under the bot (bot.storage.postgres): every operation waits it out on a fresh connection and
carries on, nothing is stored twice, and only a server down past the limit fails the step, in one line.

The cluster is this module's own (tests/pg.py), so restarting it disturbs no other test's database.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator

import psycopg
import pytest

from bot.errors import StorageError
from bot.storage import postgres
from bot.storage.backend import SyncConnection
from bot.storage.db import Database
from tests.botprocess import BotProcess, bot_env
from tests.conftest import course_content, peek
from tests.journey import position, send_and_wait, tap_and_wait_edit
from tests.pg import Cluster, cluster

USER = 6101
LESSON = course_content().english.lessons[0]
SORRY = "Sorry, something went wrong"


@pytest.fixture(scope="module")
def restartable() -> Iterator[Cluster]:
    with cluster() as running:
        yield running


@pytest.fixture
def url(restartable: Cluster) -> str:
    return restartable.new_database()


def restart(server: Cluster) -> None:
    """Restart the server as an operator does: its sessions are ended, then it starts again (as tests/scaleout.py)."""
    # -l: the new server's output goes to the log, not to pg_ctl's pipe (which it would hold open for ever).
    server.pg_ctl("-m", "fast", "-l", str(server.folder / "log"), "-w", "-t", "60", "restart")


def stop(server: Cluster) -> None:
    server.pg_ctl("-m", "fast", "-w", "-t", "60", "stop")


async def _warm(db: Database) -> None:
    """Use every pool once, so each holds a connection the restart will cut."""
    await db._all("SELECT 1")
    await db.backend.run(lambda conn: conn.execute("SELECT 1").fetchone())
    async with db.learner_lock(USER):
        pass


def _insert(key: int) -> Callable[[SyncConnection], int]:
    def work(conn: SyncConnection) -> int:
        return conn.execute("INSERT INTO kv (k) VALUES (?)", (key,)).rowcount

    return work


async def _transaction(db: Database) -> int:
    async with db.backend.transaction() as conn:
        return await conn.execute("INSERT INTO kv (k) VALUES (?)", (5,))


async def _locked(db: Database) -> int:
    async with db.learner_lock(USER):
        return 1


# Each operation of the backend, as the storage calls it, and the rows of kv after it ran once.
OPERATIONS: dict[str, tuple[Callable[[Database], Awaitable[object]], list[tuple[object, ...]]]] = {
    "one": (lambda db: db._one("SELECT count(*) AS n FROM kv"), []),
    "all": (lambda db: db._all("SELECT k FROM kv"), []),
    "write_one": (lambda db: db._write_one("INSERT INTO kv (k) VALUES (?)", (3,)), [(3,)]),
    "run": (lambda db: db.backend.run(_insert(4)), [(4,)]),
    "transaction": (_transaction, [(5,)]),
    "learner_lock": (_locked, []),
}


@pytest.mark.parametrize("operation", list(OPERATIONS))
async def test_each_operation_carries_on_after_postgresql_restarts(operation, restartable, url, caplog):
    db = await Database.open(url)
    try:
        await db._write_one("CREATE TABLE kv (k INTEGER PRIMARY KEY)")
        await _warm(db)
        await asyncio.to_thread(restart, restartable)
        call, rows = OPERATIONS[operation]
        with caplog.at_level(logging.WARNING, logger=postgres.__name__):
            await call(db)
        lost = [r for r in caplog.records if r.name == postgres.__name__ and "lost the connection" in r.message]
        assert lost, "the operation met no dead connection: the test proves nothing"
        assert all(r.levelno == logging.WARNING and r.exc_info is None for r in lost)  # a line each, no traceback
        assert await peek(db, "SELECT k FROM kv") == rows  # done once
    finally:
        await db.close()


async def test_an_update_waits_while_postgresql_is_down_and_carries_on_once_it_is_back(restartable, url):
    db = await Database.open(url)
    try:
        await db._write_one("CREATE TABLE kv (k INTEGER PRIMARY KEY)")
        await _warm(db)
        await asyncio.to_thread(stop, restartable)
        try:
            write = asyncio.create_task(db.backend.run(_insert(7)))
            read = asyncio.create_task(db._one("SELECT 1 AS one"))
            # Away for seconds, as a restart of a container or a failover is, yet within RECONNECT_LIMIT_S.
            await asyncio.sleep(5.0)
            assert not write.done() and not read.done()  # waiting, not failed
        finally:
            await asyncio.to_thread(restartable.start)
        assert await asyncio.wait_for(write, 30) == 1
        assert (await asyncio.wait_for(read, 30))["one"] == 1
        assert await peek(db, "SELECT k FROM kv") == [(7,)]
    finally:
        await db.close()


async def test_a_server_down_past_the_limit_fails_the_step_in_one_line(restartable, url, monkeypatch, caplog):
    monkeypatch.setattr(postgres, "RECONNECT_LIMIT_S", 1.0)
    db = await Database.open(url)
    try:
        await _warm(db)
        await asyncio.to_thread(stop, restartable)
        try:
            with caplog.at_level(logging.WARNING, logger=postgres.__name__):
                with pytest.raises(StorageError, match=r"stayed unreachable for 1 s") as failed:
                    await db._one("SELECT 1")
                with pytest.raises(StorageError, match=r"stayed unreachable for 1 s"):
                    await db.backend.run(lambda conn: conn.execute("SELECT 1").fetchone())
        finally:
            await asyncio.to_thread(restartable.start)
        assert "\n" not in str(failed.value) and db.where in str(failed.value)
        errors = [r for r in caplog.records if r.name == postgres.__name__ and r.levelno >= logging.ERROR]
        assert len(errors) == 2 and all("gave up" in r.message and r.exc_info is None for r in errors)
        assert await db._one("SELECT 1 AS one") is not None  # and once it is back, it is used again
    finally:
        await db.close()


async def test_a_learners_lock_lost_mid_update_lets_the_update_finish(restartable, url, caplog):
    db = await Database.open(url)
    try:
        await db._write_one("CREATE TABLE kv (k INTEGER PRIMARY KEY)")
        with caplog.at_level(logging.WARNING, logger=postgres.__name__):
            async with db.learner_lock(USER):
                await asyncio.to_thread(restart, restartable)  # the lock goes with the old server
                assert await db._write_one("INSERT INTO kv (k) VALUES (?)", (1,)) == 1  # the update goes on
        said = [r.message for r in caplog.records if r.name == postgres.__name__ and r.levelno == logging.WARNING]
        assert [m for m in said if m.startswith(f"the lock of learner {USER} ended before its update did")]
        async with db.learner_lock(USER):  # and the next update takes it again
            pass
    finally:
        await db.close()


@pytest.mark.parametrize("committed", [True, False], ids=["committed unseen", "cut before its commit"])
async def test_a_write_whose_commit_lost_its_connection_is_done_once(committed, url, monkeypatch, caplog):
    # A fast shutdown may end a session just after its COMMIT, before the answer goes out. Simulated here: the COMMIT
    # runs (or not), then the connection is closed and the try fails as a lost connection does.
    db = await Database.open(url)
    runs: list[int] = []
    real = psycopg.Connection.execute

    def execute(self: psycopg.Connection, query: object, *args: object, **kwargs: object) -> object:
        if query == "COMMIT" and not cut:
            cut.append(1)
            if committed:
                real(self, query, *args, **kwargs)
            self.close()
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return real(self, query, *args, **kwargs)

    def work(conn: SyncConnection) -> str:
        runs.append(1)
        conn.execute("INSERT INTO kv (k) VALUES (?)", (7,))
        return f"run {len(runs)}"

    cut: list[int] = []
    try:
        await db._write_one("CREATE TABLE kv (k INTEGER PRIMARY KEY)")
        monkeypatch.setattr(psycopg.Connection, "execute", execute)
        with caplog.at_level(logging.WARNING, logger=postgres.__name__):
            result = await db.backend.run(work)
        assert cut == [1]
        # Committed, it is not run again (run again, its insert would fail on the key); cut before, it runs again.
        assert (result, len(runs)) == (("run 1", 1) if committed else ("run 2", 2))
        assert await peek(db, "SELECT k FROM kv") == [(7,)]
    finally:
        await db.close()


async def test_an_error_of_the_statement_itself_is_raised_at_once_not_retried(url, caplog):
    db = await Database.open(url)
    calls: list[int] = []

    def twice(conn: SyncConnection) -> None:
        calls.append(1)
        conn.execute("INSERT INTO kv (k) VALUES (1)")
        conn.execute("INSERT INTO kv (k) VALUES (1)")

    try:
        await db._write_one("CREATE TABLE kv (k INTEGER PRIMARY KEY)")
        with caplog.at_level(logging.WARNING, logger=postgres.__name__):
            with pytest.raises(StorageError, match="duplicate key") as failed:
                await db.backend.run(twice)
            assert isinstance(failed.value.__cause__, psycopg.errors.UniqueViolation)
            with pytest.raises(StorageError, match="syntax error"):
                await db._one("SELEC 1")
            with pytest.raises(StorageError, match="duplicate key"):
                async with db.backend.transaction() as conn:
                    await conn.execute("INSERT INTO kv (k) VALUES (2)")
                    await conn.execute("INSERT INTO kv (k) VALUES (2)")
        assert calls == [1]
        assert [r for r in caplog.records if r.name == postgres.__name__] == []  # no retry was even considered
        assert await peek(db, "SELECT k FROM kv") == []  # each failed transaction rolled back whole
    finally:
        await db.close()


def test_only_a_lost_connection_counts_as_lost():
    assert postgres.connection_lost(psycopg.OperationalError("server closed the connection unexpectedly"))
    assert postgres.connection_lost(psycopg.errors.AdminShutdown("terminating connection"))
    assert postgres.connection_lost(psycopg.errors.CannotConnectNow("the database system is starting up"))
    assert not postgres.connection_lost(psycopg.errors.UniqueViolation("duplicate key"))
    assert not postgres.connection_lost(psycopg.errors.SerializationFailure("could not serialize"))
    assert not postgres.connection_lost(psycopg.errors.QueryCanceled("canceling statement"))
    assert not postgres.connection_lost(psycopg.errors.SyntaxError("syntax error"))


# The bot on PostgreSQL, restarted while a learner reads.


async def test_a_learner_reading_through_postgresql_restarts_never_loses_a_step(standin, restartable, url, tmp_path):
    bot = BotProcess(bot_env(standin, tmp_path / "unused.sqlite3", COURSEBOT_DB=url), tmp_path / "bot.log")
    async with bot:
        await bot.wait_polling()
        ada = standin.learner(user_id=USER, language_code="en")
        menu = await send_and_wait(ada, "/start", timeout=30)
        message = await tap_and_wait_edit(ada, menu, "Start the course")
        total = len(LESSON.slides)
        restarts: list[asyncio.Task[None]] = []
        n = 1
        while n < total:
            if n in (2, 6):  # a restart while the next taps are handled
                restarts.append(asyncio.create_task(asyncio.to_thread(restart, restartable)))
            await ada.tap(message, "Next")
            message = await ada.wait_edit(message["message_id"], timeout=40)
            assert position(message) == (n + 1, total)
            n += 1
        await asyncio.gather(*restarts)
        await asyncio.sleep(1)  # time for the last update's mark and any late reply
        checker = await Database.open(url)
        try:
            assert await peek(checker, "SELECT count(*) FROM inbox WHERE state != 'handled'") == [(0,)]
            [(updates,)] = await peek(checker, "SELECT count(*) FROM inbox")
            assert updates == total + 1  # /start, "Start the course", and a Next per slide after the first
            slides = await peek(
                checker, f"SELECT item_id, update_id FROM events WHERE user_id = {USER} AND kind = 'slide'"
            )
            assert len(slides) == len({update for _, update in slides}) == total  # one event per slide, once each
        finally:
            await checker.close()
        await bot.stop()
    said = [m.get("text", "") for m in ada.messages] + [
        str(call.params.get("text", "")) for call in standin.calls_to("answerCallbackQuery")
    ]
    assert not [text for text in said if SORRY in text], bot.log()
    assert " ERROR " not in bot.log() and "Traceback" not in bot.log(), bot.log()
    assert "lost the connection to the database" in bot.log(), "no update met the restart: the test proves nothing"


async def test_a_bot_starting_while_postgresql_restarts_waits_for_it(url, monkeypatch, caplog):
    # A replica restarted by its supervisor at the moment PostgreSQL restarts too met "the database system is shutting
    # down" (tests/test_scaleout.py) and exited; it waits for a server that says it is restarting.
    connect = psycopg.AsyncConnection.connect
    tries: list[int] = []

    async def restarting(*args, **kwargs):
        tries.append(1)
        if len(tries) <= 2:
            raise psycopg.errors.CannotConnectNow("the database system is starting up")
        return await connect(*args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", restarting)
    db = await Database.open(url)
    try:
        assert await db._all("SELECT 1") == [(1,)]
    finally:
        await db.close()
    assert len(tries) >= 3
    assert "is restarting (the database system is starting up); waiting for it" in caplog.text


async def test_a_bot_pointed_at_no_server_says_so_at_once(monkeypatch):
    # Nothing listens there (a wrong port, say): not a restart, so no wait; one line says what is wrong.
    tries: list[int] = []
    connect = psycopg.AsyncConnection.connect

    async def counted(*args, **kwargs):
        tries.append(1)
        return await connect(*args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", counted)
    with pytest.raises(StorageError, match=r"^cannot reach the database postgresql://postgres@127\.0\.0\.1:1/x: .+"):
        await Database.open("postgresql://postgres@127.0.0.1:1/x")
    assert len(tries) == 1
