"""The course menu: /start, /lessons, Continue, opening a lesson."""

from __future__ import annotations

import logging

from telegram import Update

from bot import commands, render, retention_render
from bot.callbacks import Continue, OpenLesson, ShowMenu
from bot.context import CourseContext
from bot.flows import reading
from bot.flows.outcome import Outcome, Show, lesson_gone
from bot.handlers import comeback, polls
from bot.handlers.common import carry_out, reply, tapped_message
from bot.handlers.router import Router
from bot.i18n import _
from bot.learner import ReaderView
from bot.navigation import Place, resume, slide_index
from bot.retention import deeplinks

log = logging.getLogger(__name__)

router = Router("course")


async def _menu_screen(context: CourseContext, *, welcome: bool) -> render.Screen:
    progress = await context.snapshot.all_progress()
    where = resume(context.course, progress, context.learner.lesson_id)
    return render.menu(context.course, progress, where, welcome=welcome)


@router.command(commands.START)
async def start(update: Update, context: CourseContext) -> None:
    """Welcome the learner and show the course with one button to start or continue; a link's payload
    (``/start <lesson>``, ``/start review``) opens what it names, an unknown one the menu with a short note."""
    match deeplinks.parse(" ".join(context.args or ()) or None, context.course):
        case deeplinks.OpenLesson(lesson_id):
            lesson = context.course.lesson(lesson_id)
            if lesson is not None:
                await _open(
                    update, context, Place(lesson, slide_index(lesson, await context.snapshot.progress(lesson_id)))
                )
                return
        case deeplinks.OpenReview():
            await comeback.start_review(update, context)
            return
        case deeplinks.UnknownLink(why, payload):
            log.info("start link %r of user %s leads nowhere (%s)", payload, context.learner.user_id, why)
            await reply(update, context, render.notice(retention_render.unknown_link()))
    await reply(update, context, await _menu_screen(context, welcome=True))


@router.command(commands.LESSONS)
async def lessons(update: Update, context: CourseContext) -> None:
    """Show the course menu."""
    await reply(update, context, await _menu_screen(context, welcome=False))


async def _show_menu_here(update: Update, context: CourseContext) -> None:
    menu = await _menu_screen(context, welcome=False)
    await carry_out(update, context, Outcome(screens=(Show(menu, reader=ReaderView.MENU),)), feature="menu")


@router.button(ShowMenu)
async def show_menu(update: Update, context: CourseContext, data: ShowMenu) -> None:
    """Turn the tapped message into the course menu."""
    await _show_menu_here(update, context)


async def _open(update: Update, context: CourseContext, place: Place) -> str | None:
    saved = await context.snapshot.progress(place.lesson.id)
    tapped = tapped_message(update)
    outcome = reading.open_place(context.course, context.learner, place, saved, tapped.message_id if tapped else None)
    await carry_out(update, context, outcome, feature="open")
    if outcome.resume is not None:
        return await polls.resume(update, context, place.lesson, asked=outcome.resume.asked)
    return outcome.toast


@router.button(Continue)
async def continue_course(update: Update, context: CourseContext, data: Continue) -> str | None:
    """Go exactly where the learner left off."""
    place = resume(context.course, await context.snapshot.all_progress(), context.learner.lesson_id)
    if place is None:
        await _show_menu_here(update, context)
        return _("You finished the course. Open any lesson to review it.")
    return await _open(update, context, place)


@router.button(OpenLesson)
async def open_lesson(update: Update, context: CourseContext, data: OpenLesson) -> str | None:
    """Open a lesson at the learner's place in it."""
    lesson = context.course.lesson(data.lesson)
    if lesson is None:
        return lesson_gone()
    place = Place(lesson, slide_index(lesson, await context.snapshot.progress(lesson.id)))
    return await _open(update, context, place)
