"""Reading a lesson: one slide at a time, in one message edited in place."""

from __future__ import annotations

from collections.abc import Mapping

from telegram import Update
from telegram.ext import BaseHandler, CallbackQueryHandler

from bot import render
from bot.callbacks import ShowSlide, matches
from bot.context import CourseContext
from bot.handlers.common import button, lesson_gone, record, show_in_tapped, tapped_message
from bot.handlers.practice import leave_other_practice
from bot.handlers.quiz import resume_quiz
from bot.i18n import _
from bot.learner import NOT_STARTED, EventKind, LessonProgress, ReaderView
from bot.navigation import Place, can_show, reached_after, slide_index
from bot.states import QuizRound, Stage, quiz_round, stage


async def open_place(
    update: Update, context: CourseContext, place: Place, progress: Mapping[str, LessonProgress]
) -> str | None:
    """Show ``place`` in the tapped message, or take the learner back into a Quick Check under way."""
    await leave_other_practice(context, place.lesson.id)
    saved = progress.get(place.lesson.id, NOT_STARTED)
    if stage(saved) is Stage.QUIZ and quiz_round(context.learner, place.lesson.id) is not QuizRound.NONE:
        return await resume_quiz(update, context, place.lesson)
    await _show_slide(update, context, place, saved)
    return None


def _already_shown(context: CourseContext, message_id: int | None, place: Place, saved: LessonProgress) -> bool:
    learner = context.learner
    return (
        message_id is not None
        and learner.reader_message_id == message_id
        and learner.reader_view is ReaderView.SLIDE
        and learner.lesson_id == place.lesson.id
        and saved.started
        and saved.slide_id == place.lesson.slides[place.slide].id
    )


async def _show_slide(update: Update, context: CourseContext, place: Place, saved: LessonProgress) -> None:
    tapped = tapped_message(update)
    if _already_shown(context, tapped.message_id if tapped else None, place, saved):
        return  # the second tap of a double tap: the slide is on screen already
    lesson, index = place.lesson, place.slide
    screen = render.slide(context.course, lesson, index, done=stage(saved) is Stage.DONE)
    message_id = await show_in_tapped(update, context, screen)
    # Recorded after the edit, so a failed edit never moves the learner.
    await context.services.db.show_slide(
        context.learner.user_id,
        lesson.id,
        lesson.slides[index].id,
        furthest_slide_id=reached_after(lesson, saved, index),
        last=index == lesson.last_slide,
        message_id=message_id,
    )
    await record(context, EventKind.SLIDE, lesson.id, item_id=lesson.slides[index].id)
    if saved.started and context.learner.lesson_id == lesson.id and index < slide_index(lesson, saved):
        # After the slide's own event, so its time on screen counts from when it was shown.
        await record(context, EventKind.BACK, lesson.id, item_id=saved.slide_id)


@button(ShowSlide)
async def show_slide(update: Update, context: CourseContext, data: ShowSlide) -> str | None:
    """Turn to the slide a Back or Next button names, by its id, unless that would skip an unread slide."""
    lesson = context.course.lesson(data.lesson)
    if lesson is None:
        return lesson_gone()
    saved = (await context.services.db.progress(context.learner.user_id)).get(lesson.id, NOT_STARTED)
    index = lesson.slide_index(data.slide)
    toast = None
    if index is None:
        # A slide removed since the button was made: the one that stands in its place, as for a learner on it.
        successor = await context.services.db.successor_of_removed_slide(lesson.id, data.slide)
        index = lesson.slide_index(successor) if successor is not None else None
        toast = _("That slide was taken out of the lesson. Here is the one that follows it.")
    if index is None or not can_show(lesson, saved, index):
        # A forged, unknown or out-of-date button: show the learner's real place instead.
        await _show_slide(update, context, Place(lesson, slide_index(lesson, saved)), saved)
        return _("That button is out of date. Here is where you are.")
    await _show_slide(update, context, Place(lesson, index), saved)
    return toast


def handlers() -> list[BaseHandler[Update, CourseContext, None]]:
    """Return this feature's handlers."""
    return [CallbackQueryHandler(show_slide, pattern=matches(ShowSlide))]
