"""Drills as a flow: a tap read against the stored attempt (stale taps redraw, forged ones are refused), applied,
and the same message redrawn; a right answer may finish the lesson. The rules are bot.drills'; this decides what
one update does with them. A Parsons order other than the author's is run in the runner: ``tap`` says so, the handler
runs it, and ``checked`` decides on its result.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from bot import drills, render
from bot.callbacks import DrillTap
from bot.changes import Change, DrillSaved, Event
from bot.course.model import ChoiceDrill, Course, Drill, Lesson, ParsonsDrill
from bot.drills import Move, Refusal, Verdict
from bot.flows import lessons
from bot.flows.outcome import Outcome, Show, Where, button_refused
from bot.i18n import _
from bot.learner import FRESH, DrillProgress, EventKind, LessonState
from bot.navigation import unanswered


def drill_gone() -> str:
    """Return the toast for a button naming a drill the lesson no longer has."""
    return _("This drill is no longer in the lesson. Send /lessons to see the course.")


@dataclass(frozen=True)
class Check:
    """A Parsons arrangement to run in the runner before its verdict: shown as being checked meanwhile."""

    outcome: Outcome  # the checking screen, and the attempt fitted to the drill if the lesson changed
    before: DrillProgress  # the attempt the verdict will be stored over


@dataclass(frozen=True)
class Attempt:
    """The learner's attempt at a drill as stored, and as it fits the drill today (a reload may have changed it)."""

    stored: DrillProgress
    fitted: DrillProgress

    def changes(self, lesson: Lesson, drill: Drill) -> tuple[Change, ...]:
        """Return the change that stores the fitted attempt, if it differs from the stored one."""
        if self.fitted is self.stored:
            return ()
        return (DrillSaved(lesson.id, drill.id, self.stored, self.fitted),)


def attempt(drill: Drill, state: LessonState) -> Attempt:
    """Return the learner's attempt at ``drill``; one the drill no longer fits starts over."""
    stored = state.drills.get(drill.id, FRESH)
    return Attempt(stored, drills.fitted(drill, stored))


def screen(
    course: Course,
    lesson: Lesson,
    drill: Drill,
    state: LessonState,
    progress: DrillProgress,
    user_id: int,
    verdict: Verdict | None = None,
    *,
    checking: bool = False,
) -> render.Screen:
    """Return the drill's screen for ``progress`` (the attempt shown), the lesson as ``state`` holds it."""
    solved = state.solved | ({drill.id} if progress.solved else frozenset())
    if isinstance(drill, ParsonsDrill):
        order = drills.piece_order(drill, user_id, lesson.id)
    else:
        order = drills.choice_order(drill, user_id, lesson.id)
    quiz_left = bool(unanswered(lesson, state.answers))
    view = render.DrillView(progress, order, solved, verdict, quiz_left, checking)
    return render.drill(course, lesson, drill, view)


def start(course: Course, lesson: Lesson, state: LessonState, user_id: int) -> Outcome:
    """Open a lesson's drills in a new message, at the first one not solved yet."""
    first = next((d for d in lesson.drills if d.id not in state.solved), lesson.drills[0])
    found = attempt(first, state)
    shown = screen(course, lesson, first, state, found.fitted, user_id)
    return Outcome(screens=(Show(shown, Where.NEW),), changes=found.changes(lesson, first))


def show(course: Course, lesson: Lesson, drill: Drill, state: LessonState, user_id: int) -> Outcome:
    """Show one drill in the tapped message, as the learner left it."""
    found = attempt(drill, state)
    shown = screen(course, lesson, drill, state, found.fitted, user_id)
    return Outcome(screens=(Show(shown),), changes=found.changes(lesson, drill))


def tap(
    course: Course, lesson: Lesson, drill: Drill, state: LessonState, user_id: int, data: DrillTap, *, runner: bool
) -> Outcome | Check:
    """Apply one tap to the attempt and redraw the drill; or say the arrangement must be run first (``runner``:
    a runner is there to run it)."""
    found = attempt(drill, state)
    before = found.fitted
    move = data.move
    if move not in (Move.CHECK, Move.CHOOSE):
        applied = drills.apply(drill, before, move, data.arg, data.turn)
        if isinstance(applied, Refusal):
            return refused(course, lesson, drill, state, user_id, found, applied)
        shown = screen(course, lesson, drill, state, applied, user_id)
        return Outcome(
            screens=(Show(shown),),
            changes=(*found.changes(lesson, drill), DrillSaved(lesson.id, drill.id, before, applied)),
        )
    refusal = drills.answerable(drill, before, move, data.arg, data.turn)
    if refusal is not None:
        return refused(course, lesson, drill, state, user_id, found, refusal)
    if isinstance(drill, ChoiceDrill):
        verdict = drills.grade_choice(drill, data.arg)
    elif (known := drills.precheck(drill, before.placed)) is not None:
        verdict = known
    elif not runner:
        verdict = drills.UNCHECKED
    else:
        shown = screen(course, lesson, drill, state, before, user_id, checking=True)
        return Check(Outcome(screens=(Show(shown),), changes=found.changes(lesson, drill)), before)
    after = drills.answered(before, verdict, data.arg if move is Move.CHOOSE else None)
    # The fitted attempt (if any) is stored first: the answer's own change is made from it.
    return Outcome(changes=found.changes(lesson, drill)).then(
        answered(course, lesson, drill, state, user_id, before, after, verdict)
    )


def answered(
    course: Course,
    lesson: Lesson,
    drill: Drill,
    state: LessonState,
    user_id: int,
    before: DrillProgress,
    after: DrillProgress,
    verdict: Verdict,
) -> Outcome:
    """Store a graded answer over ``before`` and redraw; a right one may finish the lesson."""
    changes: tuple[Change, ...] = (DrillSaved(lesson.id, drill.id, before, after),)
    if verdict.right:
        changes += lessons.finish_if_done(lesson, replace(state, drills={**state.drills, drill.id: after}))
    # Choices and Parsons checks alike come here, the background check too: one event per answer.
    event = Event(EventKind.DRILL, lesson.id, item_id=drill.id, verdict="right" if verdict.right else "wrong")
    shown = screen(course, lesson, drill, state, after, user_id, verdict)
    return Outcome(screens=(Show(shown),), changes=changes, events=(event,))


def unavailable(
    course: Course, lesson: Lesson, drill: Drill, state: LessonState, user_id: int, before: DrillProgress
) -> Outcome:
    """Say the arrangement could not be run (the runner failed or was busy): nothing is stored."""
    return Outcome(screens=(Show(screen(course, lesson, drill, state, before, user_id, drills.UNAVAILABLE)),))


def refused(
    course: Course,
    lesson: Lesson,
    drill: Drill,
    state: LessonState,
    user_id: int,
    found: Attempt,
    refusal: Refusal,
) -> Outcome:
    """Answer a tap that changes nothing; stale and solved taps get the drill redrawn as it stands."""
    if refusal is Refusal.INVALID:
        return Outcome(toast=button_refused())
    if refusal is Refusal.TRIED:
        return Outcome(toast=_("You tried that one already."))
    if refusal is Refusal.INCOMPLETE:
        return Outcome(toast=_("Place every line first, then check."))
    progress = found.fitted
    changes = found.changes(lesson, drill)
    if progress.solved:
        # A tap replayed after a crash finds its answer stored already: the crash may have come before the lesson
        # was marked done, so finish it here (nothing happens when it is done or not finished).
        changes += lessons.finish_if_done(lesson, state)
    toast = (
        _("You solved this drill already. Tap ↻ Again to practise it once more.")
        if refusal is Refusal.SOLVED
        else _("That button is out of date. Here is the drill as it stands.")
    )
    return Outcome(
        screens=(Show(screen(course, lesson, drill, state, progress, user_id)),), changes=changes, toast=toast
    )
