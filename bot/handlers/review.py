"""/review: the cards due now, most overdue first, one at a time; each answer reschedules its card (FSRS).

A Quick Check question comes back as a quiz poll, a fill-in or predict drill as a screen with its choices as
buttons, both in an order drawn afresh for this review; a Parsons drill opens its drill screen, whose first graded
answer while the card is due is the review. The learner can stop at any moment: the cards left stay due. Showing
the cards and taking poll answers is bot.handlers.comeback's (the quiz's poll answers reach it too).
"""

from __future__ import annotations

from telegram import Update

from bot import commands, retention_render
from bot.callbacks import ReviewChoice, StartReview, StopReview
from bot.context import CourseContext
from bot.course.model import ChoiceDrill
from bot.handlers import comeback
from bot.handlers.common import show_in_tapped
from bot.handlers.router import Router
from bot.i18n import _
from bot.retention.review import ReviewCard
from bot.storage.retention import RetentionStore

router = Router("review")


@router.command(commands.REVIEW)
async def review_command(update: Update, context: CourseContext) -> None:
    """Start the review (/review)."""
    await comeback.start_review(update, context)


@router.button(StartReview)
async def start_review(update: Update, context: CourseContext, data: StartReview) -> str | None:
    """Start the review from a button (a reminder, /progress)."""
    await comeback.start_review(update, context)
    return None


@router.button(StopReview)
async def stop_review(update: Update, context: CourseContext, data: StopReview) -> str | None:
    """Stop the review: the cards left stay due."""
    await RetentionStore(context.services.db).start_review(context.learner.user_id, 0)
    await show_in_tapped(update, context, retention_render.review_stopped())
    return None


@router.button(ReviewChoice)
async def review_choice(update: Update, context: CourseContext, data: ReviewChoice) -> str | None:
    """Take a tapped choice of a drill's review card: reschedule the card, show the answer, then the next card."""
    row = await RetentionStore(context.services.db).card(context.learner.user_id, data.card)
    if row is None:
        return _("This card is no longer in your review.")
    card = ReviewCard.from_columns(row)
    if (card.last_review or 0) % retention_render.SEEN_MODULO != data.seen:
        return _("This card was answered already.")
    lesson = context.course.lesson(card.key.lesson)
    drill = lesson.drill(card.key.item) if lesson is not None else None
    if lesson is None or not isinstance(drill, ChoiceDrill) or not 0 <= data.choice < len(drill.choices):
        return _("This card is no longer in your review.")
    if not await comeback.reviewed(context, card, data.choice == drill.correct):
        return _("This card was answered already.")
    await show_in_tapped(update, context, retention_render.choice_answered(lesson, drill, data.choice))
    await comeback.next_card(context)
    return None
