"""The stats report: the figures the events give, attached to the course they are about, with flags for authors.

How events are read (contract 3 of the learning events):

- a learner **reached** a slide when a ``slide`` event names it; a lesson's learners **stopped** at the slide
  they reached last (those who reached it, less those who reached the next one, or finished the lesson);
- the ``seconds`` of a ``slide`` event are the time spent on the slide shown before it: going forward, the slide
  before it in the lesson, so they count as that slide's time (a ``back`` is an event of its own). The last
  slide's time is not recorded: the Quick Check follows it;
- a question's **first try** is each learner's earliest ``answer`` to it; the share right, and how often each
  option was chosen, are taken over first tries, which retakes cannot inflate;
- an exercise's **attempts** are a learner's ``run`` events; its **first try** their earliest run.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.course.model import Content, Lesson, Question
from bot.stats.query import Figures, Filters

# Below this many learners a share says little: no flag is raised on it.
MIN_LEARNERS = 20
TOO_EASY = 0.95  # right on the first try, above this share
TOO_HARD = 0.30  # ... below this one


def option_id(question: Question, index: int) -> str:
    """Return the id the events give the option at ``index`` of ``question``: its own, as the file names it."""
    return question.option_ids[index]


@dataclass(frozen=True)
class SlideStats:
    """One slide: how many learners saw it, how many stopped there, how long they stayed."""

    number: int
    id: str
    title: str
    reached: int
    stopped: int
    median_seconds: float | None  # None: no time recorded (the last slide, or nobody went on)


@dataclass(frozen=True)
class OptionStats:
    """One option of a question and how many learners chose it first."""

    id: str
    text: str
    correct: bool
    chosen: int


@dataclass(frozen=True)
class QuestionStats:
    """One Quick Check question: first tries, options, and what an author should look at."""

    id: str
    text: str
    learners: int  # learners who answered it
    right_first: int  # ... and were right on their first try
    options: tuple[OptionStats, ...]
    flags: tuple[str, ...]


@dataclass(frozen=True)
class DrillStats:
    """One drill: who answered it, who was right at once, who solved it."""

    id: str
    kind: str  # parsons, fill or predict
    learners: int  # learners who answered it
    right_first: int  # ... right on their first answer
    solved: int  # ... right at last


@dataclass(frozen=True)
class ExerciseStats:
    """The practice exercise: who tried, who passed, how it went."""

    learners: int  # learners who ran code at least once
    passed_first: int  # ... whose first run passed
    passed: int  # ... who passed in the end
    median_attempts: int | None
    most_failed: tuple[str, int] | None  # the check failed most often, and how many runs failed it
    failed_runs: int  # runs that failed a check
    hints: tuple[int, ...]  # learners who opened hint 1, 2, ...


@dataclass(frozen=True)
class LessonStats:
    """One lesson's report."""

    number: int
    id: str
    title: str
    started: int  # learners who reached its first slide
    finished: int  # learners who completed it (slides read, Quick Check answered)
    slides: tuple[SlideStats, ...]
    stopped_at_quiz: int  # learners who read every slide but did not finish
    questions: tuple[QuestionStats, ...]
    exercise: ExerciseStats | None
    drills: tuple[DrillStats, ...] = ()


@dataclass(frozen=True)
class Report:
    """The report over the course, as filtered."""

    course_title: str
    filters: Filters
    lessons: tuple[LessonStats, ...]
    missing_indexes: tuple[str, ...]


def build(content: Content, figures: Figures, filters: Filters) -> Report:
    """Attach ``figures`` to the English course: titles, option texts, flags."""
    course = content.english
    wanted = [lesson for lesson in course.lessons if filters.lessons is None or lesson.id in filters.lessons]
    return Report(course.title, filters, tuple(_lesson(lesson, figures) for lesson in wanted), figures.missing_indexes)


def _lesson(lesson: Lesson, figures: Figures) -> LessonStats:
    reached = [figures.reached.get((lesson.id, slide.id), 0) for slide in lesson.slides]
    finished = figures.finished.get(lesson.id, 0)
    slides = []
    for index, slide in enumerate(lesson.slides):
        after = reached[index + 1] if index + 1 < len(reached) else None
        # The time spent on a slide travels on the event of the slide after it.
        timed = figures.seconds.get((lesson.id, lesson.slides[index + 1].id)) if after is not None else None
        slides.append(
            SlideStats(
                number=index + 1,
                id=slide.id,
                title=slide.title,
                reached=reached[index],
                stopped=max(reached[index] - after, 0) if after is not None else 0,
                median_seconds=timed[1] if timed else None,
            )
        )
    last = reached[-1] if reached else 0
    return LessonStats(
        number=lesson.number,
        id=lesson.id,
        title=lesson.title,
        started=reached[0] if reached else 0,
        finished=finished,
        slides=tuple(slides),
        stopped_at_quiz=max(last - finished, 0),
        questions=tuple(_question(lesson, question, figures) for question in lesson.quiz),
        exercise=_exercise(lesson, figures),
        drills=tuple(
            DrillStats(drill.id, drill.kind, *figures.drills.get((lesson.id, drill.id), (0, 0, 0)))
            for drill in lesson.drills
        ),
    )


def _question(lesson: Lesson, question: Question, figures: Figures) -> QuestionStats:
    learners, right = figures.first_tries.get((lesson.id, question.id), (0, 0))
    options = tuple(
        OptionStats(
            id=option_id(question, index),
            text=text,
            correct=index == question.correct,
            chosen=figures.chosen.get((lesson.id, question.id, option_id(question, index)), 0),
        )
        for index, text in enumerate(question.options)
    )
    flags: list[str] = []
    if learners >= MIN_LEARNERS:
        share = right / learners
        if share > TOO_EASY:
            flags.append(f"too easy: {share:.0%} right on the first try")
        elif share < TOO_HARD:
            flags.append(f"too hard: {share:.0%} right on the first try")
        flags += [f"a wrong option nobody picks: {o.text!r}" for o in options if not o.correct and o.chosen == 0]
    return QuestionStats(question.id, question.question, learners, right, options, tuple(flags))


def _exercise(lesson: Lesson, figures: Figures) -> ExerciseStats | None:
    exercise = lesson.exercise
    if exercise is None:
        return None
    by_runs = figures.attempts.get(lesson.id, {})
    learners = sum(group[0] for group in by_runs.values())
    failed = {check.id: figures.failed_checks.get((lesson.id, check.id), 0) for check in exercise.checks}
    worst = max(failed.items(), key=lambda item: item[1]) if any(failed.values()) else None
    return ExerciseStats(
        learners=learners,
        passed_first=sum(group[1] for group in by_runs.values()),
        passed=sum(group[2] for group in by_runs.values()),
        median_attempts=_median({runs: group[0] for runs, group in by_runs.items()}),
        most_failed=worst,
        failed_runs=sum(failed.values()),
        hints=tuple(figures.hints.get((lesson.id, str(n)), 0) for n in range(1, len(exercise.hints) + 1)),
    )


def _median(histogram: dict[int, int]) -> int | None:
    """Return the (lower) median of values given as value -> how many times it occurs; None if there are none."""
    total = sum(histogram.values())
    if total == 0:
        return None
    seen = 0
    for value in sorted(histogram):
        seen += histogram[value]
        if 2 * seen >= total:
            return value
    raise AssertionError("unreachable: the counts add up to the total")
