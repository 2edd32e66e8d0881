"""A lesson finished: the one rule both ways of finishing it come to (its last drill solved, its Quick Check closed)."""

from __future__ import annotations

from bot import drills
from bot.changes import Change, LessonCompleted
from bot.course.model import Lesson
from bot.learner import LessonState


def finish_if_done(lesson: Lesson, state: LessonState) -> tuple[Change, ...]:
    """Return the change that marks ``lesson`` done, if ``state`` (as it is after this update) finishes it.

    Done: slides read, every question answered, every drill solved. Storage marks it only if it was not done
    before, and records its one DONE event then, so a replay or a second way of finishing records nothing more.
    """
    if state.progress.completed or not state.progress.slides_read:
        return ()
    if not drills.lesson_finished(lesson, state.answers, set(state.solved)):
        return ()
    return (LessonCompleted(lesson.id),)
