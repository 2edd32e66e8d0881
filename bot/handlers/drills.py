"""Drills: put lines in order, fill in a blank, predict an output, in one message edited in place as the learner taps.

The rules are in bot/drills.py and the screens in bot/render.py; here a tap is read, checked against the
stored attempt (taps from an older screen are stale, taps this bot never offered are refused), applied,
stored, and the same message redrawn. A Parsons order other than the author's is run in the runner.
"""

from __future__ import annotations

import logging

from telegram import Update
from telegram.ext import BaseHandler, CallbackQueryHandler

from bot import drills, render
from bot.callbacks import DrillTap, ShowDrill, StartDrills, matches
from bot.context import CourseContext
from bot.course import runner_checks
from bot.course.model import ChoiceDrill, Drill, Lesson, ParsonsDrill
from bot.drills import Move, Refusal, Verdict
from bot.handlers import reminders, review
from bot.handlers.common import button, button_refused, lesson_gone, record, send, show_in_tapped
from bot.i18n import _
from bot.learner import FRESH, DrillProgress, EventKind
from bot.navigation import unanswered
from runner.client import RunnerBusy, RunnerError

log = logging.getLogger(__name__)


def drill_gone() -> str:
    """Return the toast for a button naming a drill the lesson no longer has."""
    return _("This drill is no longer in the lesson. Send /lessons to see the course.")


def _named(context: CourseContext, lesson_id: str, drill_id: str) -> tuple[Lesson, Drill] | str:
    """Return the lesson and drill a button names, or the toast saying which of them the course no longer has."""
    lesson = context.course.lesson(lesson_id)
    if lesson is None:
        return lesson_gone()
    drill = lesson.drill(drill_id)
    return (lesson, drill) if drill is not None else drill_gone()


async def finish_if_done(context: CourseContext, lesson: Lesson) -> bool:
    """Mark the lesson done once its slides are read, questions answered and drills solved; True if it just was."""
    db, user_id = context.services.db, context.learner.user_id
    solved = (await db.drills_solved(user_id)).get(lesson.id, set())
    if not drills.lesson_finished(lesson, await db.latest_answers(user_id), solved):
        return False
    # Both ways a lesson finishes (its last drill solved, its Quick Check closed) come here, so DONE is recorded once.
    if not await db.complete_lesson(user_id, lesson.id):
        return False
    await record(context, EventKind.DONE, lesson.id)
    await reminders.lesson_finished(context, lesson)  # the reminders' offer, the completion card
    return True


async def _screen(
    context: CourseContext,
    lesson: Lesson,
    drill: Drill,
    progress: DrillProgress,
    verdict: Verdict | None = None,
    *,
    checking: bool = False,
) -> render.Screen:
    db, user_id = context.services.db, context.learner.user_id
    solved = frozenset((await db.drills_solved(user_id)).get(lesson.id, set()))
    if isinstance(drill, ParsonsDrill):
        order = drills.piece_order(drill, user_id, lesson.id)
    else:
        order = drills.choice_order(drill, user_id, lesson.id)
    quiz_left = bool(unanswered(lesson, await db.latest_answers(user_id)))
    view = render.DrillView(progress, order, solved, verdict, quiz_left, checking)
    return render.drill(context.course, lesson, drill, view)


async def _progress(context: CourseContext, lesson: Lesson, drill: Drill) -> DrillProgress:
    """Return the learner's attempt at a drill; one the drill no longer fits (the lesson changed) starts over."""
    db, user_id = context.services.db, context.learner.user_id
    stored = (await db.drill_progress(user_id, lesson.id)).get(drill.id, FRESH)
    fitted = drills.fitted(drill, stored)
    if fitted is not stored:
        await db.save_drill(user_id, lesson.id, drill.id, stored, fitted)
    return fitted


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
    found = _named(context, data.lesson, data.drill)
    if isinstance(found, str):
        return found
    lesson, drill = found
    await show_in_tapped(
        update, context, await _screen(context, lesson, drill, await _progress(context, lesson, drill))
    )
    return None


@button(DrillTap)
async def drill_tap(update: Update, context: CourseContext, data: DrillTap) -> str | None:
    """Apply one tap to the learner's attempt, store it, and redraw the drill in the tapped message."""
    found = _named(context, data.lesson, data.drill)
    if isinstance(found, str):
        return found
    lesson, drill = found
    try:
        move = Move(data.move)
    except ValueError:
        log.info("refused drill move %r from user %s", data.move, context.learner.user_id)
        return button_refused()
    before = await _progress(context, lesson, drill)
    if move not in (Move.CHECK, Move.CHOOSE):
        applied = drills.apply(drill, before, move, data.arg, data.turn)
        if isinstance(applied, Refusal):
            return await _refused(update, context, lesson, drill, before, applied)
        if not await context.services.db.save_drill(context.learner.user_id, lesson.id, drill.id, before, applied):
            return await _lost_race(update, context, lesson, drill)
        await show_in_tapped(update, context, await _screen(context, lesson, drill, applied))
        return None
    refusal = drills.answerable(drill, before, move, data.arg, data.turn)
    if refusal is not None:
        return await _refused(update, context, lesson, drill, before, refusal)
    if isinstance(drill, ChoiceDrill):
        verdict = drills.grade_choice(drill, data.arg)
    elif (known := drills.precheck(drill, before.placed)) is not None:
        verdict = known
    elif context.services.runner is None:
        verdict = drills.UNCHECKED
    else:
        await _start_check(update, context, lesson, drill, before)
        return None
    after = drills.answered(before, verdict, data.arg if move is Move.CHOOSE else None)
    if not await _record(context, lesson, drill, before, after, verdict):
        return await _lost_race(update, context, lesson, drill)
    await show_in_tapped(update, context, await _screen(context, lesson, drill, after, verdict))
    return None


async def _record(
    context: CourseContext, lesson: Lesson, drill: Drill, before: DrillProgress, after: DrillProgress, verdict: Verdict
) -> bool:
    """Store a graded answer (False if the attempt changed meanwhile); a right one may finish the lesson."""
    if not await context.services.db.save_drill(context.learner.user_id, lesson.id, drill.id, before, after):
        return False
    # Choices and Parsons checks alike come here, the background check too: one event per answer.
    await record(context, EventKind.DRILL, lesson.id, item_id=drill.id, verdict="right" if verdict.right else "wrong")
    await review.drill_answered(context, lesson, drill.id, verdict.right)
    if verdict.right:
        await finish_if_done(context, lesson)
    return True


async def _start_check(
    update: Update, context: CourseContext, lesson: Lesson, drill: ParsonsDrill, before: DrillProgress
) -> None:
    """Say the order is being tried, and try it in the background: the tap is answered at once.

    Running an order can take seconds (an optimizer imports much of torch). The learner may undo meanwhile:
    the verdict is then for an arrangement no longer on screen, and it is dropped.
    """
    await show_in_tapped(update, context, await _screen(context, lesson, drill, before, checking=True))
    # The task carries its update: it runs in the update's language, and a failure in it reaches the error handler.
    context.application.create_task(_check(update, context, lesson, drill, before), update=update)


async def _check(
    update: Update, context: CourseContext, lesson: Lesson, drill: ParsonsDrill, before: DrillProgress
) -> None:
    runner = context.services.runner
    if runner is None:
        return
    try:
        result = await runner.run(
            drills.arranged_program(drill, before.placed), checks=runner_checks.drill_checks(drill)
        )
    except RunnerError as exc:
        if isinstance(exc, RunnerBusy):
            log.warning("the runner was busy for user %s's Parsons check", context.learner.user_id)
        else:
            log.exception("the runner failed for user %s's Parsons check", context.learner.user_id)
        await show_in_tapped(update, context, await _screen(context, lesson, drill, before, drills.UNAVAILABLE))
        return
    verdict = drills.run_verdict(drill, result)
    after = drills.answered(before, verdict)
    if await _record(context, lesson, drill, before, after, verdict):
        await show_in_tapped(update, context, await _screen(context, lesson, drill, after, verdict))


async def _lost_race(update: Update, context: CourseContext, lesson: Lesson, drill: Drill) -> str:
    """Answer a tap whose change could not be stored because another changed the attempt first."""
    return await _refused(update, context, lesson, drill, await _progress(context, lesson, drill), Refusal.STALE)


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
    if progress.solved:
        # A tap replayed after a crash finds its answer stored already: the crash may have come before the lesson
        # was marked done, so finish it here (nothing happens when it is done or not finished).
        await finish_if_done(context, lesson)
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
