"""Where a learner is and where they may go: pure rules over the course and stored progress."""

from __future__ import annotations

from dataclasses import dataclass

from bot.content.model import Course, Lesson
from bot.learner import NOT_STARTED, Answer, LessonProgress
from bot.states import Stage, stage


def can_show(lesson: Lesson, progress: LessonProgress, slide: int) -> bool:
    """Return whether a tap may show ``slide``: any slide seen so far, or the very next one.

    A stale or forged button therefore never skips a slide the learner has not read.
    """
    if not 0 <= slide <= lesson.last_slide:
        return False
    furthest = progress.furthest_slide if progress.started else -1
    return slide <= furthest + 1


@dataclass(frozen=True)
class Place:
    """A point to resume at: a lesson and a slide in it."""

    lesson: Lesson
    slide: int


def resume(course: Course, progress: dict[str, LessonProgress], current_lesson_id: str | None) -> Place | None:
    """Return where Continue leads: the current lesson unless done, else the first lesson not done."""
    current = course.lesson(current_lesson_id) if current_lesson_id else None
    candidates = ([current] if current else []) + list(course.lessons)
    for lesson in candidates:
        p = progress.get(lesson.id, NOT_STARTED)
        if stage(p) is not Stage.DONE:
            return Place(lesson, min(p.slide, lesson.last_slide) if p.started else 0)
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
    """Return (questions last answered correctly, questions in the course)."""
    return sum(lesson_score(lesson, answers) for lesson in course.lessons), course.question_count
