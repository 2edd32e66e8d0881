"""Navigation rules over the course and stored progress: where a learner may go and where they resume."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bot.course.model import Course, Lesson, Question, Slide
from bot.course.parsing import parse
from bot.learner import NOT_STARTED, Answer, LessonProgress
from bot.navigation import (
    Place,
    can_show,
    course_score,
    furthest_index,
    lesson_score,
    missed,
    resume,
    slide_index,
    unanswered,
)
from bot.states import Stage, stage

ROOT = Path(__file__).resolve().parent.parent


def make_lesson(lesson_id: str, number: int, slides: int = 5, questions: int = 3) -> Lesson:
    return Lesson(
        id=lesson_id,
        number=number,
        title=f"Lesson {number}",
        summary="Summary.",
        slides=tuple(Slide(f"s{i}", f"Slide {i}", "Text.") for i in range(slides)),
        quiz=tuple(Question(f"q{i}", f"Question {i}?", ("a", "b"), 0, "Because.") for i in range(questions)),
        recap="Recap.",
    )


COURSE = Course(
    id="demo",
    language="en",
    title="Demo",
    description="A demo course.",
    lessons=(make_lesson("one", 1), make_lesson("two", 2), make_lesson("three", 3, slides=4, questions=2)),
)
ONE, TWO, THREE = COURSE.lessons


def at(
    lesson: Lesson, slide: int, furthest: int | None = None, *, read: bool = False, done: bool = False
) -> LessonProgress:
    """Progress on ``lesson``'s slide number ``slide`` (stored, as always, by the slides' ids)."""
    reached = slide if furthest is None else furthest
    return LessonProgress(lesson.id, lesson.slides[slide].id, lesson.slides[reached].id, read, done, started=True)


def answer(lesson: Lesson, question: str, correct: bool) -> tuple[tuple[str, str], Answer]:
    return (lesson.id, question), Answer(lesson.id, question, "right" if correct else "wrong", correct)


# Stages.


def test_stage_of_each_kind_of_progress():
    assert stage(NOT_STARTED) is Stage.NOT_STARTED
    assert stage(at(ONE, 2)) is Stage.READING
    assert stage(at(ONE, 4, read=True)) is Stage.QUIZ
    assert stage(at(ONE, 4, read=True, done=True)) is Stage.DONE


# can_show.


def test_a_lesson_not_started_shows_only_its_first_slide():
    assert can_show(ONE, NOT_STARTED, 0) is True
    assert can_show(ONE, NOT_STARTED, 1) is False


def test_any_slide_up_to_one_beyond_the_furthest_can_be_shown():
    progress = at(ONE, 1, furthest=2)
    assert [can_show(ONE, progress, i) for i in range(5)] == [True, True, True, True, False]


def test_going_back_keeps_the_furthest_reach():
    progress = at(ONE, 0, furthest=3)
    assert can_show(ONE, progress, 4) is True


@pytest.mark.parametrize("slide", [-1, 5, 99])
def test_slides_out_of_bounds_are_never_shown(slide):
    finished = at(ONE, 4, read=True, done=True)
    assert can_show(ONE, finished, slide) is False


def test_last_slide_can_be_shown_once_the_one_before_was_reached():
    assert can_show(ONE, at(ONE, 3), ONE.last_slide) is True
    assert can_show(ONE, at(ONE, 2), ONE.last_slide) is False


# resume.


def test_resume_with_no_progress_starts_the_first_lesson():
    assert resume(COURSE, {}, None) == Place(ONE, 0)


def test_resume_goes_back_to_the_current_lesson_and_slide():
    progress = {"one": at(ONE, 4, read=True, done=True), "two": at(TWO, 3)}
    assert resume(COURSE, progress, "two") == Place(TWO, 3)


def test_resume_prefers_the_current_lesson_over_an_earlier_unfinished_one():
    progress = {"one": at(ONE, 1), "three": at(THREE, 2)}
    assert resume(COURSE, progress, "three") == Place(THREE, 2)


def test_resume_after_the_current_lesson_is_done_goes_to_the_first_lesson_not_done():
    progress = {"one": at(ONE, 4, done=True, read=True), "two": at(TWO, 4, read=True, done=True), "three": at(THREE, 1)}
    assert resume(COURSE, progress, "two") == Place(THREE, 1)
    progress = {"two": at(TWO, 4, read=True, done=True)}
    assert resume(COURSE, progress, "two") == Place(ONE, 0)


def test_resume_in_a_lesson_whose_quick_check_is_open_returns_its_slide():
    progress = {"one": at(ONE, 4, read=True)}
    assert resume(COURSE, progress, "one") == Place(ONE, 4)


def test_a_place_is_found_by_its_slide_id_wherever_that_slide_moved():
    progress = {"one": at(ONE, 2, furthest=3)}
    edited = replace(ONE, slides=(Slide("new", "New", "Text."), *reversed(ONE.slides)))  # s4 s3 s2 s1 s0 after "new"
    assert slide_index(edited, progress["one"]) == 3
    assert furthest_index(edited, progress["one"]) == 3  # s3 now stands before s2: reached by position
    assert resume(replace(COURSE, lessons=(edited, TWO, THREE)), progress, "one") == Place(edited, 3)


def test_a_place_on_a_slide_the_lesson_no_longer_has_is_its_start():
    # Database.adopt_course moves such places before learners are served; this is the fallback if it did not.
    progress = LessonProgress("one", "gone", "gone", started=True)
    assert slide_index(ONE, progress) == 0
    assert can_show(ONE, progress, 1) is True
    assert can_show(ONE, progress, 2) is False


def test_resume_with_an_unknown_current_lesson_falls_back_to_the_course_order():
    assert resume(COURSE, {"one": at(ONE, 2)}, "removed-lesson") == Place(ONE, 2)


def test_resume_when_every_lesson_is_done_is_none():
    progress = {lesson.id: at(lesson, lesson.last_slide, read=True, done=True) for lesson in COURSE.lessons}
    assert resume(COURSE, progress, "three") is None
    assert resume(COURSE, progress, None) is None


# Answers and scores.


def test_missed_lists_the_latest_wrong_answers_in_lesson_order():
    answers = dict(
        [answer(ONE, "q2", False), answer(ONE, "q0", False), answer(ONE, "q1", True), answer(TWO, "q1", False)]
    )
    assert missed(ONE, answers) == ["q0", "q2"]
    assert missed(TWO, answers) == ["q1"]
    assert missed(THREE, answers) == []


def test_unanswered_lists_questions_never_answered_in_lesson_order():
    answers = dict([answer(ONE, "q1", False), answer(TWO, "q0", True)])
    assert unanswered(ONE, answers) == ["q0", "q2"]
    assert unanswered(THREE, answers) == ["q0", "q1"]


def test_answers_to_questions_no_longer_in_the_lesson_are_ignored():
    answers = dict([answer(ONE, "gone", False), answer(ONE, "q0", True)])
    assert missed(ONE, answers) == []
    assert lesson_score(ONE, answers) == 1


def test_lesson_score_counts_latest_correct_answers():
    answers = dict(
        [answer(ONE, "q0", True), answer(ONE, "q1", False), answer(ONE, "q2", True), answer(TWO, "q0", True)]
    )
    assert lesson_score(ONE, answers) == 2
    assert lesson_score(TWO, answers) == 1
    assert lesson_score(THREE, answers) == 0


def test_course_score_is_correct_answers_out_of_the_questions_met():
    # Issue 20: questions not met yet are no failure; an answer to a question no longer in the course is not counted.
    answers = dict(
        [answer(ONE, "q0", True), answer(TWO, "q2", True), answer(THREE, "q1", True), answer(THREE, "q0", False)]
    )
    assert course_score(COURSE, answers) == (3, 4)
    assert course_score(COURSE, {}) == (0, 0)
    assert course_score(COURSE, {**answers, **dict([answer(ONE, "gone", True)])}) == (3, 4)


def test_the_real_course_scores_a_perfect_first_lesson_as_all_correct():
    content, _ = parse(ROOT / "lessons")
    first = content.english.lessons[0]
    answers = dict(answer(first, q.id, True) for q in first.quiz)
    assert course_score(content.english, answers) == (len(first.quiz), len(first.quiz))


def test_next_lesson_follows_course_order_and_ends_after_the_last():
    assert COURSE.next_lesson(ONE) is TWO
    assert COURSE.next_lesson(TWO) is THREE
    assert COURSE.next_lesson(THREE) is None
