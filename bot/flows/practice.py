"""The practice as a flow: the exercise opened, hints shown, the practice left, a graded run's verdict."""

from __future__ import annotations

from bot import feedback, render
from bot.changes import AttemptGraded, Event, HintsShown, PracticeLeft, PracticeStarted
from bot.course.model import Course, Exercise, Lesson
from bot.flows.outcome import Outcome, Show, Where
from bot.i18n import _
from bot.learner import EventKind, Learner
from bot.states import PRACTICE, Practice, PracticeStep, practice_state
from runner.client import RunResult, Status


def start(course: Course, lesson: Lesson) -> Outcome:
    """Open the exercise: from now on, a message is taken as an answer."""
    return Outcome(
        screens=(Show(render.practice_intro(course, lesson), Where.NEW, supersedes=True),),
        changes=(PracticeStarted(lesson.id),),
    )


def under_way(course: Course, learner: Learner, lesson_id: str | None, step: PracticeStep) -> Lesson | None:
    """Return the lesson whose exercise the learner practises, if ``step`` may be taken in it now."""
    lesson = course.lesson(lesson_id) if lesson_id else None
    if lesson is None or lesson.exercise is None:
        return None
    return lesson if PRACTICE.allows(practice_state(learner, lesson.id), step) else None


def hint(course: Course, learner: Learner, lesson_id: str, mistake: str | None, *, passed: bool) -> Outcome:
    """Show the next hint, up to the exercise's last: first the one about ``mistake``, the one the run showed.

    ``passed``: the learner passed this exercise, so an old Hint button says so, never "open the practice".
    """
    lesson = under_way(course, learner, lesson_id, PracticeStep.HINT)
    if lesson is None or lesson.exercise is None:
        if passed:
            return Outcome(toast=_("You passed this practice already: no hints needed. ✅"))
        return Outcome(toast=_("This practice is closed now. Open it again from /lessons to see its hints."))
    shown = min(learner.hints_shown + 1, len(lesson.exercise.hints))
    if shown == learner.hints_shown:
        return Outcome(toast=_("That was the last hint."))
    return Outcome(
        screens=(Show(render.hint(lesson, course, shown, mistake), Where.NEW, supersedes=True),),
        changes=(HintsShown(shown),),
        events=(Event(EventKind.HINT, lesson.id, item_id=str(shown)),),
    )


def leave_other(learner: Learner, lesson_id: str) -> Outcome:
    """Leave the practice of another lesson when the learner opens ``lesson_id``: going elsewhere is leaving."""
    if practice_state(learner) is Practice.ON and learner.practice_lesson_id != lesson_id:
        return _leave(learner)
    return Outcome()


def _leave(learner: Learner) -> Outcome:
    left = learner.practice_lesson_id
    if left is None:
        return Outcome()
    return Outcome(changes=(PracticeLeft(),), events=(Event(EventKind.LEAVE, left),))


def leave(course: Course, learner: Learner) -> Outcome:
    """Stop taking messages as answers, and say so below, where the learner looks, with the ways on."""
    left = learner.practice_lesson_id
    if left is None:
        return Outcome(toast=_("You are not in a practice right now."))
    # A new message, not an edit: the tapped message (a hint, a verdict, the task) keeps what it says.
    screen = render.practice_left(course, course.lesson(left))
    return _leave(learner).then(Outcome(screens=(Show(screen, Where.NEW, supersedes=True),)))


def prose(course: Course, learner: Learner, lesson: Lesson) -> Outcome:
    """Answer a sentence sent in a practice: not run, not an attempt, no event; Hint and Leave are the ways on."""
    screen = render.prose_in_practice(course, lesson, learner.hints_shown)
    return Outcome(screens=(Show(screen, Where.NEW, supersedes=True),))


def verdict(
    course: Course, learner: Learner, lesson: Lesson, exercise: Exercise, result: RunResult, status: str | None
) -> Outcome:
    """Grade a run of the exercise, ``learner`` read as the result came in: the attempt, its event, the verdict.

    A passed run ends the practice. Whatever the run printed or failed on, the verdict fits in one message: the
    output gives way.
    """
    verdict_name, failed_check = feedback.run_event(result)
    changes: tuple[AttemptGraded | PracticeLeft, ...] = (AttemptGraded(lesson.id, result.passed),)
    if result.passed:
        changes += (PracticeLeft(),)
    found = feedback.diagnosis(exercise, result)
    checks = feedback.check_feedback(exercise, result, diagnosed=bool(found))
    lines = ([status] if status and result.status is not Status.OK else []) + checks
    likely = list(found.values())
    # The Hint button shows first the hint about the mistake this run shows (the first that has one).
    mistake = next((made for made in found if any(made == m for m, _n in exercise.hints_for)), None)
    hints_shown = 0 if result.passed else learner.hints_shown
    screen = render.fitting(
        lambda room: render.verdict_screen(
            course, lesson, result, lines, likely, hints_shown=hints_shown, output_room=room, mistake=mistake
        ),
        feedback.OUTPUT_MAX,
    )
    event = Event(EventKind.RUN, lesson.id, item_id="exercise", verdict=verdict_name, failed_check=failed_check)
    return Outcome(screens=(Show(screen, Where.NEW, supersedes=True),), changes=changes, events=(event,))
