"""The course menu: /start, /lessons, Continue, opening a lesson."""

from __future__ import annotations

import logging

from telegram import Update
from telegram.ext import BaseHandler, CallbackQueryHandler, CommandHandler, filters

from bot import commands, render, retention_render
from bot.callbacks import Continue, OpenLesson, ShowMenu, matches
from bot.context import CourseContext
from bot.handlers import review
from bot.handlers.common import button, for_learner, lesson_gone, reply, show_in_tapped
from bot.handlers.lessons import open_place
from bot.i18n import _
from bot.learner import NOT_STARTED, ReaderView
from bot.navigation import Place, resume, slide_index
from bot.retention import deeplinks

log = logging.getLogger(__name__)


async def _menu_screen(context: CourseContext, *, welcome: bool) -> render.Screen:
    learner = context.learner
    progress = await context.services.db.progress(learner.user_id)
    return render.menu(context.course, progress, resume(context.course, progress, learner.lesson_id), welcome=welcome)


@for_learner
async def start(update: Update, context: CourseContext) -> None:
    """Welcome the learner and show the course with one button to start or continue; a link's payload
    (``/start <lesson>``, ``/start review``) opens what it names, an unknown one the menu with a note."""
    link = deeplinks.parse(" ".join(context.args or ()) or None, context.course)
    match link:
        case deeplinks.OpenLesson(lesson_id):
            lesson = context.course.lesson(lesson_id)
            if lesson is not None:
                progress = await context.services.db.progress(context.learner.user_id)
                place = Place(lesson, slide_index(lesson, progress.get(lesson.id, NOT_STARTED)))
                await open_place(update, context, place, progress)
                return
        case deeplinks.OpenReview():
            await review.start(update, context)
            return
        case deeplinks.UnknownLink(why, payload):
            log.info("start link %r of user %s leads nowhere (%s)", payload, context.learner.user_id, why)
            await reply(update, context, render.notice(retention_render.unknown_link()))
    await reply(update, context, await _menu_screen(context, welcome=True))


@for_learner
async def lessons(update: Update, context: CourseContext) -> None:
    """Show the course menu."""
    await reply(update, context, await _menu_screen(context, welcome=False))


async def _show_menu_here(update: Update, context: CourseContext) -> None:
    message_id = await show_in_tapped(update, context, await _menu_screen(context, welcome=False))
    await context.services.db.set_reader_message(context.learner.user_id, message_id, ReaderView.MENU)


@button(ShowMenu)
async def show_menu(update: Update, context: CourseContext, data: ShowMenu) -> None:
    """Turn the tapped message into the course menu."""
    await _show_menu_here(update, context)


@button(Continue)
async def continue_course(update: Update, context: CourseContext, data: Continue) -> str | None:
    """Go exactly where the learner left off."""
    learner = context.learner
    progress = await context.services.db.progress(learner.user_id)
    place = resume(context.course, progress, learner.lesson_id)
    if place is None:
        await _show_menu_here(update, context)
        return _("You finished the course. Open any lesson to review it.")
    return await open_place(update, context, place, progress)


@button(OpenLesson)
async def open_lesson(update: Update, context: CourseContext, data: OpenLesson) -> str | None:
    """Open a lesson at the learner's place in it."""
    lesson = context.course.lesson(data.lesson)
    if lesson is None:
        return lesson_gone()
    progress = await context.services.db.progress(context.learner.user_id)
    place = Place(lesson, slide_index(lesson, progress.get(lesson.id, NOT_STARTED)))
    return await open_place(update, context, place, progress)


def handlers() -> list[BaseHandler[Update, CourseContext, None]]:
    """Return this feature's handlers."""
    private = filters.ChatType.PRIVATE
    return [
        CommandHandler(commands.START.name, start, filters=private),
        CommandHandler(commands.LESSONS.name, lessons, filters=private),
        CallbackQueryHandler(show_menu, pattern=matches(ShowMenu)),
        CallbackQueryHandler(continue_course, pattern=matches(Continue)),
        CallbackQueryHandler(open_lesson, pattern=matches(OpenLesson)),
    ]
