"""Reading a lesson: one slide at a time, in one message edited in place (decided by bot.flows.reading)."""

from __future__ import annotations

from telegram import Update

from bot.callbacks import ShowSlide
from bot.context import CourseContext
from bot.flows import reading
from bot.flows.outcome import lesson_gone
from bot.handlers.common import carry_out, tapped_message
from bot.handlers.router import Router

router = Router("lessons")


@router.button(ShowSlide)
async def show_slide(update: Update, context: CourseContext, data: ShowSlide) -> str | None:
    """Turn to the slide a Back or Next button names, by its id, unless that would skip an unread slide."""
    lesson = context.course.lesson(data.lesson)
    if lesson is None:
        return lesson_gone()
    saved = await context.snapshot.progress(lesson.id)
    successor = None
    if lesson.slide_index(data.slide) is None:
        # A slide removed since the button was made: the one that stands in its place, as for a learner on it.
        successor = await context.services.db.successor_of_removed_slide(lesson.id, data.slide)
    tapped = tapped_message(update)
    outcome = reading.turn(
        context.course, context.learner, lesson, saved, data.slide, successor, tapped.message_id if tapped else None
    )
    await carry_out(update, context, outcome, feature="slide")
    return outcome.toast
