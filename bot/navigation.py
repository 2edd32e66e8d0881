"""Where a learner is and where they may go: pure rules over the course and stored progress.

Progress names slides by id; here each id is found in the lesson as it is now, so a slide inserted,
moved or removed (see Database.adopt_course) never puts anyone on a slide they did not choose.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.course.model import Course, Lesson
from bot.learner import NOT_STARTED, Answer, LessonProgress
from bot.states import Stage, stage


def slide_index(lesson: Lesson, progress: LessonProgress) -> int:
    """Return the position in ``lesson`` of the slide the learner is on (0 before they start)."""
    if not progress.started or progress.slide_id is None:
        return 0
    index = lesson.slide_index(progress.slide_id)
    # Unknown only if the lessons changed without being adopted; the start of the lesson is a safe place.
    return index if index is not None else 0


def furthest_index(lesson: Lesson, progress: LessonProgress) -> int:
    """Return the position in ``lesson`` of the furthest slide the learner reached (-1 before they start)."""
    if not progress.started:
        return -1
    here = slide_index(lesson, progress)
    furthest = lesson.slide_index(progress.furthest_slide_id) if progress.furthest_slide_id else None
    # A slide moved in front of the learner's place counts as reached: they are past its position.
    return max(here, furthest if furthest is not None else here)


def can_show(lesson: Lesson, progress: LessonProgress, slide: int) -> bool:
    """Return whether a tap may show ``slide``: any slide seen so far, or the very next one.

    A stale or forged button therefore never skips a slide the learner has not read.
    """
    if not 0 <= slide <= lesson.last_slide:
        return False
    return slide <= furthest_index(lesson, progress) + 1


def reached_after(lesson: Lesson, progress: LessonProgress, slide: int) -> str:
    """Return the id of the furthest slide reached once ``slide`` is shown."""
    return lesson.slides[max(slide, furthest_index(lesson, progress))].id


@dataclass(frozen=True)
class Place:
    """A point to resume at: a lesson and a slide in it (its position in the lesson as served now)."""

    lesson: Lesson
    slide: int


def resume(course: Course, progress: dict[str, LessonProgress], current_lesson_id: str | None) -> Place | None:
    """Return where Continue leads: the current lesson unless done, else the first lesson not done."""
    current = course.lesson(current_lesson_id) if current_lesson_id else None
    candidates = ([current] if current else []) + list(course.lessons)
    for lesson in candidates:
        p = progress.get(lesson.id, NOT_STARTED)
        if stage(p) is not Stage.DONE:
            return Place(lesson, slide_index(lesson, p))
    return None


def missed(lesson: Lesson, answers: dict[tuple[str, str], Answer]) -> list[str]:
    """Return the ids of questions whose latest answer is wrong, in lesson order."""
    return [q.id for q in lesson.quiz if (a := answers.get((lesson.id, q.id))) is not None and not a.correct]


def unanswered(lesson: Lesson, answers: dict[tuple[str, str], Answer]) -> list[str]:
    """Return the ids of questions never answered, in lesson order."""
    return [q.id for q in lesson.quiz if (lesson.id, q.id) not in answers]


def lesson_score(lesson: Lesson, answers: dict[tuple[str, str], Answer]) -> int:
    """Return how many of the lesson's questions were last answered correctly."""
    return sum(1 for q in lesson.quiz if (a := answers.get((lesson.id, q.id))) is not None and a.correct)


def course_score(course: Course, answers: dict[tuple[str, str], Answer]) -> tuple[int, int]:
    """Return (questions last answered correctly, questions of the course answered): the score over those met.

    A first lesson answered perfectly is 3 of 3, not 3 of 12 (25%): questions not met yet are no failure.
    """
    met = sum(1 for lesson in course.lessons for q in lesson.quiz if (lesson.id, q.id) in answers)
    return sum(lesson_score(lesson, answers) for lesson in course.lessons), met
