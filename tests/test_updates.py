"""Updates on disk before Telegram is told they arrived, handled once, in order; what a crash left, handled at start.

The bot runs against the stand-in, in this process or (for kill -9) as `python -m bot run`; the inbox is a real
SQLite file.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from telegram import Bot, Update

from bot import updates
from bot.app import LONG_POLL_SECONDS
from bot.errors import StorageError
from bot.storage.db import Database
from bot.storage.migrations import MIGRATIONS
from bot.updates import LEASE, MAX_CRASHES, REMEMBER_HANDLED, Inbox, Polling
from tests.botprocess import BotProcess, RunnerProcess, bot_env, wait_until
from tests.conftest import course_content, running
from tests.journey import (
    answer_quiz,
    correct_option,
    data_button,
    drill_move,
    read_slides,
    send_and_wait,
    solve_drill,
    solve_drills,
    tap_and_wait_edit,
    tap_and_wait_message,
    tap_data_and_wait_edit,
)

COURSE = course_content().english
T0 = dt.datetime(2030, 5, 1, 12, 0, tzinfo=dt.UTC)


def start(n: int) -> dt.datetime:
    """The time of the ``n``th start after T0, each after the last one's claims lapsed (on PostgreSQL, a start
    takes only updates nobody holds: bot.updates.LEASE)."""
    return T0 + n * dt.timedelta(seconds=LEASE + 1)


def die_at(bot, point: str) -> None:
    """Make the bot die at fault point ``point`` (bot.faults), once: the update under way is left pending."""

    def hook(reached: str) -> None:
        if reached == point:
            bot.app.bot_data.services.faults.hook = None
            raise asyncio.CancelledError

    bot.app.bot_data.services.faults.hook = hook


def inbox_rows(path: Path) -> dict[int, sqlite3.Row]:
    """Return the inbox by update id: state, payload, replays, alone, crashes."""
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute("SELECT * FROM inbox").fetchall()
    conn.close()
    return {row["update_id"]: row for row in rows}


def state(row: sqlite3.Row) -> tuple[str, str | None]:
    return row["state"], row["payload"]


async def all_handled(path: Path) -> None:
    """Wait until every update so far is handled: a reply can reach the learner before its update is marked."""
    await wait_until(
        lambda: all(row["state"] == "handled" for row in inbox_rows(path).values()), "every update so far is handled"
    )


def update_json(update_id: int, text: str = "/start") -> str:
    return json.dumps(
        {
            "update_id": update_id,
            "message": {
                "message_id": update_id,
                "date": 0,
                "chat": {"id": 7, "type": "private"},
                "from": {"id": 7, "is_bot": False, "first_name": "Ada"},
                "text": text,
            },
        }
    )


@pytest.fixture
async def db(store: Path | str):
    """The database, once on each engine (tests/conftest.py: store)."""
    database = await Database.open(store)
    yield database
    await database.close()


async def inbox_in(db: Database) -> dict[int, Any]:
    """Return the inbox by update id, read through the database's own engine."""
    return {row["update_id"]: row for row in await db._all("SELECT * FROM inbox")}


async def _confirm(standin, up_to: int) -> None:
    """Do what the bot's next getUpdates does: tell the stand-in every update below ``up_to`` arrived."""
    async with Bot(standin.token, base_url=standin.base_url) as bot:
        await bot.get_updates(offset=up_to, timeout=0)


async def _store_pending(db_path: Path, standin, update_ids: list[int]) -> None:
    """Leave the database as a crash would: these updates stored, none handled."""
    database = await Database.open(db_path)
    try:
        await database.accept_updates([(i, json.dumps(standin.updates.history[i])) for i in update_ids], T0)
    finally:
        await database.close()


# What a crash leaves behind.


async def test_an_update_telegram_was_told_of_is_handled_after_kill_9(standin, tmp_path):
    # The bot's reply is held up by a 429 (it waits 5 s), so the update is confirmed but not handled when it dies.
    db_path = tmp_path / "coursebot.sqlite3"
    ada = standin.learner(user_id=4101)
    async with BotProcess(bot_env(standin, db_path), tmp_path / "bot.log") as bot:
        await send_and_wait(ada, "/start", timeout=30)
        await all_handled(db_path)  # else a kill replays /start too, and its welcome comes again
        standin.fail_next("sendMessage", status=429, retry_after=5)
        since = ada.cursor()
        update_id = ada.send_nowait("/lessons")
        await standin.wait_call("sendMessage", lambda call: call.error_code == 429, timeout=10)
        # The next getUpdates confirms it: Telegram would never send it again.
        await wait_until(lambda: standin.updates.pending_count == 0, "the update is confirmed")
        await bot.kill()
        assert not ada.messages[since:], "the bot answered before it was killed: the test proves nothing"
        await bot.start()
        menu = await ada.wait_message(since=since, timeout=30)
        assert COURSE.title in menu["text"] and "Welcome" not in menu["text"]
        await standin.settle()
        assert len(ada.messages[since:]) == 1
        assert await bot.stop() == 0, bot.log()
    assert state(inbox_rows(db_path)[update_id]) == ("handled", None)


@pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="the code runs in the runner's sandbox, which needs bubblewrap"
)
async def test_code_sent_just_before_kill_9_still_gets_its_output(standin, tmp_path):
    # The run goes on in a task after its handler returned: the update is handled only once the output is sent.
    db_path = tmp_path / "coursebot.sqlite3"
    ada = standin.learner(user_id=4107)
    async with RunnerProcess(tmp_path / "runner.sock", tmp_path / "runner.log") as runner:
        env = bot_env(standin, db_path, COURSEBOT_RUNNER_URL=runner.url)
        async with BotProcess(env, tmp_path / "bot.log") as bot:
            await send_and_wait(ada, "/start", timeout=30)
            await all_handled(db_path)  # else a kill replays /start too, and its welcome comes again
            since = ada.cursor()
            update_id = ada.send_nowait("/run import time\ntime.sleep(3)\nprint('slept well')")
            await standin.wait_call("sendChatAction", timeout=10)  # the run has begun
            await wait_until(lambda: standin.updates.pending_count == 0, "the update is confirmed")
            await bot.kill()
            assert not ada.messages[since:], "the output came before the bot was killed: the test proves nothing"
            await bot.start()
            output = await ada.wait_message(lambda m: "slept well" in m.get("text", ""), since=since, timeout=60)
            await standin.settle()
            assert [m["message_id"] for m in ada.messages[since:]] == [output["message_id"]]
            assert await bot.stop() == 0, bot.log()
    assert inbox_rows(db_path)[update_id]["state"] == "handled"


async def test_updates_a_crash_left_unhandled_are_handled_at_start_once_and_in_order(config, standin):
    ada = standin.learner(user_id=4102)
    first = ada.send_nowait("/start")
    second = ada.send_nowait("/lessons")
    await _store_pending(config.db_path, standin, [first, second])
    await _confirm(standin, second + 1)
    third = ada.send_nowait("/progress")  # arrives after the restart, through polling
    async with running(config):
        await standin.settle()
    texts = [m["text"] for m in ada.messages]
    assert len(texts) == 3, texts
    assert texts[0].startswith("Welcome")  # /start
    assert texts[1].startswith(COURSE.title)  # /lessons
    assert COURSE.title not in texts[2]  # /progress
    assert {i: row["state"] for i, row in inbox_rows(config.db_path).items()} == {
        first: "handled",
        second: "handled",
        third: "handled",
    }


async def test_a_redelivery_of_an_update_already_stored_is_not_handled_twice(config, standin):
    # The crash came after the update was stored but before the next getUpdates confirmed it: Telegram sends it again.
    ada = standin.learner(user_id=4103)
    sent = ada.send_nowait("/start")
    await _store_pending(config.db_path, standin, [sent])
    async with running(config):
        await standin.settle()
    assert len(ada.messages) == 1
    assert inbox_rows(config.db_path)[sent]["state"] == "handled"


async def test_an_update_the_bot_died_handling_alone_again_is_given_up_and_the_rest_go_on(config, standin, caplog):
    ada = standin.learner(user_id=4104)
    poison = ada.send_nowait("/lessons")
    after = ada.send_nowait("/start")
    await _store_pending(config.db_path, standin, [poison, after])
    await _confirm(standin, after + 1)
    # What a start leaves when the bot dies while it handles the update alone, one crash short of the limit.
    with sqlite3.connect(config.db_path) as conn:
        conn.execute(
            "UPDATE inbox SET replays = 2, alone = 1, crashes = ? WHERE update_id = ?", (MAX_CRASHES - 1, poison)
        )
    conn.close()
    with caplog.at_level(logging.ERROR, logger="bot.updates"):
        async with running(config):
            await standin.settle()
    assert [m["text"][:8] for m in ada.messages] == ["Welcome!"]
    rows = inbox_rows(config.db_path)
    assert state(rows[poison]) == ("abandoned", None)
    assert rows[after]["state"] == "handled"
    assert f"update {poison} was given up" in caplog.text


async def test_an_update_that_cannot_be_read_back_is_given_up_and_the_rest_go_on(config, standin, caplog):
    # E.g. stored before an upgrade of PTB that requires a field this update lacks.
    ada = standin.learner(user_id=4109)
    unreadable = ada.send_nowait("/lessons")
    after = ada.send_nowait("/start")
    await _store_pending(config.db_path, standin, [unreadable, after])
    await _confirm(standin, after + 1)
    broken = json.dumps({"update_id": unreadable, "poll_answer": {"poll_id": "p1", "option_ids": [0]}})
    with sqlite3.connect(config.db_path) as conn:
        conn.execute("UPDATE inbox SET payload = ? WHERE update_id = ?", (broken, unreadable))
    conn.close()
    with caplog.at_level(logging.ERROR, logger="bot.updates"):
        async with running(config):
            await standin.settle()
    assert [m["text"][:8] for m in ada.messages] == ["Welcome!"]
    rows = inbox_rows(config.db_path)
    assert state(rows[unreadable]) == ("abandoned", None)
    assert rows[after]["state"] == "handled"
    assert f"update {unreadable} was given up: it cannot be read back" in caplog.text


async def test_crashes_while_many_updates_are_under_way_are_blamed_on_none(config, standin):
    # Pending after many starts, but never while handled alone: kills from outside, not this update's doing.
    ada = standin.learner(user_id=4108)
    sent = ada.send_nowait("/start")
    await _store_pending(config.db_path, standin, [sent])
    await _confirm(standin, sent + 1)
    with sqlite3.connect(config.db_path) as conn:
        conn.execute("UPDATE inbox SET replays = 10, crashes = ? WHERE update_id = ?", (MAX_CRASHES - 1, sent))
    conn.close()
    async with running(config):
        await standin.settle()
    assert [m["text"][:8] for m in ada.messages] == ["Welcome!"]
    assert inbox_rows(config.db_path)[sent]["state"] == "handled"


async def test_handled_updates_keep_their_id_but_not_their_text(bot, standin, config):
    ada = standin.learner(user_id=4105)
    sent = ada.send_nowait("/run print('my secret code')")
    await standin.settle()
    assert state(inbox_rows(config.db_path)[sent]) == ("handled", None)
    with sqlite3.connect(config.db_path) as conn:
        dump = "\n".join(conn.iterdump())
    conn.close()
    assert "my secret code" not in dump


# The inbox, alone.


def _update(update_id: int) -> Update:
    return Update.de_json(json.loads(update_json(update_id)), None)


async def test_accept_returns_only_updates_not_stored_before_in_their_order(db):
    inbox = Inbox(db, clock=lambda: T0)
    assert [u.update_id for u in await inbox.accept([_update(3), _update(1), _update(2)])] == [3, 1, 2]
    assert [u.update_id for u in await inbox.accept([_update(2), _update(4)])] == [4]


async def test_an_update_is_handled_when_its_last_piece_of_work_ends(db):
    inbox = Inbox(db, clock=lambda: T0)
    (update,) = await inbox.accept([_update(10)])
    assert inbox.begin(update)  # its handler
    assert inbox.begin(update)  # a task the handler started, e.g. a practice run
    inbox.end(update, completed=True)
    await inbox.flush()
    assert (await inbox_in(db))[10]["state"] == "pending"
    inbox.end(update, completed=True)
    await inbox.flush()
    assert state((await inbox_in(db))[10]) == ("handled", None)


async def test_marks_that_fail_while_the_database_is_away_are_written_once_it_is_back(db, monkeypatch):
    # On a shared database this process keeps renewing its claim on the update, so no other replica would ever take
    # it over: dropped, the mark would leave it pending for as long as this process lives (PostgreSQL restarting).
    monkeypatch.setattr(updates, "MARK_RETRY_S", 0.01)
    real = db.updates_handled
    failures = [StorageError("the database postgresql://... failed: server closed the connection")] * 2

    async def flaky(update_ids, now, **owner):
        if failures:
            raise failures.pop()
        await real(update_ids, now, **owner)

    monkeypatch.setattr(db, "updates_handled", flaky)
    inbox = Inbox(db, clock=lambda: T0)
    (update,) = await inbox.accept([_update(12)])
    inbox.begin(update)
    inbox.end(update, completed=True)
    await inbox.flush()
    assert failures == [] and state((await inbox_in(db))[12]) == ("handled", None)


async def test_cancelled_work_leaves_its_update_to_the_next_start(db):
    inbox = Inbox(db, clock=lambda: T0)
    (update,) = await inbox.accept([_update(11)])
    inbox.begin(update)
    inbox.begin(update)
    inbox.end(update, completed=False)
    inbox.end(update, completed=True)
    await inbox.flush()
    assert (await inbox_in(db))[11]["state"] == "pending"
    queue: asyncio.Queue[object] = asyncio.Queue()
    assert await Inbox(db, clock=lambda: start(1)).replay(Bot("1:x"), queue) == 1
    assert queue.get_nowait().update_id == 11


async def test_work_for_an_update_that_did_not_come_through_the_inbox_is_not_counted(db):
    inbox = Inbox(db, clock=lambda: T0)
    assert not inbox.begin(_update(12))
    assert not inbox.begin(object())


async def test_handled_ids_are_forgotten_after_two_days_but_pending_updates_never(db):
    day = dt.timedelta(days=1)
    await Inbox(db, clock=lambda: T0).accept([_update(1), _update(2)])
    await db.updates_handled([1], T0)
    later = Inbox(db, clock=lambda: T0 + REMEMBER_HANDLED + day)
    await later.accept([_update(3)])
    assert sorted(await inbox_in(db)) == [2, 3]


async def test_forgetting_waits_an_hour_between_runs(db, monkeypatch):
    now = [T0]
    inbox = Inbox(db, clock=lambda: now[0])
    calls = []
    forget = db.forget_updates

    async def counted(before):
        calls.append(before)
        return await forget(before)

    monkeypatch.setattr(db, "forget_updates", counted)
    for update_id, minutes in ((1, 0), (2, 30), (3, 59), (4, 60), (5, 61)):
        now[0] = T0 + dt.timedelta(minutes=minutes)
        await inbox.accept([_update(update_id)])
    assert len(calls) == 2


async def test_an_update_pending_again_after_a_replay_is_handled_alone_and_watched(db):
    await Inbox(db, clock=lambda: T0).accept([_update(4), _update(5), _update(6)])
    await db.updates_handled([4], T0)
    # Handed over together at the first start: nothing is known against them. The bot dies before handling them.
    assert await Inbox(db, clock=lambda: start(1)).replay(Bot("1:x"), asyncio.Queue()) == 2
    inbox = Inbox(db, clock=lambda: start(2))
    queue: asyncio.Queue[Update] = asyncio.Queue()
    replaying = asyncio.create_task(inbox.replay(Bot("1:x"), queue))
    five = await asyncio.wait_for(queue.get(), 5)
    assert five.update_id == 5 and queue.empty()  # alone
    assert (await inbox_in(db))[5]["alone"] == 1  # a crash now is blamed on it
    inbox.begin(five)
    inbox.end(five, completed=True)
    six = await asyncio.wait_for(queue.get(), 5)
    assert six.update_id == 6
    assert (await inbox_in(db))[5]["state"] == "handled"
    inbox.begin(six)
    inbox.end(six, completed=True)
    assert await replaying == 2
    rows = await inbox_in(db)
    assert [(rows[i]["replays"], rows[i]["crashes"]) for i in (5, 6)] == [(2, 0), (2, 0)]


async def test_a_suspect_that_outlives_the_watch_is_not_blamed_for_what_comes_after(db):
    await Inbox(db, clock=lambda: T0).accept([_update(7)])
    for n in (1, 2):
        await Inbox(db, clock=lambda n=n: start(n), watch_alone=0.05).replay(Bot("1:x"), asyncio.Queue())
    row = (await inbox_in(db))[7]
    assert (row["state"], row["replays"], row["alone"], row["crashes"]) == ("pending", 2, 0, 0)


async def test_a_crash_while_an_update_is_handled_alone_counts_against_it(db):
    await Inbox(db, clock=lambda: T0).accept([_update(8)])
    for crash in range(1, MAX_CRASHES + 1):
        await db.handling_alone(8, True)  # the bot died while it was alone
        handed = await Inbox(db, clock=Clock(crash * (LEASE + 1)), watch_alone=0.05).replay(Bot("1:x"), asyncio.Queue())
        assert handed == (1 if crash < MAX_CRASHES else 0)
    assert state((await inbox_in(db))[8]) == ("abandoned", None)


class Clock:
    """A clock a test moves by hand (seconds after T0)."""

    def __init__(self, seconds: float = 0.0):
        self.seconds = seconds

    def __call__(self) -> dt.datetime:
        return T0 + dt.timedelta(seconds=self.seconds)


async def test_a_claim_keeps_others_off_an_update_until_its_lease_runs_out(db):
    # Replica A takes update 30 and dies handling it; B starts a third of a lease later on the same database.
    a_clock, b_clock = Clock(0), Clock(LEASE / 3)
    await Inbox(db, clock=a_clock).accept([_update(30)])
    b = Inbox(db, clock=b_clock)
    queue: asyncio.Queue[Update] = asyncio.Queue()
    handed = await b.replay(Bot("1:x"), queue)
    if db.backend.name == "sqlite":
        # One process per file: A's claim is a dead process's, so the start takes it at once, as it always did.
        assert handed == 1 and queue.get_nowait().update_id == 30
        return
    assert handed == 0 and queue.empty()  # A's claim is live: B leaves it alone
    assert (await inbox_in(db))[30]["replays"] == 0
    b_clock.seconds = LEASE - 1
    assert await b.keep_once(Bot("1:x"), queue) == 0
    b_clock.seconds = LEASE + 1  # A's lease ran out: B takes the update over
    assert await b.keep_once(Bot("1:x"), queue) == 1
    assert queue.get_nowait().update_id == 30
    row = (await inbox_in(db))[30]
    assert (row["owner"], row["replays"]) == (b.owner, 1)
    assert await b.keep_once(Bot("1:x"), queue) == 0  # B's own claim: never taken twice
    assert queue.empty()


async def test_a_live_process_renews_its_claims_so_nobody_takes_them(db):
    if db.backend.name == "sqlite":
        pytest.skip("one process per SQLite file: no other process could take a claim over")
    a_clock, b_clock = Clock(0), Clock(0)
    a = Inbox(db, clock=a_clock)
    await a.accept([_update(31)])
    a_clock.seconds = LEASE * 2 / 3  # A renews while it handles 31: its lease now runs to 5/3 of a lease
    await a.keep_once(Bot("1:x"), asyncio.Queue())
    b = Inbox(db, clock=b_clock)
    queue: asyncio.Queue[Update] = asyncio.Queue()
    b_clock.seconds = LEASE + 1  # past the first lease, not the renewed one
    assert await b.keep_once(Bot("1:x"), queue) == 0
    b_clock.seconds = LEASE * 5 / 3 + 1
    assert await b.keep_once(Bot("1:x"), queue) == 1


async def test_renewing_claims_skips_a_row_another_transaction_holds_instead_of_waiting_for_it(pg_url):
    # Waiting, the renewal locked its rows in another order than a mark or a takeover under way, and the two
    # deadlocked: PostgreSQL failed one of them, and a live owner's claims could lapse.
    db, other = await Database.open(pg_url), await Database.open(pg_url)
    try:
        inbox = Inbox(db, clock=Clock(0))
        await inbox.accept([_update(i) for i in (61, 62, 63)])
        async with other.backend.transaction() as holding:
            await holding.execute("UPDATE inbox SET handled_at = 'x' WHERE update_id = ?", (62,))
            renewed = await asyncio.wait_for(db.renew_claims(inbox.owner, T0 + dt.timedelta(hours=1)), 10)
        assert renewed == 2
    finally:
        await db.close()
        await other.close()


async def test_two_processes_taking_over_at_once_take_each_update_once(pg_url):
    first, second = await Database.open(pg_url), await Database.open(pg_url)
    try:
        await Inbox(first, clock=Clock(0)).accept([_update(i) for i in range(40, 60)])
        takers = [Inbox(db, clock=Clock(LEASE + 1)) for db in (first, second)]
        queues: list[asyncio.Queue[Update]] = [asyncio.Queue(), asyncio.Queue()]
        counts = await asyncio.gather(*(t.keep_once(Bot("1:x"), q) for t, q in zip(takers, queues, strict=True)))
        assert sum(counts) == 20
        taken = [[q.get_nowait().update_id for _ in range(q.qsize())] for q in queues]
        assert sorted(taken[0] + taken[1]) == list(range(40, 60))
    finally:
        await first.close()
        await second.close()


async def test_the_stored_update_reads_back_as_telegram_sent_it(db):
    raw = {
        "update_id": 20,
        "poll_answer": {
            "poll_id": "p1",
            "user": {"id": 7, "is_bot": False, "first_name": "Ada"},
            "option_ids": [2],
            "option_persistent_ids": ["c"],
        },
    }
    sent = Update.de_json(raw, None)
    await Inbox(db, clock=lambda: T0).accept([sent])
    queue: asyncio.Queue[Update] = asyncio.Queue()
    await Inbox(db, clock=lambda: start(1)).replay(Bot("1:x"), queue)
    replayed = queue.get_nowait()
    assert replayed == sent
    assert replayed.poll_answer.option_ids == (2,)
    assert replayed.poll_answer.user.id == 7


# The schema.


async def test_ids_processed_before_the_inbox_existed_still_drop_redeliveries(tmp_path):
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as conn:
        for number, script in enumerate(MIGRATIONS[:2], start=1):
            conn.executescript(f"{script};\nPRAGMA user_version = {number};")
        conn.execute("INSERT INTO processed_updates VALUES (41, '2030-05-01T12:00:00.000+00:00')")
    conn.close()
    database = await Database.open(path)
    try:
        inbox = Inbox(database, clock=lambda: T0)
        assert [u.update_id for u in await inbox.accept([_update(41), _update(42)])] == [42]
    finally:
        await database.close()
    with sqlite3.connect(path) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    assert "processed_updates" not in tables


async def test_stopping_does_not_wait_for_the_long_poll_to_end(bot, standin):
    ada = standin.learner(user_id=4106)
    await send_and_wait(ada, "/start")
    await standin.settle()  # the bot waits in a long poll of LONG_POLL_SECONDS now
    assert bot.polling is not None
    started = asyncio.get_running_loop().time()
    await bot.polling.stop()
    assert asyncio.get_running_loop().time() - started < LONG_POLL_SECONDS / 2


async def test_the_last_answer_replayed_after_a_crash_still_finishes_the_lesson(config, standin, monkeypatch):
    # The bot dies after storing the Quick Check's last answer, before showing the result (a cancelled handler
    # leaves its update pending, as a crash does). At the next start the answer is replayed, finds itself stored,
    # and must still show the result: bench/chaos.py once found lessons left undone this way.
    lesson = COURSE.lessons[0]
    ada = standin.learner(user_id=4120)
    async with running(config) as bot:
        menu = await send_and_wait(ada, "/start")
        last = await read_slides(ada, await tap_and_wait_edit(ada, menu, "Start the course"), lesson)
        await solve_drills(ada, last, lesson)
        poll = await tap_and_wait_message(ada, last, "Quick Check", lambda m: "poll" in m)
        for _question in lesson.quiz[:-1]:
            since = ada.cursor()
            await ada.answer_poll(poll, correct_option(poll))
            poll = await ada.wait_message(lambda m: "poll" in m, since=since)
        die_at(bot, "quiz:stored")  # nothing after the answer is stored runs
        since = ada.cursor()
        await ada.answer_poll(poll, correct_option(poll))
        await standin.settle()
        # The answer and the lesson it finishes are stored in one transaction: never half of it.
        assert (await bot.db.progress(4120))[lesson.id].completed
        assert not [m for m in ada.messages[since:] if "reply_markup" in m], "the result came before the crash"
    since = ada.cursor()
    async with running(config) as bot:
        result = await ada.wait_message(lambda m: "reply_markup" in m, since=since)
        assert f"{len(lesson.quiz)} of {len(lesson.quiz)} correct" in result["text"]
        assert (await bot.db.progress(4120))[lesson.id].completed
    assert standin.errors() == []


async def test_the_last_drill_replayed_after_a_crash_still_finishes_the_lesson(config, standin, monkeypatch):
    # The same for a drill: the bot dies after storing the lesson's last drill as solved, before showing it. The
    # replayed tap finds the drill solved (its turn has passed), and the lesson finished once.
    lesson = COURSE.lessons[0]
    ada = standin.learner(user_id=4121)
    async with running(config) as bot:
        menu = await send_and_wait(ada, "/start")
        last = await read_slides(ada, await tap_and_wait_edit(ada, menu, "Start the course"), lesson)
        result = await answer_quiz(ada, last, lesson)
        since = ada.cursor()
        await ada.tap(result, data_button(result, f"dl:{lesson.id}")["text"])
        screen = await ada.wait_message(since=since)
        *first, final = lesson.drills
        for index, drill in enumerate(first):
            screen = await solve_drill(ada, screen, lesson, drill)
            following = lesson.drills[index + 1]
            screen = await tap_data_and_wait_edit(ada, screen, f"dv:{lesson.id}:{following.id}")
        die_at(bot, "drill:stored")  # nothing after the save runs
        assert final.kind != "parsons"  # one tap answers it
        ada.tap_nowait(screen, data_button(screen, drill_move(lesson, final.id, "c", final.correct))["text"])
        await standin.settle()
        assert final.id in (await bot.db.drills_solved(4121))[lesson.id]
        # The drill and the lesson it finishes are stored in one transaction: never half of it.
        assert (await bot.db.progress(4121))[lesson.id].completed
    async with running(config) as bot:
        await standin.settle()
        assert (await bot.db.progress(4121))[lesson.id].completed
    assert standin.errors() == []


async def test_accept_stores_the_json_telegram_sent_as_it_is(db):
    # A field this PTB does not know is kept too: PTB's to_json would drop it, and a replay after an upgrade reads it.
    sent = json.dumps({**json.loads(update_json(50)), "field_from_a_newer_api": {"x": 1}})
    (update,) = await Inbox(db, clock=lambda: T0).accept([Update.de_json(json.loads(sent), None)], [sent])
    assert update.update_id == 50
    assert (await inbox_in(db))[50]["payload"] == sent


async def test_polling_hands_over_each_update_and_stores_it_as_the_api_sent_it(db, standin):
    queue: asyncio.Queue[object] = asyncio.Queue()
    async with Bot(standin.token, base_url=standin.base_url) as bot:
        polling = Polling(
            bot, Inbox(db, clock=lambda: T0), queue, timeout=1, allowed_updates=["message"], on_error=pytest.fail
        )
        await polling.start()
        try:
            update_id = await standin.learner(1001, first_name="Ada").send("/start")
            update = await asyncio.wait_for(queue.get(), 10)
        finally:
            await polling.stop()
    assert isinstance(update, Update) and update.update_id == update_id
    assert update.message is not None and update.message.text == "/start"
    row = (await inbox_in(db))[update_id]
    stored = json.loads(row["payload"])
    assert row["state"] == "pending"  # nobody handled it: the queue only holds it
    assert stored["update_id"] == update_id
    assert stored["message"]["text"] == "/start" and stored["message"]["from"]["first_name"] == "Ada"
