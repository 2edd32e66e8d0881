"""/review: the cards due now, most overdue first, one at a time; each answer reschedules its card (FSRS).

A Quick Check question comes back as a quiz poll, a fill-in or predict drill as a screen with its choices as
buttons, both in an order drawn afresh for this review. A Parsons drill opens its drill screen; its first
graded answer while the card is due is the review. The learner can stop at any moment (the intro's Stop
button): the cards left stay due. Cards are made here too, when a learner first answers an item in a lesson.
"""

from __future__ import annotations

import datetime as dt
import logging

from telegram import Update
from telegram.constants import PollType
from telegram.error import TelegramError
from telegram.ext import BaseHandler, CallbackQueryHandler, CommandHandler, filters

from bot import commands, render, retention_render
from bot.callbacks import ReviewChoice, StartReview, StopReview, matches
from bot.context import CourseContext
from bot.course.model import ChoiceDrill, Lesson, ParsonsDrill
from bot.handlers.common import button, for_learner, reply, send, show_in_tapped
from bot.handlers.habits import finished_something
from bot.i18n import _
from bot.retention import review
from bot.retention.review import CardKey, ItemKind, ReviewCard
from bot.shuffle import new_seed, shuffled
from bot.storage.retention import RetentionStore

log = logging.getLogger(__name__)

# Cards read to find the first one that can still be shown (an item may have left the course since).
LOOK_AHEAD = 50


def _store(context: CourseContext) -> RetentionStore:
    return RetentionStore(context.services.db)


def _now(context: CourseContext) -> dt.datetime:
    return context.services.db.clock()


async def meet(
    context: CourseContext, lesson_id: str, kind: ItemKind, item: str, right: bool, update_id: int | None = None
) -> None:
    """Make the card of an item the learner just answered in a lesson for the first time; that answer is its first
    review. An item answered before keeps its card as it is: only /review reviews it."""
    key = CardKey(lesson_id, kind, item)
    card, entry = review.meet(context.learner.user_id, key, right, _now(context))
    await _store(context).meet_card(card.columns(), entry.columns(), update_id)


async def drill_answered(
    context: CourseContext, lesson: Lesson, drill_id: str, right: bool, update_id: int | None = None
) -> None:
    """A drill graded in its own screen: make its card, or review it when it is due (a Parsons card is reviewed so)."""
    store = _store(context)
    key = CardKey(lesson.id, ItemKind.DRILL, drill_id)
    row = await store.card(context.learner.user_id, review.card_id(context.learner.user_id, key))
    if row is None:
        await meet(context, lesson.id, ItemKind.DRILL, drill_id, right, update_id)
        return
    card = ReviewCard.from_columns(row)
    if card.due_at <= _now(context) and await _review(context, card, right, update_id):
        await next_card(context)


async def _review(context: CourseContext, card: ReviewCard, right: bool, update_id: int | None) -> bool:
    """Reschedule a card after an answer; False if another answer rescheduled it first (a double tap, a replay)."""
    reviewed, entry = review.review(card, right, _now(context))
    stored = await _store(context).review_card(reviewed.columns(), card.last_review, entry.columns(), update_id)
    if stored:
        await finished_something(context)
    return stored


async def start(update: Update, context: CourseContext) -> None:
    """Start a review of the cards due now, or say when the next one is due."""
    store, user_id, now = _store(context), context.learner.user_id, _now(context)
    due = await store.due_cards(user_id, int(now.timestamp()), LOOK_AHEAD)
    if not due:
        cards = [ReviewCard.from_columns(row) for row in await store.cards(user_id)]
        await reply(update, context, retention_render.nothing_due(review.next_due(cards), now))
        return
    await store.start_review(user_id, new_seed() or 1)
    summary = review.summary([ReviewCard.from_columns(row) for row in await store.cards(user_id)], now)
    await reply(update, context, retention_render.review_intro(summary.due))
    await next_card(context)


async def next_card(context: CourseContext) -> None:
    """Show the most overdue card that can be shown, or close the review when none is left."""
    store, user_id, now = _store(context), context.learner.user_id, _now(context)
    seed = await store.review_seed(user_id)
    if not seed:
        return  # no review under way (stopped): an answer reschedules its card and shows nothing more
    for row in await store.due_cards(user_id, int(now.timestamp()), LOOK_AHEAD):
        if await _present(context, ReviewCard.from_columns(row), seed):
            return
    await store.start_review(user_id, 0)
    cards = [ReviewCard.from_columns(row) for row in await store.cards(user_id)]
    await send(context, context.learner.chat_id, retention_render.review_done(review.next_due(cards), now))


async def _present(context: CourseContext, card: ReviewCard, seed: int) -> bool:
    """Send one card; False if its item is no longer in the course (it is skipped)."""
    lesson = context.course.lesson(card.key.lesson)
    if lesson is None:
        return False
    chat_id = context.learner.chat_id
    if card.key.kind is ItemKind.QUESTION:
        question = lesson.question(card.key.item)
        if question is None:
            return False
        order = tuple(shuffled(len(question.options), f"{seed}:{card.id}"))
        spec = render.poll(question, order)
        try:
            message = await context.bot.send_poll(
                chat_id,
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
        choices = shuffled(len(drill.choices), f"{seed}:{card.id}")
        await send(context, chat_id, retention_render.choice_card(lesson, drill, card.id, choices, card.last_review))
        return True
    if isinstance(drill, ParsonsDrill):
        # Put in order on its own screen: the drill's first graded answer while due is the review.
        await send(context, chat_id, retention_render.parsons_card(lesson, drill))
        return True
    return False


async def answer_poll(update: Update, context: CourseContext) -> bool:
    """Take a poll answer for a review card; False if the poll is not a review's (a lesson's Quick Check)."""
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
    right = shown[chosen] == question.correct_id
    if await _review(context, ReviewCard.from_columns(row), right, update.update_id):
        await next_card(context)
    return True


@for_learner
async def review_command(update: Update, context: CourseContext) -> None:
    """Start the review (/review)."""
    await start(update, context)


@button(StartReview)
async def start_review(update: Update, context: CourseContext, data: StartReview) -> str | None:
    """Start the review from a button (a reminder, /progress)."""
    await start(update, context)
    return None


@button(StopReview)
async def stop_review(update: Update, context: CourseContext, data: StopReview) -> str | None:
    """Stop the review: the cards left stay due."""
    await _store(context).start_review(context.learner.user_id, 0)
    await show_in_tapped(update, context, retention_render.review_stopped())
    return None


@button(ReviewChoice)
async def review_choice(update: Update, context: CourseContext, data: ReviewChoice) -> str | None:
    """Take a tapped choice of a drill's review card: reschedule the card, show the answer, then the next card."""
    row = await _store(context).card(context.learner.user_id, data.card)
    if row is None:
        return _("This card is no longer in your review.")
    card = ReviewCard.from_columns(row)
    if (card.last_review or 0) % retention_render.SEEN_MODULO != data.seen:
        return _("This card was answered already.")
    lesson = context.course.lesson(card.key.lesson)
    drill = lesson.drill(card.key.item) if lesson is not None else None
    if lesson is None or not isinstance(drill, ChoiceDrill) or not 0 <= data.choice < len(drill.choices):
        return _("This card is no longer in your review.")
    if not await _review(context, card, data.choice == drill.correct, update.update_id):
        return _("This card was answered already.")
    await show_in_tapped(update, context, retention_render.choice_answered(lesson, drill, data.choice))
    await next_card(context)
    return None


def handlers() -> list[BaseHandler[Update, CourseContext, None]]:
    """Return this feature's handlers."""
    return [
        CommandHandler(commands.REVIEW.name, review_command, filters=filters.ChatType.PRIVATE),
        CallbackQueryHandler(start_review, pattern=matches(StartReview)),
        CallbackQueryHandler(stop_review, pattern=matches(StopReview)),
        CallbackQueryHandler(review_choice, pattern=matches(ReviewChoice)),
    ]
