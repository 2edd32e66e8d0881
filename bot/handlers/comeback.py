"""What brings a learner back, on every update: cards made from lesson answers, the streak's days, activity for the
reminder's hour, the reminders' offer and the completion card after a lesson, and the review's cards shown.

It sits below every feature and below ``common`` (bot.handlers' own import contract), so every feature reaches it
and ``common.store`` adds its changes to the update's one transaction: a lesson answer's card, a due drill's
review and the day in the streak are written with the answer itself, keyed by the update. What it sends it sends
itself (``_send``), since ``common`` sits above it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from telegram import Message, Update
from telegram.constants import ParseMode, PollType
from telegram.error import TelegramError

from bot import logs, render, retention_render
from bot.changes import (
    ActivityNoted,
    CardMet,
    CardReviewed,
    Change,
    CompletionCardClaimed,
    Event,
    LessonCompleted,
    RemindersOffered,
    StreakDay,
)
from bot.context import CourseContext
from bot.course.model import ChoiceDrill, ParsonsDrill
from bot.i18n import current_language
from bot.learner import EventKind
from bot.render import Screen
from bot.retention import deeplinks, plan, reminders, review
from bot.retention.completion_card import completion_card
from bot.retention.plan import Status, reminder_state
from bot.retention.review import CardKey, ItemKind, ReviewCard
from bot.retention.streak import Streak, streak
from bot.shuffle import new_seed, shuffled
from bot.states import Stage, stage
from bot.storage.retention import RetentionStore

log = logging.getLogger(__name__)

STREAK_LOOKBACK = dt.timedelta(days=400)
# Cards read to find the first one that can still be shown (an item may have left the course since).
LOOK_AHEAD = 50


def _store(context: CourseContext) -> RetentionStore:
    return RetentionStore(context.services.db)


def _now(context: CourseContext) -> dt.datetime:
    return context.services.db.clock()


def _epoch(moment: dt.datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp())


async def _send(context: CourseContext, screen: Screen) -> Message:
    return await context.bot.send_message(
        context.learner.chat_id, screen.text, parse_mode=ParseMode.HTML, reply_markup=screen.buttons
    )


# Activity and the streak


def activity(context: CourseContext) -> list[ActivityNoted]:
    """Return the learner's activity to note in the update's write: none when the update noted it already, or when
    activity is noted within the step before now (the update's snapshot says so: no read, and no write)."""
    notes = _notes.get()
    if notes is not None and notes.activity_noted:
        return []
    now, rhythm = _now(context), context.snapshot.rhythm
    at, step = int(now.timestamp()), int(plan.ACTIVITY_STEP.total_seconds())
    if any(moment > at - step for moment in rhythm.activity):
        return []
    offset = None
    if rhythm.utc_offset_minutes is None:
        offset = _utc_offset(context.services.time_zone(context.learner.user_id), now)
    return [ActivityNoted(at, step, offset)]


async def activity_stored(context: CourseContext, noted: Sequence[ActivityNoted], added: bool) -> None:
    """Note that the update's write held its activity; when it added a row (the learner's habit changed), plan
    their next reminder again: a read and a write once a step (ACTIVITY_STEP), none on the taps in between."""
    if not noted:
        return
    notes = _notes.get()
    if notes is not None:
        notes.activity_noted = True
    if not added:
        return
    context.snapshot.noted_activity(noted[-1].at, noted[-1].utc_offset)
    store, now, user_id = _store(context), _now(context), context.learner.user_id
    row = await store.reminder_row(user_id, int(now.timestamp()))
    if row is not None and row.status == Status.ON:
        await store.plan(user_id, _epoch(plan.next_at(reminder_state(row), now)))


async def note_activity(context: CourseContext) -> None:
    """Note that the learner did something now, if no write of the update did (common.for_learner calls it last):
    a write of its own only when activity is due (once a step)."""
    noted = activity(context)
    if not noted:
        return
    written = await context.services.db.write_outcome(
        context.learner.user_id, noted, language=current_language(), update_id=logs.UPDATE_ID.get()
    )
    await activity_stored(context, noted, written.activity_added)


def _utc_offset(zone: str | None, now: dt.datetime) -> int | None:
    """Return the offset of time zone ``zone`` from UTC at ``now``, in minutes; None for none or an unknown one."""
    if not zone:
        return None
    try:
        offset = ZoneInfo(zone).utcoffset(now)
    except (ZoneInfoNotFoundError, ValueError):
        log.info("unknown time zone %r reported", zone)
        return None
    return None if offset is None else int(offset.total_seconds() // 60)


async def local_day(context: CourseContext, now: dt.datetime) -> dt.date:
    """Return the learner's local day at ``now`` (from their time zone, or from their night): from the update's
    snapshot, which holds their time zone and recent activity (no read)."""
    rhythm = context.snapshot.rhythm
    offset = None if rhythm.utc_offset_minutes is None else dt.timedelta(minutes=rhythm.utc_offset_minutes)
    moments = (dt.datetime.fromtimestamp(at, dt.UTC) for at in rhythm.activity)
    return reminders.local_day(now, reminders.habit(moments, now, offset))


async def current_streak(context: CourseContext) -> Streak:
    """Return the learner's streak as of today."""
    today = await local_day(context, _now(context))
    days = await _store(context).streak_days(context.learner.user_id, (today - STREAK_LOOKBACK).isoformat())
    return streak((dt.date.fromisoformat(day) for day in days), today)


def _finishes(change_or_event: Change | Event) -> bool:
    """Whether a change or event finishes something: a lesson, a drill solved, an exercise passed."""
    if isinstance(change_or_event, LessonCompleted):
        return True
    if isinstance(change_or_event, Event):
        if change_or_event.kind is EventKind.DRILL:
            return change_or_event.verdict == "right"
        if change_or_event.kind is EventKind.RUN:
            return change_or_event.verdict == "passed"
    return False


async def changes_for(context: CourseContext, changes: Sequence[Change], events: Sequence[Event]) -> list[Change]:
    """Return what the update's changes and events mean for review and the streak, to store with them.

    A Quick Check answer or a drill's graded answer makes the item's card (the first answer is its first review); a
    drill answered while its card is due reviews the card (how a Parsons card is reviewed); finishing something
    counts the day. A finished lesson offers reminders (once, while never asked) and, when it finishes the course,
    claims the completion card: both are marks in the learner's row, written with the answer that finished it, so a
    replay of that update finds them made; what they send goes out after the update's screens (``follow_up``).
    """
    more: list[Change] = []
    now, user_id = _now(context), context.learner.user_id
    for event in events:
        if event.kind not in (EventKind.ANSWER, EventKind.DRILL) or event.item_id is None:
            continue
        kind = ItemKind.QUESTION if event.kind is EventKind.ANSWER else ItemKind.DRILL
        key = CardKey(event.lesson_id, kind, event.item_id)
        right = event.verdict == "right"
        card_id = review.card_id(user_id, key)
        # A drill's card comes with the lesson's drills, which the drill's flow read already.
        row = await context.snapshot.drill_card(event.lesson_id, card_id) if kind is ItemKind.DRILL else None
        if row is not None:
            card = ReviewCard.from_columns(row)
            if card.due_at <= now:
                reviewed, entry = review.review(card, right, now)
                more.append(CardReviewed(reviewed.columns(), card.last_review, entry.columns(), required=False))
            continue
        met, entry = review.meet(user_id, key, right, now)
        more.append(CardMet(met.columns(), entry.columns()))
    if any(_finishes(item) for item in (*changes, *events)):
        more.append(StreakDay((await local_day(context, now)).isoformat()))
    completed = {change.lesson_id for change in changes if isinstance(change, LessonCompleted)}
    if completed:
        more.extend(await _after_lessons(context, completed, now))
    return more


async def _after_lessons(context: CourseContext, completed: set[str], now: dt.datetime) -> list[Change]:
    """Return the marks that finishing the lessons ``completed`` makes: the reminders' offer, the completion card."""
    status, card_sent = await _store(context).offer_and_card(context.learner.user_id)
    marks: list[Change] = []
    if status == Status.UNASKED:
        marks.append(RemindersOffered())
    if not card_sent:
        progress = await context.snapshot.all_progress()
        done = {lesson_id for lesson_id, item in progress.items() if stage(item) is Stage.DONE} | completed
        if all(item.id in done for item in context.course.lessons):
            marks.append(CompletionCardClaimed(int(now.timestamp())))
    return marks


@dataclass
class _Notes:
    """What one update stored that something follows (the offer, the card, the review's next card), done once the
    update's own screens are out; and whether one of its writes noted the learner's activity. One per update,
    shared with the tasks the update starts (they copy the context it is in)."""

    stored: list[Change] = field(default_factory=list)
    activity_noted: bool = False


_notes: ContextVar[_Notes | None] = ContextVar("comeback_notes", default=None)


def begin_update() -> None:
    """Start noting what this update stores (common.for_learner calls it before the handler)."""
    _notes.set(_Notes())


def stored(changes: Sequence[Change]) -> None:
    """Note changes just stored: ``follow_up`` acts on them once the update's screens are shown."""
    notes = _notes.get()
    if notes is not None:
        notes.stored.extend(
            change for change in changes if isinstance(change, RemindersOffered | CompletionCardClaimed | CardReviewed)
        )


async def follow_up(context: CourseContext) -> None:
    """After the update's screens: the offer and the card after a lesson, the review's next card after a due drill.

    Each follows a mark its update stored (a replay whose update was stored before stores nothing, and sends none).
    """
    notes = _notes.get()
    if notes is None or not notes.stored:
        return
    changes, notes.stored[:] = list(notes.stored), []
    if any(isinstance(change, RemindersOffered) for change in changes):
        await _send(context, retention_render.reminder_offer())
    if any(isinstance(change, CompletionCardClaimed) for change in changes):
        await send_completion_card(context)
    if any(isinstance(change, CardReviewed) for change in changes):
        await next_card(context)


# After the course


async def send_completion_card(context: CourseContext) -> None:
    """Send the completion card: the course's title, the learner's first name and the date, with a share link."""
    link = deeplinks.url(context.bot.username)
    day = await local_day(context, _now(context))
    try:
        chat = await context.bot.get_chat(context.learner.chat_id)
        first_name = chat.first_name
    except TelegramError as exc:
        log.info("no first name for user %s's card: %s", context.learner.user_id, exc)
        first_name = None
    course = context.course
    # Drawing takes a moment: off the event loop (the thread keeps the update's language, a context variable).
    png = await asyncio.to_thread(completion_card, course.title, first_name, day, len(course.lessons), link)
    try:
        await context.bot.send_photo(context.learner.chat_id, png, caption=retention_render.card_caption(link))
    except TelegramError as exc:
        log.warning("the completion card of user %s was not sent: %s", context.learner.user_id, exc)


# Reminders on and off


async def turn_reminders_on(context: CourseContext) -> None:
    """Turn the learner's reminders on and plan the first."""
    store, now, user_id = _store(context), _now(context), context.learner.user_id
    row = await store.reminder_row(user_id, int(now.timestamp()))
    if row is not None:
        state = dataclasses.replace(reminder_state(row), status=Status.ON, ignored=0)
        await store.set_status(user_id, Status.ON, _epoch(plan.next_at(state, now)))


# The review


async def start_review(update: Update, context: CourseContext) -> None:
    """Start a review of the cards due now, or say when the next one is due."""
    store, user_id, now = _store(context), context.learner.user_id, _now(context)
    cards = [ReviewCard.from_columns(row) for row in await store.cards(user_id)]
    summary = review.summary(cards, now)
    if not summary.due:
        await _send(context, retention_render.nothing_due(review.next_due(cards), now))
        return
    await store.start_review(user_id, new_seed() or 1)
    await _send(context, retention_render.review_intro(summary.due))
    await next_card(context)


async def next_card(context: CourseContext) -> None:
    """Show the most overdue card that can be shown, or close the review when none is left."""
    store, user_id, now = _store(context), context.learner.user_id, _now(context)
    seed = await store.review_seed(user_id)
    if not seed:
        return  # no review under way (stopped, or a drill reviewed in its lesson): nothing more to show
    for row in await store.due_cards(user_id, int(now.timestamp()), LOOK_AHEAD):
        if await _present(context, ReviewCard.from_columns(row), seed):
            return
    await store.start_review(user_id, 0)
    cards = [ReviewCard.from_columns(row) for row in await store.cards(user_id)]
    await _send(context, retention_render.review_done(review.next_due(cards), now))


async def _present(context: CourseContext, card: ReviewCard, seed: int) -> bool:
    """Send one card in a freshly shuffled order; False if its item is no longer in the course (it is skipped)."""
    lesson = context.course.lesson(card.key.lesson)
    if lesson is None:
        return False
    if card.key.kind is ItemKind.QUESTION:
        question = lesson.question(card.key.item)
        if question is None:
            return False
        spec = render.poll(question, tuple(shuffled(len(question.options), f"{seed}:{card.id}")))
        try:
            message = await context.bot.send_poll(
                context.learner.chat_id,
                spec.question,
                list(spec.options),
                is_anonymous=False,
                type=PollType.QUIZ,
                correct_option_ids=[spec.correct],  # type: ignore[list-item]
                explanation=spec.explanation,
            )
        except TelegramError as exc:
            log.warning("review poll for card %s of user %s not sent: %s", card.id, context.learner.user_id, exc)
            return False
        if message.poll is None:
            return False
        await _store(context).review_poll_sent(
            message.poll.id, context.learner.user_id, card.id, spec.option_ids, int(_now(context).timestamp())
        )
        return True
    drill = lesson.drill(card.key.item)
    if isinstance(drill, ChoiceDrill):
        order = shuffled(len(drill.choices), f"{seed}:{card.id}")
        await _send(context, retention_render.choice_card(lesson, drill, card.id, order, card.last_review))
        return True
    if isinstance(drill, ParsonsDrill):
        await _send(context, retention_render.parsons_card(lesson, drill))
        return True
    return False


async def reviewed(context: CourseContext, card: ReviewCard, right: bool) -> bool:
    """Reschedule a card after a review answer, in the update's one write; False if it was answered meanwhile."""
    now = _now(context)
    rescheduled, entry = review.review(card, right, now)
    changes: list[Change] = [CardReviewed(rescheduled.columns(), card.last_review, entry.columns())]
    changes.append(StreakDay((await local_day(context, now)).isoformat()))
    noted = activity(context)
    written = await context.services.db.write_outcome(
        context.learner.user_id, [*changes, *noted], (), language=current_language(), update_id=logs.UPDATE_ID.get()
    )
    if written.stored:
        await activity_stored(context, noted, written.activity_added)
    return written.stored


async def answer_review_poll(update: Update, context: CourseContext) -> bool:
    """Take a poll answer for a review card; False if the poll is not a review's (then it is a lesson's)."""
    answer = update.poll_answer
    if answer is None:
        return False
    store = _store(context)
    found = await store.review_poll(answer.poll_id)
    if found is None:
        return False
    user_id, card_id, shown = found
    if user_id != context.learner.user_id or not answer.option_ids:
        return True
    row = await store.card(user_id, card_id)
    lesson = context.course.lesson(str(row["lesson"])) if row is not None else None
    question = lesson.question(str(row["item"])) if lesson is not None and row is not None else None
    chosen = answer.option_ids[0]
    if row is None or question is None or not 0 <= chosen < len(shown):
        return True
    if await reviewed(context, ReviewCard.from_columns(row), shown[chosen] == question.correct_id):
        await next_card(context)
    return True
