"""The progress database, opened through bot.storage.db.Database: each test of the queries runs on a real SQLite file
in tmp_path and on a real PostgreSQL database (tests/pg.py); the file's own tests (WAL, backup) on SQLite only."""

from __future__ import annotations

import ast
import datetime as dt
import os
import re
import sqlite3
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import aiosqlite
import pytest

import bot.storage.db as db_module
import bot.storage.engine as engine_module
from bot.changes import (
    ActivityNoted,
    AnswerRecorded,
    CardMet,
    CardReviewed,
    CompletionCardClaimed,
    LanguageChosen,
    LessonCompleted,
    QuizStarted,
    ReaderAt,
    RemindersOffered,
    SlideShown,
    StreakDay,
)
from bot.errors import StorageError
from bot.learner import LessonProgress, ReaderView, Rhythm, SentPoll
from bot.retention.review import ReviewCard
from bot.storage.db import Database, backup
from bot.storage.migrations import MIGRATIONS
from bot.storage.migrations_pg import POSTGRES_MIGRATIONS
from bot.storage.retention import Claim, RetentionStore
from tests.conftest import peek
from tests.outcomes import answered, stored
from tests.pg import free_port

USER, CHAT = 1001, 2001


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "coursebot.sqlite3"


@pytest.fixture
async def db(store: Path | str) -> AsyncIterator[Database]:
    """The database, once on each engine."""
    database = await Database.open(store)
    yield database
    await database.close()


@pytest.fixture
async def file_db(db_path: Path) -> AsyncIterator[Database]:
    """The database as an SQLite file, for what only a file has (WAL, backup)."""
    database = await Database.open(db_path)
    yield database
    await database.close()


async def answers_in(db: Database, user_id: int = USER) -> int:
    [(count,)] = await peek(db, f"SELECT count(*) FROM quiz_answers WHERE user_id = {int(user_id)}")
    return int(count)


def rows(path: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        result = conn.execute(sql).fetchall()
    conn.close()
    return result


async def created(path: Path | str) -> Path | str:
    """Create a migrated database at ``path`` (or URL) and close it."""
    database = await Database.open(path)
    await database.close()
    return path


def set_user_version(path: Path, version: int) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {int(version)}")
    conn.close()


# Opening and migrating.


async def test_fresh_database_is_migrated_to_the_latest_schema(tmp_path):
    path = tmp_path / "new" / "coursebot.sqlite3"
    database = await Database.open(path)
    try:
        assert await database.schema_version() == len(MIGRATIONS)
        await database.learner(USER, CHAT, "en")
    finally:
        await database.close()
    assert rows(path, "PRAGMA user_version") == [(len(MIGRATIONS),)]
    # Reopening migrates nothing again (a second CREATE TABLE would fail) and keeps the data.
    database = await Database.open(path)
    try:
        assert await database.schema_version() == len(MIGRATIONS)
        assert (await database.find_learner(USER)).telegram_language == "en"
    finally:
        await database.close()


async def test_migrated_database_reopens_without_migrating_again_and_keeps_its_data(store):
    await created(store)
    first = await Database.open(store)
    await first.learner(USER, CHAT, "ru")
    await first.close()
    again = await Database.open(store)
    try:
        assert await again.schema_version() == len(MIGRATIONS)
        assert (await again.find_learner(USER)).telegram_language == "ru"
    finally:
        await again.close()


def test_postgresql_has_each_migration_sqlite_has():
    # One number, one step on both engines: a migration added to one only would leave the other behind.
    assert len(POSTGRES_MIGRATIONS) == len(MIGRATIONS)


async def test_an_unreachable_postgresql_is_refused_in_one_line_without_its_password():
    url = f"postgresql://coursebot:secret@127.0.0.1:{free_port()}/coursebot"
    with pytest.raises(StorageError) as caught:
        await Database.open(url)
    message = str(caught.value)
    assert message.startswith("cannot reach the database postgresql://coursebot:***@127.0.0.1:")
    assert "secret" not in message and "\n" not in message


async def test_a_postgresql_database_from_a_newer_coursebot_is_refused(pg_cluster, pg_url):
    await created(pg_url)
    pg_cluster.psql("UPDATE coursebot_schema SET version = 99", pg_url.rsplit("/", 1)[1])
    with pytest.raises(StorageError) as caught:
        await Database.open(pg_url)
    assert "schema version 99" in str(caught.value) and "newer" in str(caught.value)


async def test_a_failing_migration_leaves_the_database_at_the_previous_version(tmp_path, monkeypatch):
    path = tmp_path / "coursebot.sqlite3"
    broken = "CREATE TABLE half_done (x INTEGER); INSERT INTO no_such_table VALUES (1)"
    monkeypatch.setattr(engine_module, "MIGRATIONS", (*MIGRATIONS, broken))
    with pytest.raises(StorageError):
        await Database.open(path)
    assert rows(path, "PRAGMA user_version") == [(len(MIGRATIONS),)]
    assert rows(path, "SELECT name FROM sqlite_master WHERE name = 'half_done'") == []
    assert rows(path, "SELECT name FROM sqlite_master WHERE name = 'learners'") == [("learners",)]


async def test_journal_mode_is_wal(file_db, db_path):
    assert rows(db_path, "PRAGMA journal_mode") == [("wal",)]


async def test_schema_version_is_the_number_of_migrations(db):
    assert await db.schema_version() == len(MIGRATIONS) >= 1


async def test_database_from_a_newer_coursebot_is_refused(tmp_path):
    path = await created(tmp_path / "future.sqlite3")
    set_user_version(path, len(MIGRATIONS) + 1)
    with pytest.raises(StorageError) as caught:
        await Database.open(path)
    assert f"schema version {len(MIGRATIONS) + 1}" in str(caught.value)
    assert "newer" in str(caught.value)
    assert rows(path, "PRAGMA user_version") == [(len(MIGRATIONS) + 1,)]


async def test_refusing_a_newer_database_closes_its_connection(tmp_path):
    path = await created(tmp_path / "future.sqlite3")
    set_user_version(path, 99)
    with pytest.raises(StorageError):
        await Database.open(path)
    assert not path.with_name(path.name + "-wal").exists()


async def test_a_file_that_is_not_a_database_is_refused_with_storage_error(tmp_path):
    path = tmp_path / "garbage.sqlite3"
    path.write_bytes(b"this is not an SQLite database, just text. " * 100)
    with pytest.raises(StorageError) as caught:
        await Database.open(path)
    assert str(path) in str(caught.value)


async def test_a_new_database_and_its_folder_are_the_owners_alone(tmp_path):
    # Learners' progress is nobody else's: 0600 for the file (SQLite gives its -wal and -shm the same), 0700 for a
    # folder it creates; whatever the umask would have allowed.
    path = tmp_path / "new" / "data" / "coursebot.sqlite3"
    old = os.umask(0o022)
    try:
        database = await Database.open(path)
    finally:
        os.umask(old)
    try:
        await database.learner(USER, CHAT, "en")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(Path(f"{path}-wal").stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700
    finally:
        await database.close()


async def test_an_existing_folder_keeps_its_mode(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    database = await Database.open(folder / "coursebot.sqlite3")
    await database.close()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    assert stat.S_IMODE((folder / "coursebot.sqlite3").stat().st_mode) == 0o600


async def test_close_twice_is_fine_and_leaves_no_wal_file(db_path):
    database = await Database.open(db_path)
    await database.learner(USER, CHAT, "en")
    assert db_path.with_name(db_path.name + "-wal").exists()
    await database.close()
    await database.close()
    assert not db_path.with_name(db_path.name + "-wal").exists()
    assert rows(db_path, "SELECT user_id FROM learners") == [(USER,)]


# Learners.


async def test_first_contact_creates_the_learner(db):
    assert await db.find_learner(USER) is None
    learner = await db.learner(USER, CHAT, "ru")
    assert (learner.user_id, learner.chat_id, learner.telegram_language, learner.language) == (USER, CHAT, "ru", None)
    assert (learner.lesson_id, learner.quiz_queue, learner.quiz_poll_id) == (None, (), None)
    assert await db.find_learner(USER) == learner


async def test_telegram_language_follows_the_latest_update(db):
    await db.learner(USER, CHAT, "ru")
    assert (await db.learner(USER, CHAT, "de")).telegram_language == "de"


async def test_an_update_without_language_keeps_the_known_one(db):
    await db.learner(USER, CHAT, "ru")
    assert (await db.learner(USER, CHAT, None)).telegram_language == "ru"
    assert (await db.find_learner(USER)).telegram_language == "ru"


async def test_chat_id_follows_the_latest_update(db):
    await db.learner(USER, CHAT, "en")
    assert (await db.learner(USER, CHAT + 1, None)).chat_id == CHAT + 1


async def test_chosen_language_is_stored_and_can_be_cleared(db):
    await db.learner(USER, CHAT, "en")
    assert await stored(db, USER, LanguageChosen("ru"))
    assert (await db.find_learner(USER)).language == "ru"
    assert await stored(db, USER, LanguageChosen(None))
    assert (await db.find_learner(USER)).language is None


# Slides.


async def show(
    db: Database,
    slide: int,
    *,
    furthest: int | None = None,
    last: int = 12,
    user: int = USER,
    lesson: str = "grad",
    message_id: int | None = None,
) -> None:
    """Show slide number ``slide`` (id s<n>) the way the lesson handler does: its place, and the message that shows
    it when a new one was sent, in one outcome."""
    reached = slide if furthest is None else furthest
    shown = SlideShown(lesson, f"s{slide}", f"s{reached}", last=slide == last)
    reader = (ReaderAt(message_id, ReaderView.SLIDE),) if message_id is not None else ()
    assert await stored(db, user, shown, *reader)


async def test_learners_are_kept_apart(db):
    await db.learner(USER, CHAT, "en")
    await db.learner(USER + 1, CHAT + 1, "ru")
    await show(db, 2, message_id=5)
    assert await db.progress(USER + 1) == {}
    assert (await db.find_learner(USER + 1)).lesson_id is None


async def test_show_slide_keeps_the_slide_and_the_furthest_reached_by_id(db):
    await db.learner(USER, CHAT, "en")
    await show(db, 0, message_id=40)
    await show(db, 5)
    await show(db, 2, furthest=5)
    assert await db.progress(USER) == {
        "grad": LessonProgress("grad", "s2", "s5", slides_read=False, completed=False, started=True)
    }
    learner = await db.find_learner(USER)
    assert (learner.lesson_id, learner.reader_message_id, learner.reader_view) == ("grad", 40, ReaderView.SLIDE)


async def test_reaching_the_last_slide_marks_the_slides_read_for_good(db):
    await db.learner(USER, CHAT, "en")
    await show(db, 11)
    assert (await db.progress(USER))["grad"].slides_read is False
    await show(db, 12)
    assert (await db.progress(USER))["grad"].slides_read is True
    await show(db, 3, furthest=12)
    progress = (await db.progress(USER))["grad"]
    assert (progress.slide_id, progress.furthest_slide_id, progress.slides_read) == ("s3", "s12", True)


async def test_a_lesson_whose_first_shown_slide_is_the_last_is_read(db):
    await db.learner(USER, CHAT, "en")
    await show(db, 12)
    assert (await db.progress(USER))["grad"].slides_read is True


async def test_the_reader_message_is_remembered_with_its_view(db):
    await db.learner(USER, CHAT, "en")
    assert await stored(db, USER, ReaderAt(77, ReaderView.MENU))
    learner = await db.find_learner(USER)
    assert (learner.reader_message_id, learner.reader_view) == (77, ReaderView.MENU)


async def done_events(db: Database, user_id: int = USER) -> int:
    [(count,)] = await peek(db, f"SELECT count(*) FROM events WHERE user_id = {int(user_id)} AND kind = 'done'")
    return int(count)


async def test_a_lesson_completes_once_and_only_with_its_slides_read(db):
    # Its DONE event is the sign it was done just now: recorded with the first completion only.
    await db.learner(USER, CHAT, "en")
    assert await stored(db, USER, LessonCompleted("grad"))  # never opened
    assert await db.progress(USER) == {} and await done_events(db) == 0
    await show(db, 4)
    assert await stored(db, USER, LessonCompleted("grad"))  # slides not read
    assert (await db.progress(USER))["grad"].completed is False and await done_events(db) == 0
    await show(db, 12)
    assert await stored(db, USER, LessonCompleted("grad"))
    assert (await db.progress(USER))["grad"].completed is True and await done_events(db) == 1
    assert await stored(db, USER, LessonCompleted("grad"))  # already done
    assert (await db.progress(USER))["grad"].completed is True and await done_events(db) == 1


# Quick Check.

OPTIONS = ("a", "b", "c", "d")


def sent(poll_id: str, question: str, lesson: str = "grad") -> SentPoll:
    return SentPoll(poll_id, USER, lesson, question, OPTIONS)


async def _quiz(db: Database, questions: list[str], seed: int = 7) -> None:
    await db.learner(USER, CHAT, "en")
    assert await stored(db, USER, QuizStarted("grad", tuple(questions), seed))


async def test_start_quiz_queues_the_questions_with_the_rounds_seed(db):
    await _quiz(db, ["q-one", "q-two", "q-three"], seed=1234)
    learner = await db.find_learner(USER)
    assert (learner.quiz_lesson_id, learner.quiz_queue, learner.quiz_poll_id, learner.quiz_seed) == (
        "grad",
        ("q-one", "q-two", "q-three"),
        None,
        1234,
    )


async def test_poll_sent_is_the_awaited_poll_with_its_options_in_the_order_shown(db):
    await _quiz(db, ["q-one", "q-two"])
    poll = SentPoll("poll-1", USER, "grad", "q-one", ("c", "a", "d", "b"))
    await db.poll_sent(poll, message_id=10)
    assert (await db.find_learner(USER)).quiz_poll_id == "poll-1"
    assert await db.answered_poll("poll-1") == (poll, False, False)
    assert await db.answered_poll("poll-2") is None
    assert await db.poll_message("poll-1") == 10


async def test_a_polls_age_is_read_on_the_databases_clock(tmp_path):
    now = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC)
    clock = [now]
    database = await Database.open(tmp_path / "clocked.sqlite3", clock=lambda: clock[0])
    try:
        await _quiz(database, ["q-one"])
        await database.poll_sent(sent("poll-1", "q-one"), message_id=3)
        clock[0] = now + dt.timedelta(seconds=90)
        assert await database.poll_age("poll-1") == dt.timedelta(seconds=90)
        assert await database.poll_age("nope") is None
    finally:
        await database.close()


async def test_answering_the_awaited_poll_pops_its_question(db):
    await _quiz(db, ["q-one", "q-two"])
    first = sent("poll-1", "q-one")
    await db.poll_sent(first, message_id=10)
    assert await answered(db, USER, first, 0, True)
    learner = await db.find_learner(USER)
    assert (learner.quiz_queue, learner.quiz_poll_id, learner.quiz_lesson_id) == (("q-two",), None, "grad")
    second = sent("poll-2", "q-two")
    await db.poll_sent(second, message_id=11)
    assert await answered(db, USER, second, 2, False)
    learner = await db.find_learner(USER)
    assert (learner.quiz_queue, learner.quiz_poll_id, learner.quiz_lesson_id) == ((), None, None)


async def test_a_second_answer_to_the_same_poll_stores_nothing_of_its_outcome(db, db_path):
    await _quiz(db, ["q-one", "q-two"])
    poll = sent("poll-1", "q-one")
    await db.poll_sent(poll, message_id=10)
    assert await answered(db, USER, poll, 0, True, update_id=1)
    assert await db.answered_poll("poll-1") == (poll, True, False)
    # Another update answering it again (never the same update: that one's events are keyed by its id).
    assert await answered(db, USER, poll, 1, False, update_id=2) is False
    assert await answers_in(db) == 1
    assert await peek(db, "SELECT kind, option_id, update_id FROM events") == [("answer", "a", 1)]
    assert (await db.latest_answers(USER))[("grad", "q-one")].option_id == "a"
    assert (await db.find_learner(USER)).quiz_queue == ("q-two",)


async def test_answer_to_a_poll_not_awaited_is_recorded_but_pops_nothing(db):
    await _quiz(db, ["q-one", "q-two"])
    old = sent("poll-old", "q-two")
    await db.poll_sent(old, message_id=9)
    awaited = sent("poll-1", "q-one")
    await db.poll_sent(awaited, message_id=10)
    assert await answered(db, USER, old, 1, False)
    learner = await db.find_learner(USER)
    assert (learner.quiz_queue, learner.quiz_poll_id) == (("q-one", "q-two"), "poll-1")
    # An outcome decided while its poll was awaited moves nothing once another poll is awaited (it was resent).
    await db.poll_sent(sent("poll-2", "q-one"), message_id=11)
    stale = AnswerRecorded(awaited, 0, "a", True, remaining=("q-two",))
    assert await stored(db, USER, stale)
    learner = await db.find_learner(USER)
    assert (learner.quiz_queue, learner.quiz_poll_id) == (("q-one", "q-two"), "poll-2")
    assert (await db.latest_answers(USER))[("grad", "q-one")].option_id == "a"
    answer = (await db.latest_answers(USER))[("grad", "q-two")]
    assert (answer.option_id, answer.correct) == ("b", False)


async def test_an_answer_is_kept_by_option_id_and_the_position_tapped(db, db_path):
    await _quiz(db, ["q-one"])
    poll = SentPoll("poll-1", USER, "grad", "q-one", ("d", "b", "a", "c"))
    await db.poll_sent(poll, message_id=10)
    assert await answered(db, USER, poll, 2, True)
    assert await peek(db, "SELECT option_index, option_id, correct FROM quiz_answers") == [(2, "a", 1)]


async def test_latest_answers_keep_only_the_latest_answer_per_question(db, db_path):
    await _quiz(db, ["q-one", "q-two"])
    answers = [
        ("p1", "q-one", "c", False),
        ("p2", "q-two", "a", True),
        ("p3", "q-one", "a", True),
        ("p4", "q-two", "d", False),
    ]
    for poll_id, question, option, correct in answers:
        poll = sent(poll_id, question)
        await db.poll_sent(poll, message_id=None)
        assert await answered(db, USER, poll, OPTIONS.index(option), correct)
    latest = await db.latest_answers(USER)
    assert set(latest) == {("grad", "q-one"), ("grad", "q-two")}
    assert (latest[("grad", "q-one")].option_id, latest[("grad", "q-one")].correct) == ("a", True)
    assert (latest[("grad", "q-two")].option_id, latest[("grad", "q-two")].correct) == ("d", False)
    assert await answers_in(db) == 4


async def test_a_new_round_replaces_the_round_under_way(db):
    await _quiz(db, ["q-one", "q-two"])
    await db.poll_sent(sent("poll-1", "q-one"), message_id=10)
    assert await stored(db, USER, QuizStarted("backward", ("b-one",), 8))
    learner = await db.find_learner(USER)
    assert (learner.quiz_lesson_id, learner.quiz_queue, learner.quiz_poll_id, learner.quiz_seed) == (
        "backward",
        ("b-one",),
        None,
        8,
    )


async def test_questions_that_left_the_lesson_are_dropped_with_the_poll_awaited(db):
    await _quiz(db, ["q-one", "q-two", "q-three"])
    await db.poll_sent(sent("poll-1", "q-one"), message_id=10)
    assert await db.drop_questions(USER, ["q-one", "q-three"]) == ("q-two",)
    learner = await db.find_learner(USER)
    assert (learner.quiz_lesson_id, learner.quiz_queue, learner.quiz_poll_id) == ("grad", ("q-two",), None)
    assert await db.drop_questions(USER, ["q-two"]) == ()
    assert (await db.find_learner(USER)).quiz_lesson_id is None


# Reset.


async def test_reset_clears_progress_and_answers_but_keeps_the_language(db, db_path):
    await db.learner(USER, CHAT, "ru")
    assert await stored(db, USER, LanguageChosen("ru"))
    await show(db, 12, message_id=30)
    assert await stored(db, USER, LessonCompleted("grad"))
    assert await stored(db, USER, QuizStarted("grad", ("q-one", "q-two"), 7))
    poll = sent("poll-1", "q-one")
    await db.poll_sent(poll, message_id=31)
    assert await answered(db, USER, poll, 0, True)
    await db.learner(USER + 1, CHAT + 1, "en")
    await show(db, 3, user=USER + 1)

    await db.reset(USER)

    learner = await db.find_learner(USER)
    assert (learner.language, learner.telegram_language, learner.chat_id) == ("ru", "ru", CHAT)
    assert (learner.lesson_id, learner.reader_message_id, learner.reader_view) == (None, None, None)
    assert (learner.quiz_lesson_id, learner.quiz_queue, learner.quiz_poll_id) == (None, (), None)
    assert await db.progress(USER) == {}
    assert await db.latest_answers(USER) == {}
    assert await answers_in(db) == 0
    assert await db.answered_poll("poll-1") is None
    assert "grad" in await db.progress(USER + 1)


# Backup.


async def test_backup_copies_committed_data_while_another_connection_is_writing(file_db, db_path, tmp_path):
    for user in range(3):
        await file_db.learner(user, CHAT + user, "en")
    await show(file_db, 4, user=0)
    target = tmp_path / "backups" / "copy.sqlite3"
    async with aiosqlite.connect(db_path, isolation_level=None) as writer:
        await writer.execute("BEGIN IMMEDIATE")
        await writer.execute(
            "INSERT INTO learners (user_id, chat_id, created_at, updated_at) VALUES (?, ?, ?, ?)",
            (99, 99, "now", "now"),
        )
        backup(db_path, target)
        await writer.execute("ROLLBACK")
    assert rows(target, "PRAGMA integrity_check") == [("ok",)]
    assert rows(target, "SELECT count(*) FROM learners") == [(3,)]
    assert rows(target, "SELECT user_id, lesson_id, furthest_slide_id FROM lesson_progress") == [(0, "grad", "s4")]
    assert rows(target, "PRAGMA user_version") == [(len(MIGRATIONS),)]
    assert not target.with_name(target.name + ".partial").exists()


async def test_backup_can_be_opened_as_a_database(file_db, db_path, tmp_path):
    await file_db.learner(USER, CHAT, "ru")
    target = tmp_path / "copy.sqlite3"
    backup(db_path, target)
    restored = await Database.open(target)
    try:
        assert (await restored.find_learner(USER)).telegram_language == "ru"
    finally:
        await restored.close()


async def test_backup_replaces_an_older_backup(file_db, db_path, tmp_path):
    target = tmp_path / "copy.sqlite3"
    backup(db_path, target)
    await file_db.learner(USER, CHAT, "en")
    backup(db_path, target)
    assert rows(target, "SELECT count(*) FROM learners") == [(1,)]


def test_backup_of_a_missing_database_is_refused(tmp_path):
    target = tmp_path / "copy.sqlite3"
    with pytest.raises(StorageError) as caught:
        backup(tmp_path / "nothing.sqlite3", target)
    assert "COURSEBOT_DB" in str(caught.value)
    assert not target.exists()


async def test_backup_onto_the_database_itself_is_refused(db_path):
    await created(db_path)
    same = db_path.parent / ".." / db_path.parent.name / db_path.name
    for target in (db_path, same):
        with pytest.raises(StorageError):
            backup(db_path, target)
    assert rows(db_path, "PRAGMA user_version") == [(len(MIGRATIONS),)]


async def test_backup_of_a_database_whose_path_has_a_hash_copies_that_database(tmp_path):
    path = tmp_path / "bot#1" / "coursebot.sqlite3"
    database = await Database.open(path)
    await database.learner(USER, CHAT, "en")
    await database.close()
    target = tmp_path / "copy.sqlite3"
    backup(path, target)
    assert not (tmp_path / "bot").exists()
    assert rows(target, "SELECT count(*) FROM learners") == [(1,)]


# Every value is bound: checked on the source of every module of bot/storage, read as one.

SOURCE = "\n".join(
    line
    for module in sorted(Path(db_module.__file__).parent.glob("*.py"))
    for line in module.read_text(encoding="utf-8").splitlines()
    if line != "from __future__ import annotations"
)
TREE = ast.parse(SOURCE)
SQL_METHODS = {"execute", "executescript", "executemany", "_one", "_all", "one", "all", "write_one", "_write_one"}
SQL_WORD = re.compile(r"\b(PRAGMA|SELECT|INSERT|UPDATE|DELETE|BEGIN|CREATE|COMMIT|ROLLBACK)\b")


def _sql_calls() -> list[ast.Call]:
    return [
        node
        for node in ast.walk(TREE)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in SQL_METHODS
        and node.args
    ]


def _literal_text(node: ast.JoinedStr) -> str:
    return "".join(p.value for p in node.values if isinstance(p, ast.Constant))


def _sql_fstrings() -> list[ast.JoinedStr]:
    """Every f-string of the module that reads like SQL, wherever it is executed."""
    return [node for node in ast.walk(TREE) if isinstance(node, ast.JoinedStr) and SQL_WORD.search(_literal_text(node))]


def test_the_source_check_sees_the_sql():
    assert len(_sql_calls()) >= 25
    assert len(_sql_fstrings()) >= 2


def test_sql_is_never_built_with_percent_format_or_concatenation():
    for call in _sql_calls():
        sql = call.args[0]
        # A Call: a migration script, encoded (the PostgreSQL engine runs it as one simple query).
        assert isinstance(sql, (ast.Constant, ast.Name, ast.JoinedStr, ast.Call)), ast.get_source_segment(SOURCE, call)
    for node in ast.walk(TREE):
        if isinstance(node, ast.BinOp) and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            assert not SQL_WORD.search(node.left.value), ast.get_source_segment(SOURCE, node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
            target = node.func.value
            assert not (isinstance(target, ast.Constant) and SQL_WORD.search(str(target.value))), (
                ast.get_source_segment(SOURCE, node)
            )


def test_only_the_documented_statements_interpolate_values():
    kinds = set()
    for node in _sql_fstrings():
        text = _literal_text(node)
        if "PRAGMA user_version = " in text:
            kinds.add("user_version")
        elif "PRAGMA busy_timeout = " in text:
            kinds.add("busy_timeout")
        elif text.startswith("DELETE FROM ") and " WHERE user_id = ?" in text:
            kinds.add("table loop")
        elif all(_sql_constant(part.value) for part in node.values if isinstance(part, ast.FormattedValue)):
            kinds.add("sql constants")
        else:
            kinds.add(ast.get_source_segment(SOURCE, node))
    assert kinds == {"user_version", "busy_timeout", "table loop", "sql constants"}


def _constant_text(expr: ast.expr) -> str:
    """Return the text of a storage constant an f-string interpolates ("" for anything else)."""
    for node in TREE.body:
        if (
            isinstance(expr, ast.Name)
            and isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == expr.id for t in node.targets)
            and isinstance(node.value, ast.Constant)
        ):
            return str(node.value.value)
    return ""


def _sql_constant(expr: ast.expr) -> bool:
    """Return whether ``expr`` names a module constant of storage holding SQL text (a column list, a query)."""
    return isinstance(expr, ast.Name) and any(
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == expr.id for t in node.targets)
        and expr.id.isupper()
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        for node in TREE.body
    )


def _trusted(expr: ast.expr) -> bool:
    """An interpolation is trusted if it is int(...), a module constant, a migration, or a literal table name."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "int":
        return True
    if (
        isinstance(expr, ast.Subscript)
        and isinstance(expr.value, ast.Name)
        and expr.value.id in {"MIGRATIONS", "migrations"}
    ):
        return True
    if _sql_constant(expr):
        return True
    if isinstance(expr, ast.Name):
        for node in TREE.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == expr.id for t in node.targets):
                return expr.id.isupper() and isinstance(node.value, ast.Constant) and isinstance(node.value.value, int)
        for node in ast.walk(TREE):
            if (
                isinstance(node, (ast.For, ast.AsyncFor))
                and isinstance(node.target, ast.Name)
                and node.target.id == expr.id
            ):
                return isinstance(node.iter, ast.Tuple) and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value.isidentifier()
                    for e in node.iter.elts
                )
    return False


def test_interpolated_sql_only_ever_holds_integers_constants_migrations_or_literal_table_names():
    for node in _sql_fstrings():
        for part in node.values:
            if isinstance(part, ast.FormattedValue):
                assert _trusted(part.value), ast.get_source_segment(SOURCE, node)


def test_every_placeholder_has_a_bound_value():
    checked = 0
    for call in _sql_calls():
        sql = call.args[0]
        if isinstance(sql, ast.Constant):
            text = sql.value
        elif isinstance(sql, ast.JoinedStr):
            # The constants after the literal text, apart from it (a statement may end in a named placeholder).
            text = " ".join(
                [_literal_text(sql)]
                + [_constant_text(part.value) for part in sql.values if isinstance(part, ast.FormattedValue)]
            )
        else:
            continue  # a variable: the helpers _one/_all and the migration script pass SQL through
        params = call.args[1] if len(call.args) > 1 else None
        where = ast.get_source_segment(SOURCE, call)
        if "%s" in text:  # psycopg's own placeholders, in the PostgreSQL engine's fixed statements
            assert isinstance(params, ast.Tuple) and len(params.elts) == text.count("%s"), where
            continue
        if call.func.attr == "executemany":  # its rows are built beside it
            continue
        named = sorted(set(re.findall(r"(?<!:):([a-z_]+)\b", text)))
        if named:
            assert isinstance(params, ast.Dict), where
            assert sorted(k.value for k in params.keys) == named, where
        elif "?" in text:
            assert isinstance(params, ast.Tuple), where
            assert len(params.elts) == text.count("?"), where
            checked += 1
        else:
            assert params is None, where
    assert checked >= 15


# The retention store (migration 10), on both engines: the same queries must keep their promises on each.


def _card(last_review: int | None, due: int, card_id: int = 77) -> dict[str, int | float | str | None]:
    return {
        "card_id": card_id,
        "learner": USER,
        "lesson": "grad",
        "kind": "question",
        "item": f"q{card_id}",
        "state": 1,
        "step": 0,
        "stability": 1.5,
        "difficulty": 5.0,
        "due": due,
        "last_review": last_review,
    }


def _entry(at: int, card_id: int = 77) -> dict[str, int | str | None]:
    return {"card_id": card_id, "learner": USER, "rating": 3, "reviewed_at": at, "duration_ms": None}


async def test_a_card_met_twice_keeps_its_first_review_and_a_replayed_review_logs_nothing_twice(db):
    await db.learner(USER, CHAT, "en")
    assert await stored(db, USER, CardMet(_card(100, 500), _entry(100)), update_id=1)
    assert await stored(db, USER, CardMet(_card(200, 900), _entry(200)), update_id=2)
    store = RetentionStore(db)
    assert (await store.card(USER, 77) or {})["last_review"] == 100
    # Rescheduled from its first review; the same answer again (a replay) finds it changed and writes nothing.
    assert await stored(db, USER, CardReviewed(_card(300, 2000), 100, _entry(300)), update_id=3)
    assert not await stored(db, USER, CardReviewed(_card(300, 2000), 100, _entry(300)), update_id=3)
    assert not await stored(db, USER, CardReviewed(_card(400, 3000), None, _entry(400)), update_id=4)
    assert await stored(db, USER, CardReviewed(_card(400, 3000), None, _entry(400), required=False), update_id=4)
    assert await peek(db, "SELECT reviewed_at, update_id FROM review_log ORDER BY reviewed_at") == [(100, 1), (300, 3)]
    assert [row["card_id"] for row in await store.due_cards(USER, 2000, 10)] == [77]
    assert await store.due_cards(USER, 1999, 10) == []
    assert await stored(db, USER, StreakDay("2026-01-02"), StreakDay("2026-01-02"), StreakDay("2026-01-03"))
    assert await store.streak_days(USER, "2026-01-03") == ["2026-01-03"]


async def test_reminders_are_claimed_once_per_day_and_the_batch_reads_every_learner(db):
    store = RetentionStore(db)
    await db.learner(USER, CHAT, "en")
    await db.learner(USER + 1, CHAT + 1, "de")
    assert await store.set_status(USER, "on", 5000)
    assert not await store.set_status(USER, "off", None, only_from="paused")
    assert await store.set_status(USER, "on", 6000, only_from="on")
    assert await store.due_reminders(6000, 10) == [USER]
    assert await stored(db, USER, ActivityNoted(1000, 600), update_id=1)
    assert await stored(db, USER, ActivityNoted(1500, 600), update_id=2)  # within the step: one row
    await stored(db, USER, CardMet(_card(100, 500), _entry(100)), update_id=1)
    await stored(db, USER, CardMet(_card(100, 9000, card_id=78), _entry(100, card_id=78)), update_id=2)
    first = Claim(USER, "2026-01-02", snoozed=False)
    assert await store.claim([(first, 9000, "on")], 6000) == [first]
    assert await store.claim([(first, 9500, "on")], 6100) == []
    assert await store.unsent(6050) == [first]
    await store.delivered([(first, "sent")])
    assert await store.unsent(7000) == []
    rows = {row.user_id: row for row in await store.reminder_rows([USER, USER + 1], 6000)}
    assert rows[USER].status == "on" and rows[USER].remind_at == 9500 and rows[USER].ignored == 1
    assert rows[USER].activity == (1000,) and rows[USER].cards_due == 1 and rows[USER].next_card_due == 500
    assert rows[USER + 1].status == "unasked" and rows[USER + 1].cards_due == 0
    await store.review_poll_sent("p1", USER, 77, ("a", "b"), 10)
    await store.review_poll_sent("p1", USER, 78, ("b", "a"), 20)
    assert await store.review_poll("p1") == (USER, 78, ("b", "a"))
    assert await stored(db, USER, RemindersOffered(), CompletionCardClaimed(10))
    assert await stored(db, USER, CompletionCardClaimed(11))
    assert await store.offer_and_card(USER) == ("on", True)  # offered only while unasked
    assert await peek(db, f"SELECT completion_card_at FROM learners WHERE user_id = {USER}") == [(10,)]


async def test_activity_is_noted_in_the_updates_write_once_a_step_and_a_replay_notes_nothing_again(db):
    await db.learner(USER, CHAT, "en")
    await db._write_one("UPDATE learners SET reminders_ignored = 3 WHERE user_id = ?", (USER,))

    async def note(at: int, update_id: int, offset: int | None = None) -> bool:
        written = await db.write_outcome(USER, [ActivityNoted(at, 600, offset)], language="en", update_id=update_id)
        assert written.stored
        return written.activity_added

    assert await note(1000, 1, offset=60)  # added: the reminders sent before it answered, the offset set
    assert await peek(db, f"SELECT reminders_ignored, utc_offset FROM learners WHERE user_id = {USER}") == [(0, 60)]
    assert not await note(1500, 2, offset=120)  # within the step: no row, nothing else changes
    assert not await note(5000, 1)  # update 1 replayed much later: keyed, it notes nothing again
    assert await note(5000, 3, offset=120)  # a new update past the step: a row; the first offset stands
    assert await peek(db, f"SELECT at, update_id FROM activity WHERE user_id = {USER} ORDER BY at") == [
        (1000, 1),
        (5000, 3),
    ]
    assert await peek(db, f"SELECT utc_offset FROM learners WHERE user_id = {USER}") == [(60,)]
    # Read with the learner's row: their rhythm, the activity from the window's start on.
    found = await db.learner_at(USER, 2000)
    assert found is not None
    assert found[2] == Rhythm(reminders="unasked", utc_offset_minutes=60, completion_card_sent=False, activity=(5000,))
    assert (await db.learner_at(USER, 0))[2].activity == (1000, 5000)  # type: ignore[index]
    # A write that fails its precondition notes no activity either.
    lost = CardReviewed({**_card(100, 500), "card_id": 4242}, 1, _entry(100, card_id=4242))
    written = await db.write_outcome(USER, [lost, ActivityNoted(9000, 600)], language="en", update_id=4)
    assert not written.stored and not written.activity_added
    assert await peek(db, f"SELECT count(*) FROM activity WHERE user_id = {USER}") == [(2,)]


async def test_a_lessons_state_holds_the_review_cards_of_its_drills(db):
    await db.learner(USER, CHAT, "en")
    drill = {**_card(100, 500), "card_id": 501, "lesson": "grad", "kind": "drill", "item": "d1"}
    question = {**_card(100, 500), "card_id": 502, "lesson": "grad", "kind": "question", "item": "q1"}
    other = {**_card(100, 500), "card_id": 503, "lesson": "other", "kind": "drill", "item": "d1"}
    for card in (drill, question, other):
        assert await stored(db, USER, CardMet(card, _entry(100, card_id=card["card_id"])))
    cards = (await db.lesson_state(USER, "grad")).drill_cards
    assert set(cards) == {501}
    assert ReviewCard.from_columns(cards[501]) == ReviewCard.from_columns(drill)
