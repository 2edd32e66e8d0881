"""Drills: put lines in order, fill in a blank, predict an output, in one message edited in place as the learner taps.

The decisions are bot.flows.drills'; here a tap is unpacked, decided over the learner's snapshot, shown and stored in
one transaction. A Parsons order other than the author's is run in the runner, in the background.
"""

from __future__ import annotations

import logging

from telegram import Update

from bot.callbacks import DrillTap, ShowDrill, StartDrills
from bot.context import CourseContext
from bot.course import runner_checks
from bot.course.model import Drill, Lesson, ParsonsDrill
from bot.drills import Refusal, answered, arranged_program, run_verdict
from bot.flows import drills as flow
from bot.flows.outcome import Outcome, lesson_gone
from bot.handlers import comeback
from bot.handlers.common import carry_out, show_in_tapped, store
from bot.handlers.router import Router
from bot.learner import DrillProgress
from bot.snapshot import Snapshot
from runner.client import RunnerBusy, RunnerError

log = logging.getLogger(__name__)

router = Router("drills")


def _named(context: CourseContext, lesson_id: str, drill_id: str) -> tuple[Lesson, Drill] | str:
    """Return the lesson and drill a button names, or the toast saying which of them the course no longer has."""
    lesson = context.course.lesson(lesson_id)
    if lesson is None:
        return lesson_gone()
    drill = lesson.drill(drill_id)
    return (lesson, drill) if drill is not None else flow.drill_gone()


@router.button(StartDrills)
async def start_drills(update: Update, context: CourseContext, data: StartDrills) -> str | None:
    """Open a lesson's drills in a new message, at the first one not solved yet."""
    lesson = context.course.lesson(data.lesson)
    if lesson is None or not lesson.drills:
        return lesson_gone()
    state = await context.snapshot.lesson(lesson.id)
    return await _carry_out(
        update, context, lesson, lesson.drills[0], flow.start(context.course, lesson, state, context.learner.user_id)
    )


@router.button(ShowDrill)
async def show_drill(update: Update, context: CourseContext, data: ShowDrill) -> str | None:
    """Show one drill in the tapped message, as the learner left it."""
    found = _named(context, data.lesson, data.drill)
    if isinstance(found, str):
        return found
    lesson, drill = found
    state = await context.snapshot.lesson(lesson.id)
    return await _carry_out(
        update, context, lesson, drill, flow.show(context.course, lesson, drill, state, context.learner.user_id)
    )


@router.button(DrillTap)
async def drill_tap(update: Update, context: CourseContext, data: DrillTap) -> str | None:
    """Apply one tap to the learner's attempt, show the drill redrawn in the tapped message, and store it."""
    found = _named(context, data.lesson, data.drill)
    if isinstance(found, str):
        return found
    lesson, drill = found
    state = await context.snapshot.lesson(lesson.id)
    runner = context.services.runner is not None
    decided = flow.tap(context.course, lesson, drill, state, context.learner.user_id, data, runner=runner)
    if isinstance(decided, flow.Check) and isinstance(drill, ParsonsDrill):
        # Running an order can take seconds (an optimizer imports much of torch): the tap is answered at once, and
        # the order tried in a task that carries the update (its language; a failure reaches the error handler).
        await _carry_out(update, context, lesson, drill, decided.outcome)
        context.application.create_task(_check(update, context, lesson, drill, decided.before), update=update)
        return None
    if isinstance(decided, flow.Check):
        raise TypeError(f"only a Parsons drill is run, not {drill.id!r}")
    return await _carry_out(update, context, lesson, drill, decided)


async def _carry_out(
    update: Update, context: CourseContext, lesson: Lesson, drill: Drill, outcome: Outcome
) -> str | None:
    """Show and store ``outcome``; if another change to the attempt came first, show the drill as it stands."""
    if (await carry_out(update, context, outcome, feature="drill")).stored:
        return outcome.toast
    state = await (await Snapshot.read(context.services.db, context.learner)).lesson(lesson.id)
    lost = flow.refused(
        context.course, lesson, drill, state, context.learner.user_id, flow.attempt(drill, state), Refusal.STALE
    )
    await carry_out(update, context, lost, feature="drill")
    return lost.toast


async def _check(
    update: Update, context: CourseContext, lesson: Lesson, drill: ParsonsDrill, before: DrillProgress
) -> None:
    """Run the arrangement ``before`` and store its verdict, unless the learner changed the attempt meanwhile (the
    verdict is then for an arrangement no longer on screen, and it is dropped)."""
    runner = context.services.runner
    if runner is None:
        return
    user_id = context.learner.user_id
    try:
        result = await runner.run(arranged_program(drill, before.placed), checks=runner_checks.drill_checks(drill))
    except RunnerError as exc:
        if isinstance(exc, RunnerBusy):
            log.warning("the runner was busy for user %s's Parsons check", user_id)
        else:
            log.exception("the runner failed for user %s's Parsons check", user_id)
        state = await context.snapshot.lesson(lesson.id)
        await carry_out(
            update, context, flow.unavailable(context.course, lesson, drill, state, user_id, before), feature="check"
        )
        return
    # Seconds have passed: the learner is read again, as they are now (the update's snapshot with them, so what the
    # verdict means for the drill's review card is decided over the card as it is now, too).
    context.snapshot = await Snapshot.read(context.services.db, context.learner)
    state = await context.snapshot.lesson(lesson.id)
    verdict = run_verdict(drill, result)
    outcome = flow.answered(context.course, lesson, drill, state, user_id, before, answered(before, verdict), verdict)
    if await store(context, outcome.changes, outcome.events):
        for shown in outcome.screens:
            await show_in_tapped(update, context, shown.screen)
        await comeback.follow_up(context)
