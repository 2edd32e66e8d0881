"""Learning events: recorded with their update's outcome (Database.store) once per update, kept
COURSEBOT_EVENTS_DAYS days and purged at start and daily on an injected clock (no test waits for a day to pass);
and recorded where learners act, through the real bot."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot import events
from bot.changes import Event
from bot.learner import EventKind
from bot.storage.db import Database
from tests.conftest import course_content, peek
from tests.journey import send_and_wait, solve_drills, tap_and_wait_edit, tap_and_wait_message
from tests.outcomes import stored
from tests.test_storage import rows

START = dt.datetime(2026, 3, 1, 9, 0, tzinfo=dt.UTC)
USER = 4242
CONTENT = course_content()
FIRST = CONTENT.english.lessons[0]


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: dt.datetime = START):
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def db(store: Path | str, clock: Clock) -> AsyncIterator[Database]:
    """The database, once on each engine (tests/conftest.py: store)."""
    database = await Database.open(store, clock=clock, events_days=30)
    yield database
    await database.close()


async def events_in(db: Database, columns: str = "kind, item_id") -> list[tuple]:
    return await peek(db, f"SELECT {columns} FROM events ORDER BY id")


def events_of(path: Path, columns: str = "kind, item_id") -> list[tuple]:
    return rows(path, f"SELECT {columns} FROM events ORDER BY id")


async def record(db: Database, event: Event, *, user: int = USER, update_id: int | None = None) -> None:
    """Record one event as the only thing an update stores."""
    assert await stored(db, user, events=(event,), update_id=update_id)


async def slide(db: Database, slide_id: str, lesson: str = "grad") -> None:
    await record(db, Event(EventKind.SLIDE, lesson, item_id=slide_id))


async def test_an_event_is_one_row_with_the_contracts_columns(db):
    answer = Event(EventKind.ANSWER, "grad", item_id="second-pass", option_id="twelve", verdict="right")
    assert await stored(db, USER, events=(answer,), language="ru")
    # As the practice's verdict records a run.
    run = Event(EventKind.RUN, "grad", item_id="exercise", verdict="failed", failed_check="x")
    assert await stored(db, USER, events=(run,), language="ru")
    assert await events_in(db, "user_id, at, language, lesson_id, kind, item_id, option_id, verdict, failed_check") == [
        (USER, "2026-03-01T09:00:00.000+00:00", "ru", "grad", "answer", "second-pass", "twelve", "right", None),
        (USER, "2026-03-01T09:00:00.000+00:00", "ru", "grad", "run", "exercise", None, "failed", "x"),
    ]
    if db.path is not None:
        indexes = {r[0] for r in rows(db.path, "SELECT name FROM sqlite_master WHERE tbl_name = 'events'")}
    else:
        indexes = {r[0] for r in await peek(db, "SELECT indexname FROM pg_indexes WHERE tablename = 'events'")}
    assert {"events_by_lesson", "events_by_user"} <= indexes


async def test_a_slide_records_the_time_spent_on_the_previous_slide_of_the_lesson(db, clock):
    await slide(db, "s1")
    clock.advance(12.5)
    await slide(db, "s2")
    clock.advance(40)
    # Back to s1, recorded as the handler does: the slide shown, then the slide gone back from.
    await slide(db, "s1")
    await record(db, Event(EventKind.BACK, "grad", item_id="s2"))
    clock.advance(3)
    await slide(db, "s2")
    assert await events_in(db, "kind, item_id, seconds") == [
        ("slide", "s1", None),
        ("slide", "s2", 12.5),
        ("slide", "s1", 40.0),
        ("back", "s2", None),
        ("slide", "s2", 3.0),
    ]


async def test_time_on_a_slide_is_not_counted_across_other_work_or_another_lesson(db, clock):
    await slide(db, "s1")
    clock.advance(30)
    await record(db, Event(EventKind.HINT, "grad", item_id="1"))
    clock.advance(30)
    await slide(db, "s2")
    await slide(db, "a1", lesson="backward")
    clock.advance(10)
    await slide(db, "s3")
    await record(db, Event(EventKind.SLIDE, "grad", item_id="s1"), user=USER + 1)
    assert [r[0] for r in await events_in(db, "seconds")] == [None, None, None, None, None, None]


async def test_no_event_is_recorded_while_events_are_kept_zero_days(tmp_path):
    database = await Database.open(tmp_path / "none.sqlite3", events_days=0)
    try:
        assert await stored(database, USER, events=(Event(EventKind.DONE, "grad"),))
    finally:
        await database.close()
    assert events_of(tmp_path / "none.sqlite3") == []


async def test_an_updates_events_are_recorded_once_however_often_it_is_replayed(db, clock):
    tap = (Event(EventKind.SLIDE, "grad", item_id="s2"), Event(EventKind.BACK, "grad", item_id="s3"))
    done = Event(EventKind.DONE, "grad")  # no item: still one per update
    for _replay in range(2):
        assert await stored(db, USER, events=(*tap, done), update_id=71)
        clock.advance(5)
    # Another update doing the same, and the same update id from another learner, are events of their own.
    assert await stored(db, USER, events=tap, update_id=72)
    assert await stored(db, USER + 1, events=tap, update_id=71)
    assert await events_in(db, "user_id, update_id, kind, item_id") == [
        (USER, 71, "slide", "s2"),
        (USER, 71, "back", "s3"),
        (USER, 71, "done", None),
        (USER, 72, "slide", "s2"),
        (USER, 72, "back", "s3"),
        (USER + 1, 71, "slide", "s2"),
        (USER + 1, 71, "back", "s3"),
    ]
    # Without an update id (an update that did not come through the inbox, never replayed) each write records.
    await record(db, Event(EventKind.HINT, "grad", item_id="1"))
    await record(db, Event(EventKind.HINT, "grad", item_id="1"))
    assert await peek(db, "SELECT count(*) FROM events WHERE kind = 'hint' AND update_id IS NULL") == [(2,)]


async def test_events_older_than_the_days_kept_are_purged_on_the_databases_clock(db, clock):
    await slide(db, "old")
    clock.advance(dt.timedelta(days=20).total_seconds())
    await slide(db, "newer")
    clock.advance(dt.timedelta(days=10, seconds=1).total_seconds())  # "old" is now 30 days and 1 s old
    assert await db.purge_events() == 1
    assert await events_in(db) == [("slide", "newer")]
    assert await db.purge_events() == 0


async def test_the_purge_runs_at_start_and_then_once_a_day(db, clock):
    await slide(db, "a")
    clock.advance(dt.timedelta(days=29).total_seconds())
    await slide(db, "b")
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(seconds)
        if len(slept) == 3:
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await events.purge_daily(db, sleep)
    assert slept == [86400.0] * 3
    # Purged at start (day 29: nothing expired), day 30 (a is exactly 30 days old: kept) and day 31 (a goes).
    assert await events_in(db) == [("slide", "b")]


# Through the bot: every place a learner acts records its event.


async def test_a_learner_taking_a_lesson_leaves_its_events_in_their_language(bot, standin, clock):
    bot.db.clock = clock
    lesson = CONTENT.course("ru").lessons[0]
    ada = standin.learner(user_id=USER, language_code="ru")
    menu = await send_and_wait(ada, "/start")
    message = await tap_and_wait_edit(ada, menu, menu["reply_markup"]["inline_keyboard"][0][0]["text"])
    for label, seconds in (("Далее", 20), ("Назад", 7), ("Далее", 2)):
        await standin.settle()  # the event is recorded after the edit: let it land before the clock moves
        clock.advance(seconds)
        message = await tap_and_wait_edit(ada, message, label)
    for _turn in range(len(lesson.slides) - 2):
        message = await tap_and_wait_edit(ada, message, "Далее")
    last = message
    poll = await tap_and_wait_message(ada, last, "Мини-тест", lambda m: "poll" in m)
    question = lesson.quiz[0]
    wrong = next(i for i in range(4) if i != poll["poll"]["correct_option_ids"][0])
    wrong_text = poll["poll"]["options"][wrong]["text"]
    since = ada.cursor()
    await ada.answer_poll(poll, wrong)
    for _question in lesson.quiz[1:]:
        poll = await ada.wait_message(lambda m: "poll" in m, since=since)
        since = ada.cursor()
        await ada.answer_poll(poll, poll["poll"]["correct_option_ids"][0])
    result = await ada.wait_message(lambda m: "reply_markup" in m, since=since)
    retake = await tap_and_wait_message(ada, result, "↻", lambda m: "poll" in m)
    since = ada.cursor()
    await ada.answer_poll(retake, retake["poll"]["correct_option_ids"][0])
    again = await ada.wait_message(lambda m: "reply_markup" in m, since=since)
    await solve_drills(ada, again, lesson)
    intro = await tap_and_wait_message(ada, again, "💻")
    hint = await tap_and_wait_message(ada, intro, "💡")
    await tap_and_wait_message(ada, hint, "Выйти из практики")
    await standin.settle()

    found = events_of(bot.db.path, "language, lesson_id, kind, item_id, option_id, verdict, seconds")
    assert {(r[0], r[1]) for r in found} == {("ru", FIRST.id)}
    kinds = [r[2] for r in found]
    slides = [r for r in found if r[2] == "slide"]
    assert [r[3] for r in slides] == [s.id for s in FIRST.slides[:2]] + [FIRST.slides[0].id] + [
        s.id for s in FIRST.slides[1:]
    ]
    assert [r[6] for r in slides[:4]] == [None, 20.0, 7.0, 2.0]
    assert [(r[3]) for r in found if r[2] == "back"] == [FIRST.slides[1].id]
    answers = [r for r in found if r[2] == "answer"]
    assert [(r[3], r[5]) for r in answers] == [(question.id, "wrong")] + [(q.id, "right") for q in lesson.quiz[1:]] + [
        (question.id, "right")
    ]
    by_text = dict(zip(question.options, question.option_ids, strict=True))
    assert answers[0][4] == by_text[wrong_text] != question.correct_id  # the option tapped, by its id
    assert kinds.count("retake") == 1 and kinds.count("done") == 1
    drills = [(r[3], r[5]) for r in found if r[2] == "drill"]
    assert drills == [(drill.id, "right") for drill in lesson.drills]
    # Done once, when the last drill was solved: the Quick Check was answered before.
    assert kinds.index("retake") < kinds.index("done") == len(kinds) - 1 - kinds[::-1].index("drill") + 1
    assert [r[3] for r in found if r[2] == "hint"] == ["1"]
    assert kinds[-1] == "leave"
