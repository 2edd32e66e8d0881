"""PostgreSQL with several bot processes on one database: migrations once, an update claimed once, one learner's
updates in order, once-only work run once, `coursebot db copy`, and a learner through a lesson, all on a real
throwaway cluster (tests/pg.py). Two Database objects are two pools, so two sessions, as two replicas would be."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from bot import dbcopy
from bot.changes import (
    ActivityNoted,
    AnswerRecorded,
    AttemptGraded,
    CardMet,
    Event,
    QuizStarted,
    ReaderAt,
    SlideShown,
    StreakDay,
)
from bot.cli import main
from bot.config import Config
from bot.errors import StorageError
from bot.learner import EventKind, ReaderView, SentPoll
from bot.storage.backend import PURGE_LOCK
from bot.storage.db import Database
from bot.storage.migrations import MIGRATIONS
from bot.storage.retention import Claim, RetentionStore
from bot.storage.sending import SharedBudget
from tests import test_replay as replay
from tests.botprocess import BotProcess, bot_env, replicas_on, wait_until
from tests.conftest import ROOT, course_content, peek, running
from tests.journey import answer_quiz, position, read_slides, send_and_wait, solve_drills, tap_and_wait_edit
from tests.outcomes import stored
from tests.pg import free_port

T0 = dt.datetime(2030, 5, 1, 12, 0, tzinfo=dt.UTC)
USER, OTHER = 5001, 5002
COURSE = course_content().english

MIGRATE = """
import asyncio, logging, sys
from bot.storage.db import Database
logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
async def main():
    db = await Database.open(sys.argv[1])
    await db.close()
asyncio.run(main())
"""


def test_two_processes_starting_together_migrate_once(pg_url):
    # Both start at once on an empty database; the advisory lock lets one migrate while the other waits, then finds
    # nothing left to do. Each migration is applied exactly once (a second CREATE TABLE would fail the process).
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", MIGRATE, pg_url],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=120)[0] for process in processes]
    assert [process.returncode for process in processes] == [0, 0], outputs
    applied = [line for output in outputs for line in output.splitlines() if "migrated to schema version" in line]
    assert sorted(int(line.rsplit(" ", 1)[1]) for line in applied) == list(range(1, len(MIGRATIONS) + 1))


async def test_an_update_delivered_to_two_processes_is_new_to_one_of_them_only(pg_url):
    first, second = await Database.open(pg_url), await Database.open(pg_url)
    try:
        for round_ in range(5):
            ids = [round_ * 100 + i for i in range(40)]
            payloads = [(update_id, "{}") for update_id in ids]
            got = await asyncio.gather(first.accept_updates(payloads, T0), second.accept_updates(payloads[::-1], T0))
            assert not (got[0] & got[1])  # no update is new to both
            assert got[0] | got[1] == set(ids)  # and none is lost
        assert await peek(first, "SELECT count(*) FROM inbox") == [(200,)]
    finally:
        await first.close()
        await second.close()


async def test_a_learners_lock_makes_their_second_update_wait_at_another_process(pg_url):
    first, second = await Database.open(pg_url), await Database.open(pg_url)
    order: list[str] = []
    inside = asyncio.Event()
    try:

        async def held_update() -> None:
            async with first.learner_lock(USER):
                order.append("first begins")
                inside.set()
                await asyncio.sleep(0.5)
                order.append("first ends")

        async def second_update() -> None:
            await inside.wait()
            async with second.learner_lock(USER):
                order.append("second begins")

        async def another_learner() -> float:
            await inside.wait()
            started = time.monotonic()
            async with second.learner_lock(OTHER):
                order.append("other learner")
            return time.monotonic() - started

        _, _, other_waited = await asyncio.gather(held_update(), second_update(), another_learner())
        assert order.index("second begins") > order.index("first ends")
        assert order.index("other learner") < order.index("first ends")  # another learner never waits
        assert other_waited < 0.4
    finally:
        await first.close()
        await second.close()


async def test_the_learners_pending_updates_read_with_their_lock_are_read_once_it_is_granted(pg_url):
    # A replica's update waits for the learner's lock, held by another replica's update, which meanwhile stores the
    # learner's earlier update and handles (marks) one more. Read in the lock's round trip, the waiting update's view
    # of the learner's pending updates is what was committed when the lock came to it, not when it asked for it.
    first, second = await Database.open(pg_url), await Database.open(pg_url)
    lease = T0 + dt.timedelta(minutes=1)
    try:
        await first.accept_updates(
            [(11, "{}"), (12, "{}")], T0, owner="a", lease_until=lease, learners={11: USER, 12: USER}
        )
        await second.accept_updates([(20, "{}")], T0, owner="b", lease_until=lease, learners={20: USER})
        await first.accept_updates([(30, "{}")], T0, owner="a", lease_until=lease, learners={30: OTHER})
        holding = asyncio.Event()

        async def holder() -> None:
            async with first.learner_lock(USER):
                holding.set()
                await asyncio.sleep(0.3)
                await first.accept_updates([(15, "{}")], T0, owner="a", lease_until=lease, learners={15: USER})
                await first.updates_handled([11], T0, owner="a")

        async def waiter() -> object:
            await holding.wait()
            async with second.learner_lock(USER, 20) as pending:
                return pending

        _, pending = await asyncio.gather(holder(), waiter())
        assert pending == [(12, "a", lease), (15, "a", lease), (20, "b", lease)]
        assert pending == await second.earlier_pending(USER, 20)
        async with second.learner_lock(USER) as nothing_read:
            assert nothing_read is None
    finally:
        await first.close()
        await second.close()


async def test_the_lock_of_a_process_that_died_is_let_go(pg_cluster, pg_url):
    # A replica killed while it holds a learner's lock: its session ends, the lock goes with it.
    # psql takes the lock, then waits for more input: its session idles in the transaction, as a replica's does
    # while its update awaits Telegram.
    held = subprocess.Popen(
        [str(pg_cluster.bin / "psql"), "-XqAt", "-d", pg_url],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert held.stdin is not None
    held.stdin.write(f"BEGIN; SELECT pg_advisory_xact_lock({USER});\n")
    held.stdin.flush()
    db = await Database.open(pg_url)
    try:
        deadline = time.monotonic() + 30
        while not await peek(db, f"SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = {USER}"):
            assert time.monotonic() < deadline, "psql never took the lock"
            await asyncio.sleep(0.05)
        waiting = asyncio.create_task(_enter(db, USER))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        held.kill()
        held.wait(timeout=10)
        await asyncio.wait_for(waiting, 30)
    finally:
        held.kill()
        await db.close()


async def _enter(db: Database, user_id: int) -> None:
    async with db.learner_lock(user_id):
        pass


async def test_the_daily_purges_run_in_one_process_at_a_time(pg_url):
    day = dt.timedelta(days=1)
    clock = [T0]
    first = await Database.open(pg_url, clock=lambda: clock[0], events_days=1)
    second = await Database.open(pg_url, clock=lambda: clock[0], events_days=1)
    try:
        await first.accept_updates([(1, "{}"), (2, "{}")], T0)
        await first.updates_handled([1, 2], T0)
        assert await stored(first, USER, events=(Event(EventKind.SLIDE, "grad", item_id="a"),))
        clock[0] = T0 + 3 * day
        # While one process purges (here: holds the purge's lock in a transaction), the other's purge does nothing.
        async with first.backend.transaction() as purging:
            assert await purging.try_lock(PURGE_LOCK)
            assert await second.forget_updates(T0 + day) == 0
            assert await second.purge_events() == 0
        assert await peek(first, "SELECT count(*) FROM inbox") == [(2,)]
        # Then both try at once: exactly one of them deletes, and the other finds the work done or under way.
        forgotten = await asyncio.gather(first.forget_updates(T0 + day), second.forget_updates(T0 + day))
        purged = await asyncio.gather(first.purge_events(), second.purge_events())
        assert sorted(forgotten) == [0, 2] and sorted(purged) == [0, 1]
    finally:
        await first.close()
        await second.close()


# coursebot db copy


async def _course_in(path: Path) -> None:
    """Fill an SQLite file as a course in use leaves it: learners, places, a round, answers, drills, events, inbox."""
    db = await Database.open(path)
    try:
        for user in (USER, OTHER):
            await db.learner(user, user + 1, "en")
            shown = (SlideShown("grad", "s1", "s2", last=False), ReaderAt(9, ReaderView.SLIDE))
            assert await stored(db, user, *shown, events=(Event(EventKind.SLIDE, "grad", item_id="s1"),))
        assert await stored(db, USER, QuizStarted("grad", ("q1", "q2"), seed=3))
        note = await db.poll_sending(USER, "grad", "q1", ("a", "b"))
        await db.poll_sent(SentPoll("p1", USER, "grad", "q1", ("a", "b")), message_id=11, sending=note)
        answer = AnswerRecorded(SentPoll("p1", USER, "grad", "q1", ("a", "b")), 1, "b", True, remaining=("q2",))
        assert await stored(db, USER, answer)
        await db.poll_sending(OTHER, "grad", "q2", ("c", "d"))
        assert await stored(db, USER, AttemptGraded("grad", passed=True), update_id=7)
        await db.accept_updates([(7, "{}"), (8, "{}")], T0)
        await db.updates_handled([7], T0)
        # Retention's tables, the keyed ones WITHOUT ROWID in the file: more rows than a batch of the test's copy.
        retention = RetentionStore(db)
        for user in (USER, OTHER):
            assert await stored(db, user, *(StreakDay(f"2026-01-0{day}") for day in range(1, 4)))
            assert await stored(db, user, ActivityNoted(1000, 600)) and await stored(db, user, ActivityNoted(2000, 600))
            await retention.claim([(Claim(user, "2026-01-02", snoozed=False), None, "on")], 1000)
        card = {"card_id": 5, "learner": USER, "lesson": "grad", "kind": "question", "item": "q1", "state": 1}
        card |= {"step": 0, "stability": 1.0, "difficulty": 5.0, "due": 9000, "last_review": 1000}
        entry = {"card_id": 5, "learner": USER, "rating": 3, "reviewed_at": 1000, "duration_ms": 1500}
        assert await stored(db, USER, CardMet(card, entry), update_id=8)
    finally:
        await db.close()


async def test_db_copy_moves_every_table_and_checks_the_counts(tmp_path, pg_url, monkeypatch):
    source = tmp_path / "coursebot.sqlite3"
    await _course_in(source)
    monkeypatch.setattr(dbcopy, "BATCH", 2)  # each table read in several batches, after its last key
    said: list[str] = []
    counts = await dbcopy.copy(source, pg_url, say=said.append)
    assert counts["learners"] == 2 and counts["quiz_answers"] == 1 and counts["inbox"] == 2 and counts["events"] == 2
    assert counts["streak_days"] == 6 and counts["activity"] == 4 and counts["reminders_sent"] == 2
    assert counts["review_log"] == 1
    assert len(said) == len(counts)
    copied = await Database.open(pg_url)
    original = await Database.open(source)
    try:
        for table in counts:
            assert await peek(copied, f"SELECT count(*) FROM {table}") == [(counts[table],)]
        for user in (USER, OTHER):
            assert await copied.find_learner(user) == await original.find_learner(user)
            assert await copied.progress(user) == await original.progress(user)
            assert await copied.latest_answers(user) == await original.latest_answers(user)
        for table in ("streak_days", "activity", "reminders_sent", "review_cards", "review_log"):
            query = f"SELECT * FROM {table} ORDER BY 1, 2"
            assert await peek(copied, query) == await peek(original, query), table
        # Ids PostgreSQL numbers itself go on after the copied ones.
        [(highest,)] = await peek(copied, "SELECT max(id) FROM quiz_sends")
        assert await copied.poll_sending(USER, "grad", "q2", ("c", "d")) == highest + 1
        # An update handled on SQLite is still known as handled: a redelivery is not new.
        assert await copied.accept_updates([(7, "{}"), (9, "{}")], T0) == {9}
    finally:
        await copied.close()
        await original.close()


async def test_db_copy_refuses_a_database_that_is_not_empty_and_copies_nothing(tmp_path, pg_url):
    source = tmp_path / "coursebot.sqlite3"
    await _course_in(source)
    used = await Database.open(pg_url)
    await used.learner(42, 42, "en")
    await used.close()
    with pytest.raises(StorageError, match=r"is not empty \(learners has 1 rows\)"):
        await dbcopy.copy(source, pg_url)
    check = await Database.open(pg_url)
    try:
        assert await peek(check, "SELECT count(*) FROM inbox") == [(0,)]
    finally:
        await check.close()


def test_db_copy_says_in_one_line_what_stops_it(tmp_path, capsys):
    unreachable = f"postgresql://coursebot:secret@127.0.0.1:{free_port()}/coursebot"
    assert main(["db", "copy", str(tmp_path / "missing.sqlite3"), unreachable]) == 1
    assert "there is no database at" in capsys.readouterr().err
    source = tmp_path / "coursebot.sqlite3"
    asyncio.run(_course_in(source))
    assert main(["db", "copy", str(source), unreachable]) == 1
    err = capsys.readouterr().err
    assert err.startswith("coursebot: cannot reach the database postgresql://coursebot:***@127.0.0.1:")
    assert err.count("\n") == 1 and "secret" not in err
    assert main(["db", "copy", str(source), str(tmp_path / "other.sqlite3")]) == 1
    assert "must be a postgresql:// URL" in capsys.readouterr().err


# The bot on PostgreSQL.


def test_coursebot_db_selects_postgresql_by_url_and_sqlite_by_path():
    url = "postgresql://bot:pw@db:5432/coursebot"
    on_pg = Config.from_env({"COURSEBOT_DB": url})
    assert on_pg.database == url and on_pg.db_path == Config.from_env({}).db_path
    on_file = Config.from_env({"COURSEBOT_DB": "/data/x.sqlite3"})
    assert on_file.database == Path("/data/x.sqlite3") and on_file.db_url is None


async def test_a_learner_takes_a_lesson_with_the_bot_on_postgresql(config, standin, pg_url):
    lesson = COURSE.lessons[0]
    async with running(replace(config, db_url=pg_url)) as bot:
        assert bot.db is not None and bot.db.path is None  # on PostgreSQL, no file
        ada = standin.learner(user_id=USER, language_code="en")
        menu = await send_and_wait(ada, "/start")
        message = await tap_and_wait_edit(ada, menu, "Start the course")
        assert position(message) == (1, len(lesson.slides))
        last = await read_slides(ada, message, lesson)
        result = await answer_quiz(ada, last, lesson)
        assert f"{len(lesson.quiz)} of {len(lesson.quiz)} correct" in result["text"]
        solved = await solve_drills(ada, result, lesson)
        assert "Every drill of this lesson is solved." in solved["text"]
        report = await send_and_wait(ada, "/progress")
        assert "1 of 4 lessons done" in report["text"]
        assert await peek(bot.db, f"SELECT count(*) FROM quiz_answers WHERE user_id = {USER}") == [(len(lesson.quiz),)]
        assert await peek(bot.db, f"SELECT count(*) FROM events WHERE user_id = {USER} AND kind = 'done'") == [(1,)]
    assert standin.errors() == []
    assert not config.db_path.exists()  # nothing went to the SQLite file


async def test_two_bot_processes_on_one_postgresql_answer_each_update_once_and_purge_once(standin, pg_url, tmp_path):
    # Learning events from long ago and the ids of updates handled long ago, as a course in use has them.
    old = dt.datetime.now(dt.UTC) - dt.timedelta(days=400)
    seed = await Database.open(pg_url, clock=lambda: old)
    try:
        await seed.learner(OTHER, OTHER, "en")
        for item in ("a", "b", "c"):
            assert await stored(seed, OTHER, events=(Event(EventKind.SLIDE, "grad", item_id=item),))
        await seed.accept_updates([(1, "{}"), (2, "{}")], old)
        await seed.updates_handled([1, 2], old)
    finally:
        await seed.close()
    bots = replicas_on(standin, pg_url, tmp_path)
    try:
        await asyncio.gather(*(bot.start() for bot in bots))
        await asyncio.gather(*(bot.wait_polling() for bot in bots))
        ada = standin.learner(user_id=USER)
        since = ada.cursor()
        await ada.send("/start")
        menu = await ada.wait_message(since=since, timeout=30)
        slide = await tap_and_wait_edit(ada, menu, "Start the course")
        await tap_and_wait_edit(ada, slide, "Next")
        await asyncio.sleep(1)  # time for a second, wrong, answer to arrive
        assert len([m for m in ada.messages if m["message_id"] >= menu["message_id"]]) == 1  # the menu, edited since
        checker = await Database.open(pg_url)
        try:
            assert await peek(checker, "SELECT count(*) FROM events WHERE user_id = 5002") == [(0,)]
            assert await peek(checker, "SELECT update_id FROM inbox WHERE update_id IN (1, 2)") == []
            assert await peek(checker, f"SELECT count(*) FROM events WHERE user_id = {USER} AND kind = 'slide'") == [
                (2,)
            ]
        finally:
            await checker.close()
    finally:
        await asyncio.gather(*(bot.stop() for bot in bots))
    logs = [bot.log() for bot in bots]
    assert sum(log.count("purged 3 learning events") for log in logs) == 1, logs
    assert all("Traceback" not in log for log in logs), logs
    # Two pollers of one bot meet Telegram's 409 (webhooks are how replicas take updates); nothing else went wrong.
    assert [call for call in standin.errors() if call.method != "getUpdates"] == []


async def test_replicas_share_one_send_budget_slots_never_closer_than_the_rate(pg_url):
    first, second = await Database.open(pg_url), await Database.open(pg_url)
    try:
        budgets = [SharedBudget(first, rate=20.0), SharedBudget(second, rate=20.0)]
        now = 1_900_000_000.0  # wall-clock seconds, as replicas read them
        slots = await asyncio.gather(*(budgets[i % 2].reserve(now) for i in range(40)))
        ordered = sorted(slots)
        assert ordered[0] == now and len(set(slots)) == 40
        assert all(later - earlier == pytest.approx(0.05) for earlier, later in itertools.pairwise(ordered))
        # A 429 at one replica holds the other's sending too.
        await budgets[0].hold(now + 60)
        assert await budgets[1].reserve(now + 3) == now + 60
    finally:
        await first.close()
        await second.close()


async def test_the_shared_send_budget_is_refused_on_sqlite_in_one_line(tmp_path):
    db = await Database.open(tmp_path / "coursebot.sqlite3")
    try:
        with pytest.raises(StorageError, match="keeps its own in memory"):
            await SharedBudget(db, rate=28.0).reserve(0.0)
    finally:
        await db.close()


# A replay after a crash stores nothing twice on PostgreSQL too (the cases and fault points of tests/test_replay.py).


async def pg_tables(url: str) -> dict[str, list[tuple]]:
    """Return every learner table's rows as tests/test_replay.tables does, read from PostgreSQL."""
    db = await Database.open(url)
    try:
        dump = {}
        for table in replay.TABLES:
            rows = await db._all(replay.select(table))
            dump[table] = sorted(
                (
                    tuple((k, row[k] is not None) if k in replay.VOLATILE else (k, row[k]) for k in row.keys())
                    for row in rows
                ),
                key=repr,
            )
        [(pending,)] = await peek(db, "SELECT count(*) FROM inbox WHERE state != 'handled'")
        dump["pending"] = [(pending,)]
        return dump
    finally:
        await db.close()


# The graded runs need the real runner (bubblewrap): on PostgreSQL, the pass killed after it was stored, before its
# verdict went out, whose replay must show the verdict (the outbox), not decide again over a learner out of practice.
REPLAY_POINTS = [
    *((name, point) for name, case in replay.CASES.items() if not case.runner for point in case.points),
    ("graded run that passes", "run:stored"),
]


@pytest.mark.parametrize(("name", "point"), REPLAY_POINTS, ids=[f"{n}, dies at {p}" for n, p in REPLAY_POINTS])
async def test_a_replay_after_a_crash_stores_what_one_clean_run_stores_on_postgresql(
    name, point, config, standin, pg_cluster
):
    case = replay.CASES[name]
    if case.runner and shutil.which("bwrap") is None:
        pytest.skip("the graded run needs the runner's sandbox, which needs bubblewrap")
    if case.runner:
        config = replace(config, runner="embedded")
    clean = replace(config, db_url=pg_cluster.new_database())
    crashed = replace(config, db_url=pg_cluster.new_database())
    clean_ada, crashed_ada = standin.learner(user_id=7201), standin.learner(user_id=7202)
    passed = await replay._run(clean, standin, clean_ada, case, None)
    assert set(case.points) <= passed
    died = await replay._run(crashed, standin, crashed_ada, case, point)
    assert point in died, "the bot never reached the point it was to die at: the test proves nothing"
    replay.assert_seen_as_in_one_clean_run(replay.seen(clean_ada), replay.seen(crashed_ada), point)
    want, got = await pg_tables(str(clean.db_url)), await pg_tables(str(crashed.db_url))
    for table in replay.TABLES:
        assert got[table] == want[table], f"{table} after a crash at {point} differs from one clean run"
    assert got["pending"] == [(0,)], "the update left pending by the crash was not handled at the next start"
    if point == "button:answered":
        assert len(standin.answered_again) == 1  # the replayed tap's second answer: the crash's doing
        standin.answered_again.clear()


async def test_a_replica_killed_mid_update_leaves_it_claimed_until_its_lease_runs_out_then_one_survivor_answers(
    standin, pg_url, tmp_path
):
    # Three processes on one database, each receiving webhooks on a port of its own; Telegram (the stand-in) sends
    # to the first. It stores /start (claimed by it, for the lease) and dies before the reply goes out. A second
    # replica runs throughout; the first is started again while its old claim is live. Neither replays the update
    # at once; once the lease ran out, one of them takes it over and the learner gets one answer.
    lease = 20.0
    secret = "scale-test_SECRET"
    ports = [free_port() for _ in range(2)]

    def replica(n: int) -> BotProcess:
        env = bot_env(
            standin,
            tmp_path / f"unused{n}.sqlite3",
            COURSEBOT_DB=pg_url,
            COURSEBOT_CONTROL_SOCKET=str(tmp_path / f"control{n}.sock"),
            COURSEBOT_WEBHOOK_LISTEN=f"127.0.0.1:{ports[n]}",
            COURSEBOT_WEBHOOK_SECRET=secret,
            COURSEBOT_INBOX_LEASE=str(lease),
        )
        return BotProcess(env, tmp_path / f"bot{n}.log")

    says = b"receiving updates by webhook"
    dying, survivor = replica(0), replica(1)
    checker = await Database.open(pg_url)
    try:
        await asyncio.gather(dying.start(), survivor.start())
        await asyncio.gather(dying.wait_polling(says=says), survivor.wait_polling(says=says))
        await standin.set_webhook({"url": f"http://127.0.0.1:{ports[0]}/", "secret_token": secret})
        ada = standin.learner(user_id=USER)
        since = ada.cursor()
        standin.fail_next("sendMessage", 429, retry_after=5)  # the reply waits: the kill finds the update under way
        calls = len(standin.calls)
        update_id = await ada.send("/start")
        await standin.wait_call("sendMessage", since=calls, timeout=30)
        dead_pid = dying.process.pid
        await dying.kill()
        killed_at = time.monotonic()
        rows = await peek(checker, f"SELECT state, owner FROM inbox WHERE update_id = {update_id}")
        assert len(rows) == 1 and rows[0][0] == "pending"
        assert str(rows[0][1]).split(":")[1] == str(dead_pid)  # the dead replica's claim
        await dying.start()  # the same replica again, on the same port: a new owner
        await dying.wait_polling(says=says)
        assert time.monotonic() - killed_at < lease, "the restart outlived the lease: the test proves nothing"
        # A live claim: the start did not replay it, nor did the survivor take it.
        assert "updates again that the last run left unhandled" not in dying.log().split("---- start 2")[1]
        assert await peek(checker, f"SELECT state, owner FROM inbox WHERE update_id = {update_id}") == rows
        assert ada.messages == []
        # Once the lease ran out (at most a lease after the kill, plus a third for the next sweep), one takes over.
        menu = await ada.wait_message(since=since, timeout=lease * 2)
        assert time.monotonic() - killed_at >= lease / 3  # not before the claim could have lapsed
        await wait_until(
            lambda: "taking over 1 updates" in dying.log() + survivor.log(), "a replica took the update", 10
        )
        await asyncio.sleep(lease / 3 + 1)  # one more sweep of each: nobody takes it again
        assert [m["message_id"] for m in ada.messages] == [menu["message_id"]]  # answered once
        assert len([call for call in standin.calls_to("sendMessage") if call.ok]) == 1
        assert (dying.log() + survivor.log()).count("taking over 1 updates") == 1
        state = await peek(checker, f"SELECT state, replays FROM inbox WHERE update_id = {update_id}")
        assert state == [("handled", 1)]
    finally:
        await checker.close()
        await asyncio.gather(dying.stop(), survivor.stop(), return_exceptions=True)
    logs = dying.log() + survivor.log()
    assert "Traceback" not in logs, logs
