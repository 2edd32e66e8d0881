"""Drills: put lines in order, fill in a blank, predict an output, in one message edited in place as the learner taps.

The rules are in bot/drills.py and the screens in bot/render.py; here a tap is read, checked against the
stored attempt (taps from an older screen are stale, taps this bot never offered are refused), applied,
stored, and the same message redrawn. A Parsons order other than the author's is run in the runner.
"""

from __future__ import annotations

import logging

from telegram import Update
from telegram.ext import BaseHandler, CallbackQueryHandler

from bot import drills, feedback, render
from bot.callbacks import DrillTap, ShowDrill, StartDrills, matches
from bot.content.model import ChoiceDrill, Drill, Lesson, ParsonsDrill
from bot.context import CourseContext
from bot.drills import FRESH, DrillProgress, Move, Refusal, Verdict
from bot.handlers.common import button, button_refused, lesson_gone, send, show_in_tapped
from bot.i18n import _
from bot.navigation import unanswered
from runner.client import RunnerBusy, RunnerError

log = logging.getLogger(__name__)


def drill_gone() -> str:
    """Return the toast for a button naming a drill the lesson no longer has."""
    return _("This drill is no longer in the lesson. Send /lessons to see the course.")


async def finish_if_done(context: CourseContext, lesson: Lesson) -> bool:
    """Mark the lesson done once its slides are read, questions answered and drills solved; True if it just was."""
    db, user_id = context.services.db, context.learner.user_id
    solved = (await db.drills_solved(user_id)).get(lesson.id, set())
    if not drills.lesson_finished(lesson, await db.latest_answers(user_id), solved):
        return False
    return await db.complete_lesson(user_id, lesson.id)


async def _screen(
    context: CourseContext, lesson: Lesson, drill: Drill, progress: DrillProgress, verdict: Verdict | None = None
) -> render.Screen:
    db, user_id = context.services.db, context.learner.user_id
    solved = frozenset((await db.drills_solved(user_id)).get(lesson.id, set()))
    if isinstance(drill, ParsonsDrill):
        order = drills.piece_order(drill, user_id, lesson.id)
    else:
        order = drills.choice_order(drill, user_id, lesson.id)
    quiz_left = bool(unanswered(lesson, await db.latest_answers(user_id)))
    view = render.DrillView(progress, order, solved, verdict, quiz_left)
    return render.drill(context.course, lesson, drill, view)


async def _progress(context: CourseContext, lesson: Lesson, drill: Drill) -> DrillProgress:
    return (await context.services.db.drill_progress(context.learner.user_id, lesson.id)).get(drill.id, FRESH)


@button(StartDrills)
async def start_drills(update: Update, context: CourseContext, data: StartDrills) -> str | None:
    """Open a lesson's drills in a new message, at the first one not solved yet."""
    lesson = context.course.lesson(data.lesson)
    if lesson is None or not lesson.drills:
        return lesson_gone()
    solved = (await context.services.db.drills_solved(context.learner.user_id)).get(lesson.id, set())
    first = next((d for d in lesson.drills if d.id not in solved), lesson.drills[0])
    screen = await _screen(context, lesson, first, await _progress(context, lesson, first))
    await send(context, context.learner.chat_id, screen)
    return None


@button(ShowDrill)
async def show_drill(update: Update, context: CourseContext, data: ShowDrill) -> str | None:
    """Show one drill in the tapped message, as the learner left it."""
    lesson = context.course.lesson(data.lesson)
    if lesson is None:
        return lesson_gone()
    drill = lesson.drill(data.drill)
    if drill is None:
        return drill_gone()
    await show_in_tapped(
        update, context, await _screen(context, lesson, drill, await _progress(context, lesson, drill))
    )
    return None


@button(DrillTap)
async def drill_tap(update: Update, context: CourseContext, data: DrillTap) -> str | None:
    """Apply one tap to the learner's attempt, store it, and redraw the drill in the tapped message."""
    lesson = context.course.lesson(data.lesson)
    if lesson is None:
        return lesson_gone()
    drill = lesson.drill(data.drill)
    if drill is None:
        return drill_gone()
    try:
        move = Move(data.move)
    except ValueError:
        log.info("refused drill move %r from user %s", data.move, context.learner.user_id)
        return button_refused()
    before = await _progress(context, lesson, drill)
    verdict: Verdict | None = None
    if move in (Move.CHECK, Move.CHOOSE):
        refusal = drills.answerable(drill, before, move, data.arg, data.turn)
        if refusal is not None:
            return await _refused(update, context, lesson, drill, before, refusal)
        verdict = await _grade(context, drill, before, data.arg)
        if verdict is None:
            return _("Running code is unavailable right now. Please try again later.")
        after = drills.answered(before, verdict, data.arg if move is Move.CHOOSE else None)
        # LEAD (contract 3): record a 'drill' event here once the state helper's recording API is on main:
        # kind="drill", lesson_id=lesson.id, item_id=drill.id, verdict="right" if verdict.right else "wrong".
    else:
        applied = drills.apply(drill, before, move, data.arg, data.turn)
        if isinstance(applied, Refusal):
            return await _refused(update, context, lesson, drill, before, applied)
        after = applied
    if not await context.services.db.save_drill(context.learner.user_id, lesson.id, drill.id, before, after):
        # Another tap changed the attempt first: show it as it now stands.
        return await _refused(update, context, lesson, drill, await _progress(context, lesson, drill), Refusal.STALE)
    if verdict is not None and verdict.right:
        await finish_if_done(context, lesson)
    await show_in_tapped(update, context, await _screen(context, lesson, drill, after, verdict))
    return None


async def _grade(context: CourseContext, drill: Drill, progress: DrillProgress, choice: int) -> Verdict | None:
    """Grade an answer; None when it needed the runner and the runner failed."""
    if isinstance(drill, ChoiceDrill):
        return drills.choose(drill, choice)
    verdict = drills.precheck(drill, progress.placed)
    if verdict is not None:
        return verdict
    runner = context.services.runner
    if runner is None:
        return drills.UNCHECKED
    try:
        result = await runner.run(
            drills.arranged_program(drill, progress.placed), checks=feedback.runner_checks(drill.exercise)
        )
    except RunnerBusy:
        log.warning("the runner was busy for user %s's Parsons check", context.learner.user_id)
        return None
    except RunnerError:
        log.exception("the runner failed for user %s's Parsons check", context.learner.user_id)
        return None
    return drills.run_verdict(drill, result)


async def _refused(
    update: Update, context: CourseContext, lesson: Lesson, drill: Drill, progress: DrillProgress, refusal: Refusal
) -> str:
    """Answer a tap that changes nothing; stale and solved taps get the drill redrawn as it stands."""
    if refusal is Refusal.INVALID:
        log.info("refused a drill tap from user %s: not offered on %s/%s", context.learner.user_id, lesson.id, drill.id)
        return button_refused()
    if refusal is Refusal.TRIED:
        return _("You tried that one already.")
    if refusal is Refusal.INCOMPLETE:
        return _("Place every line first, then check.")
    await show_in_tapped(update, context, await _screen(context, lesson, drill, progress))
    if refusal is Refusal.SOLVED:
        return _("You solved this drill already. Tap ↻ Again to practise it once more.")
    return _("That button is out of date. Here is the drill as it stands.")


def handlers() -> list[BaseHandler[Update, CourseContext, None]]:
    """Return this feature's handlers."""
    return [
        CallbackQueryHandler(start_drills, pattern=matches(StartDrills)),
        CallbackQueryHandler(show_drill, pattern=matches(ShowDrill)),
        CallbackQueryHandler(drill_tap, pattern=matches(DrillTap)),
    ]
