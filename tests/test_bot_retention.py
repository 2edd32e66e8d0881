"""Review, reminders, /settings, links and the completion card through the real bot, the stand-in and a real SQLite
file, on a clock the test moves (no test sleeps for a schedule)."""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from bot.app import CourseBot
from bot.config import Config
from bot.localapi.floodlimit import FloodLimit
from bot.retention import plan
from bot.storage.retention import RetentionStore
from tests.botprocess import wait_until
from tests.conftest import course_content
from tests.journey import (
    answer_quiz,
    button_texts,
    buttons,
    read_slides,
    send_and_wait,
    solve_drill,
    solve_drills,
    tap_and_wait_edit,
    tap_and_wait_message,
)

CONTENT = course_content()
ENGLISH = CONTENT.english
FIRST = ENGLISH.lessons[0]
START = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)


class Clock:
    """The bot's clock in these tests: it moves only when the test moves it."""

    def __init__(self, now: dt.datetime = START):
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += dt.timedelta(**delta)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@asynccontextmanager
async def bot_on(config: Config, clock: Clock) -> AsyncIterator[CourseBot]:
    """The bot on the test's clock; its reminder sweep runs only when the test calls it."""
    async with CourseBot(config, clock=clock, sweep_every_minute=False) as bot:
        yield bot


def rows(db_path: Path, sql: str, *params: object) -> list[tuple]:
    with sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True) as conn:
        found = conn.execute(sql, params).fetchall()
    conn.close()
    return found


async def finish_first_lesson(learner) -> dict:
    """Read lesson 1, answer its Quick Check and solve its drills; return the reminders' offer that follows."""
    menu = await send_and_wait(learner, "/start")
    last = await read_slides(learner, await tap_and_wait_edit(learner, menu, "Start the course"), FIRST)
    result = await answer_quiz(learner, last, FIRST, wrong={0})
    since = learner.cursor()
    await solve_drills(learner, result, FIRST)
    return await learner.wait_message(lambda m: "Yes, remind me" in str(m.get("reply_markup")), since=since)


def reminders_sent(chat) -> list[dict]:
    return [m for m in chat.messages if "waiting" in m.get("text", "")]


async def test_the_first_finished_lesson_offers_reminders_once_and_a_sweep_sends_one_a_day(standin, config, clock):
    learner = standin.learner(501)
    async with bot_on(config, clock) as bot:
        offer = await finish_first_lesson(learner)
        # Every question and drill met became a card, its first answer its first review.
        cards = rows(config.db_path, "SELECT kind, state FROM review_cards WHERE user_id = 501")
        assert len(cards) == len(FIRST.quiz) + len(FIRST.drills)
        assert len(rows(config.db_path, "SELECT 1 FROM review_log WHERE user_id = 501")) == len(cards)
        # Nothing on by default.
        assert rows(config.db_path, "SELECT reminders, remind_at FROM learners WHERE user_id = 501") == [
            ("offered", None)
        ]
        await tap_and_wait_edit(learner, offer, "Yes, remind me")
        [(status, remind_at)] = rows(config.db_path, "SELECT reminders, remind_at FROM learners WHERE user_id = 501")
        assert status == "on" and remind_at is not None
        due = dt.datetime.fromtimestamp(remind_at, dt.UTC)
        # No habit yet: about 23.5 hours after the session (± the 10 minutes of spread), on the first day on which
        # something waits: the card answered wrong comes back a day after that answer.
        [(first_due,)] = rows(config.db_path, "SELECT min(due) FROM review_cards WHERE user_id = 501")
        assert due.timestamp() >= first_due
        off_anchor = (due - START - dt.timedelta(hours=23, minutes=30)) % dt.timedelta(days=1)
        assert min(off_anchor, dt.timedelta(days=1) - off_anchor) <= dt.timedelta(minutes=10)
        assert bot.sweep is not None
        clock.now = due - dt.timedelta(seconds=1)
        assert (await bot.sweep.once()).sent == 0
        clock.now = due
        report = await bot.sweep.once()
        assert report.sent == 1
        chat = learner
        [reminder] = reminders_sent(chat)
        # It says what waits (the card missed in the Quick Check is due) and opens it in one tap; Snooze and Stop.
        assert "card" in reminder["text"]
        assert button_texts(reminder) == ["▶ Review now", "⏰ Later", "🔕 Stop reminders"]
        assert (await bot.sweep.once()).sent == 0  # once a day
        clock.advance(hours=2)
        assert (await bot.sweep.once()).sent == 0
        review = await tap_and_wait_message(learner, reminder, "▶ Review now")
        assert "Review:" in review["text"]


async def test_a_restart_exactly_at_the_due_moment_sends_the_reminder_once(standin, config, clock):
    learner = standin.learner(502)
    async with bot_on(config, clock):
        offer = await finish_first_lesson(learner)
        await tap_and_wait_edit(learner, offer, "Yes, remind me")
    [(remind_at,)] = rows(config.db_path, "SELECT remind_at FROM learners WHERE user_id = 502")
    clock.now = dt.datetime.fromtimestamp(remind_at, dt.UTC)
    sent = 0
    for _ in range(3):  # three starts at the same due moment, each sweeping twice
        async with bot_on(config, clock) as bot:
            assert bot.sweep is not None
            sent += (await bot.sweep.once()).sent + (await bot.sweep.once()).sent
    assert sent == 1
    assert len(reminders_sent(learner)) == 1
    assert rows(config.db_path, "SELECT count(*), min(outcome) FROM reminders_sent WHERE user_id = 502") == [
        (1, "sent")
    ]


async def test_a_learner_who_blocked_the_bot_gets_no_reminder_even_after_unblocking(standin, config, clock):
    learner = standin.learner(503)
    async with bot_on(config, clock) as bot:
        offer = await finish_first_lesson(learner)
        await tap_and_wait_edit(learner, offer, "Yes, remind me")
        learner.block()
        await wait_until(
            lambda: rows(config.db_path, "SELECT reminders FROM learners WHERE user_id = 503") == [("blocked",)],
            "the my_chat_member update turned reminders off",
        )
        assert rows(config.db_path, "SELECT reminders, remind_at FROM learners WHERE user_id = 503") == [
            ("blocked", None)
        ]
        learner.unblock()
        clock.advance(days=2)
        assert bot.sweep is not None
        assert (await bot.sweep.once()).sent == 0
        assert reminders_sent(learner) == []


async def test_a_403_from_telegram_turns_reminders_off_for_good(standin, config, clock):
    learner = standin.learner(504)
    async with bot_on(config, clock) as bot:
        offer = await finish_first_lesson(learner)
        await tap_and_wait_edit(learner, offer, "Yes, remind me")
    # Blocked while the bot was down: no my_chat_member reaches it, only the 403 of its next send.
    learner._state.blocked = True
    [(remind_at,)] = rows(config.db_path, "SELECT remind_at FROM learners WHERE user_id = 504")
    clock.now = dt.datetime.fromtimestamp(remind_at, dt.UTC)
    async with bot_on(config, clock) as bot:
        assert bot.sweep is not None
        report = await bot.sweep.once()
        assert (report.sent, report.blocked) == (0, 1)
        clock.advance(days=3)
        assert (await bot.sweep.once()).sent == 0
    assert rows(config.db_path, "SELECT reminders, remind_at FROM learners WHERE user_id = 504") == [("blocked", None)]


async def test_review_serves_due_cards_most_overdue_first_and_each_answer_reschedules_its_card(standin, config, clock):
    learner = standin.learner(505)
    async with bot_on(config, clock):
        await finish_first_lesson(learner)
        nothing = await send_and_wait(learner, "/review")
        assert "Nothing is due for review now." in nothing["text"] and "The next card is due" in nothing["text"]
        clock.advance(days=40)
        before = dict(rows(config.db_path, "SELECT card_id, due FROM review_cards WHERE user_id = 505"))
        since = learner.cursor()
        await learner.send("/review")
        intro = await learner.wait_message(lambda m: "Review:" in m.get("text", ""), since=since)
        assert f"{len(before)} cards are due" in intro["text"]
        poll = await learner.wait_message(lambda m: "poll" in m, since=since)
        # The most overdue card comes first: the Quick Check question answered wrong in the lesson (Again).
        [(most_overdue_item,)] = rows(
            config.db_path,
            "SELECT item_id FROM review_cards WHERE user_id = 505 ORDER BY due, lesson_id, kind, item_id LIMIT 1",
        )
        assert most_overdue_item == FIRST.quiz[0].id
        assert poll["poll"]["question"] == FIRST.quiz[0].question
        since = learner.cursor()
        await learner.answer_poll(poll, poll["poll"]["correct_option_ids"][0])
        await learner.wait_message(since=since)
        after = dict(rows(config.db_path, "SELECT card_id, due FROM review_cards WHERE user_id = 505"))
        moved = [card for card in before if after[card] != before[card]]
        assert len(moved) == 1 and after[moved[0]] > int(clock.now.timestamp())
        log = rows(config.db_path, "SELECT rating FROM review_log WHERE card_id = ? ORDER BY id", moved[0])
        assert log == [(1,), (3,)]  # Again in the lesson, Good in the review
        # Stop partway: the cards left stay due.
        stop = next(m for m in reversed(learner.messages) if "Stop the review" in str(m.get("reply_markup")))
        stopped = await tap_and_wait_edit(learner, stop, "⏹ Stop the review")
        assert "Review stopped" in stopped["text"]
        still_due = rows(
            config.db_path,
            "SELECT count(*) FROM review_cards WHERE user_id = 505 AND due <= ?",
            int(clock.now.timestamp()),
        )
        assert still_due == [(len(before) - 1,)]


async def test_start_links_open_a_lesson_the_review_or_the_menu_with_a_note(standin, config, clock):
    learner = standin.learner(506)
    async with bot_on(config, clock):
        lesson = ENGLISH.lessons[1]
        opened = await send_and_wait(learner, f"/start {lesson.id}")
        assert [b["callback_data"] for b in buttons(opened) if b["callback_data"].startswith("s:")] == [
            f"s:{lesson.id}:{lesson.slides[1].id}"
        ]  # the lesson's first slide, whose only way on is its second
        review = await send_and_wait(learner, "/start review")
        assert "You have no review cards yet" in review["text"]
        for payload in ("no-such-lesson", "bad payload!!", "x" * 65):
            since = learner.cursor()
            await learner.send(f"/start {payload}")
            await learner.wait_message(lambda m: "That link does not lead anywhere" in m.get("text", ""), since=since)
            await learner.wait_message(lambda m: "Continue" in str(m.get("reply_markup")), since=since)


async def test_settings_turns_reminders_on_moves_the_hour_and_stops_them(standin, config, clock):
    learner = standin.learner(507)
    async with bot_on(config, clock):
        await finish_first_lesson(learner)
        settings = await send_and_wait(learner, "/settings")
        assert "Daily reminders are off." in settings["text"]
        settings = await tap_and_wait_edit(learner, settings, "🔔 Turn reminders on")
        assert "Daily reminders are on" in settings["text"]
        [(planned,)] = rows(config.db_path, "SELECT remind_at FROM learners WHERE user_id = 507")
        settings = await tap_and_wait_edit(learner, settings, "An hour later ⏩")
        assert "Moved by +1 hour." in settings["text"]
        [(later, shift)] = rows(config.db_path, "SELECT remind_at, reminder_shift FROM learners WHERE user_id = 507")
        assert shift == 60 and later == planned + 3600
        settings = await tap_and_wait_edit(learner, settings, "At my usual time")
        assert rows(config.db_path, "SELECT remind_at FROM learners WHERE user_id = 507") == [(planned,)]
        await learner.tap(settings, "🔕 Stop reminders")
        await wait_until(
            lambda: rows(config.db_path, "SELECT reminders FROM learners WHERE user_id = 507") == [("off",)],
            "Stop turned reminders off",
        )
        assert rows(config.db_path, "SELECT reminders, remind_at FROM learners WHERE user_id = 507") == [("off", None)]


async def test_ten_thousand_due_reminders_go_out_under_the_limit_and_every_429_is_waited_out(standin, config, clock):
    # The stand-in's flood limit on the test's clock, a little stricter than the sender's pace: 429s come.
    standin.flood = FloodLimit(clock=lambda: clock.now.timestamp(), overall_per_second=25.0, overall_burst=25.0)
    count = 10_000
    for user_id in range(1_000_000, 1_000_000 + count):
        standin.learner(user_id)._state.known = True  # as if each had written to the bot once
    async with bot_on(config, clock) as bot:
        now = int(clock.now.timestamp())
        # The bot may be writing as it starts: take the write lock first (BEGIN IMMEDIATE waits for it), since a
        # deferred transaction's first insert can meet a newer snapshot and fail at once, without waiting.
        conn = sqlite3.connect(config.db_path, timeout=60, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        with conn:
            conn.executemany(
                "INSERT INTO learners (user_id, chat_id, created_at, updated_at, reminders, remind_at)"
                " VALUES (?, ?, 'x', 'x', 'on', ?)",
                [(u, u, now) for u in range(1_000_000, 1_000_000 + count)],
            )
            conn.executemany(
                "INSERT INTO lesson_progress (user_id, lesson_id) VALUES (?, ?)",
                [(u, FIRST.id) for u in range(1_000_000, 1_000_000 + count)],
            )
        conn.close()

        async def sleep(seconds: float) -> None:
            clock.advance(seconds=seconds)

        assert bot.sweep is not None
        bot.sweep.sleep = sleep
        bot.sweep.sender._sleep = sleep
        report = await bot.sweep.once()
    assert report.sent == count and report.failed == 0 and report.blocked == 0
    assert standin.flood.refused > 0 and report.retries == standin.flood.refused  # each 429 waited out, then resent
    delivered = sum(1 for call in standin.calls_to("sendMessage") if call.ok)
    assert delivered == count
    assert rows(config.db_path, "SELECT count(*) FROM reminders_sent WHERE outcome = 'sent'") == [(count,)]


async def test_after_five_ignored_reminders_they_pause_with_a_neutral_note_and_settings_turns_them_on(
    standin, config, clock
):
    learner = standin.learner(508)
    async with bot_on(config, clock) as bot:
        offer = await finish_first_lesson(learner)
        await tap_and_wait_edit(learner, offer, "Yes, remind me")
        assert bot.sweep is not None
        sent = 0
        for _ in range(12):  # days pass, the learner never answers
            [(remind_at,)] = rows(config.db_path, "SELECT remind_at FROM learners WHERE user_id = 508")
            if remind_at is None:
                break
            clock.now = dt.datetime.fromtimestamp(remind_at, dt.UTC)
            sent += (await bot.sweep.once()).sent
        assert sent == 5
        assert rows(config.db_path, "SELECT reminders, remind_at FROM learners WHERE user_id = 508") == [
            ("paused", None)
        ]
        note = learner.messages[-1]
        assert "paused" in note["text"] and "/settings" in note["text"]
        for word in ("streak", "lose", "miss"):
            assert word not in note["text"].lower()
        settings = await send_and_wait(learner, "/settings")
        settings = await tap_and_wait_edit(learner, settings, "🔔 Turn reminders on")
        assert "Daily reminders are on" in settings["text"]
        assert rows(config.db_path, "SELECT reminders, reminders_ignored FROM learners WHERE user_id = 508") == [
            ("on", 0)
        ]


async def test_snooze_brings_the_reminder_back_later_the_same_day(standin, config, clock):
    learner = standin.learner(509)
    async with bot_on(config, clock) as bot:
        offer = await finish_first_lesson(learner)
        await tap_and_wait_edit(learner, offer, "Yes, remind me")
        [(remind_at,)] = rows(config.db_path, "SELECT remind_at FROM learners WHERE user_id = 509")
        clock.now = dt.datetime.fromtimestamp(remind_at, dt.UTC)
        assert bot.sweep is not None
        assert (await bot.sweep.once()).sent == 1
        [reminder] = reminders_sent(learner)
        query = await learner.tap(reminder, "⏰ Later")
        toast = (await learner.wait_callback_answer(query))["text"]
        assert toast.startswith("I will remind you again in")
        [(snoozed_at, snoozed)] = rows(
            config.db_path, "SELECT remind_at, remind_snoozed FROM learners WHERE user_id = 509"
        )
        assert snoozed == 1 and snoozed_at == remind_at + 2 * 3600
        clock.now = dt.datetime.fromtimestamp(snoozed_at, dt.UTC)
        assert (await bot.sweep.once()).sent == 1
        assert len(reminders_sent(learner)) == 2


async def test_the_web_chats_time_zone_sets_the_learners_utc_offset(standin, config, clock):
    learner = standin.learner(510)
    async with CourseBot(config, clock=clock, sweep_every_minute=False, time_zone=lambda user_id: "Asia/Tokyo"):
        await send_and_wait(learner, "/start")
        await wait_until(
            lambda: rows(config.db_path, "SELECT utc_offset FROM learners WHERE user_id = 510") == [(540,)],
            "the browser's time zone reached the learner's row",
        )


async def test_a_review_goes_through_every_kind_of_card_and_ends_saying_when_the_next_is_due(standin, config, clock):
    learner = standin.learner(511)
    async with bot_on(config, clock):
        await finish_first_lesson(learner)
        clock.advance(days=60)
        since = learner.cursor()
        await learner.send("/review")
        kinds = []
        for _ in range(len(FIRST.quiz) + len(FIRST.drills)):
            card = await learner.wait_message(
                lambda m: "poll" in m or "Review ·" in m.get("text", "") or "Review done" in m.get("text", ""),
                since=since,
            )
            since = learner.cursor()
            if "poll" in card:
                kinds.append("question")
                await learner.answer_poll(card, card["poll"]["correct_option_ids"][0])
                continue
            choices = [b for b in buttons(card) if b["callback_data"].startswith("rc:")]
            if choices:
                shown = {b["text"] for b in choices}
                drill = next(d for d in FIRST.drills if d.kind != "parsons" and set(d.choices) == shown)
                kinds.append(drill.kind)
                right = next(b for b in choices if b["text"] == drill.choices[drill.correct])
                answered = await tap_and_wait_edit(learner, card, right["text"])
                assert "✅ Right." in answered["text"] and "rc:" not in str(answered.get("reply_markup"))
                continue
            # A Parsons card opens its drill: the first graded answer there is the review.
            kinds.append("parsons")
            drill = next(d for d in FIRST.drills if d.kind == "parsons")
            screen = await tap_and_wait_edit(learner, card, "▶ Open the drill")
            if any(b["callback_data"].startswith(f"dm:{FIRST.id}:{drill.id}:a") for b in buttons(screen)):
                screen = await tap_and_wait_edit(
                    learner, screen, next(b["text"] for b in buttons(screen) if ":a" in b["callback_data"])
                )
            await solve_drill(learner, screen, FIRST, drill)
        assert sorted(kinds) == sorted(["question"] * len(FIRST.quiz) + [d.kind for d in FIRST.drills])
        done = await learner.wait_message(lambda m: "Review done" in m.get("text", ""), since=since - 1)
        assert "The next card is due" in done["text"]
        now = int(clock.now.timestamp())
        assert rows(config.db_path, "SELECT count(*) FROM review_cards WHERE user_id = 511 AND due <= ?", now) == [(0,)]
        # Every card: its first answer in the lesson, then this review (Good, right the first time).
        log = rows(config.db_path, "SELECT rating, count(*) FROM review_log WHERE user_id = 511 GROUP BY rating")
        assert dict(log)[3] >= len(kinds)


async def test_the_first_update_of_a_new_step_notes_activity_and_plans_the_reminder_again_the_rest_write_none(
    standin, config, clock
):
    learner = standin.learner(511)

    def activity() -> list[tuple]:
        return rows(config.db_path, "SELECT at FROM activity WHERE user_id = 511 ORDER BY at")

    async with bot_on(config, clock) as bot:
        await finish_first_lesson(learner)
        settings = await send_and_wait(learner, "/settings")
        await tap_and_wait_edit(learner, settings, "🔔 Turn reminders on")
        await standin.settle()
        noted = activity()
        assert noted, "the lesson's updates noted the learner's activity"
        [(planned,)] = rows(config.db_path, "SELECT remind_at FROM learners WHERE user_id = 511")
        # Within the step: no activity row, and the reminder stays as planned.
        clock.advance(minutes=2)
        await send_and_wait(learner, "/progress")
        await standin.settle()
        assert activity() == noted
        assert rows(config.db_path, "SELECT remind_at FROM learners WHERE user_id = 511") == [(planned,)]
        # A day and a half later, at another hour: the update notes it, and the reminder is planned from the habit
        # with it (as the sweep would plan it from the stored record now).
        clock.advance(hours=30)
        await send_and_wait(learner, "/progress")
        await standin.settle()
        assert activity() == [*noted, (int(clock.now.timestamp()),)]
        row = await RetentionStore(bot.db).reminder_row(511, int(clock.now.timestamp()))
        assert row is not None and row.ignored == 0
        expected = plan.next_at(plan.reminder_state(row), clock.now)
        assert expected is not None and expected > clock.now
        assert rows(config.db_path, "SELECT remind_at FROM learners WHERE user_id = 511") == [
            (int(expected.timestamp()),)
        ]
