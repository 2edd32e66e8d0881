"""Check every screen the content renders to against Telegram's limits, in every language."""

from __future__ import annotations

from bot import feedback, render
from bot.callbacks import MAX_BYTES
from bot.content.model import Course, Lesson, Question
from bot.errors import Problem
from bot.i18n import DEFAULT_LANGUAGE, I18n
from bot.localapi import limits
from bot.localapi.units import utf16_len
from bot.safehtml import visible_text
from runner.client import RunResult

# Telegram's limits are stated once, by the built-in Bot API server that enforces them: characters after
# entity parsing, counted in UTF-16 code units.
MESSAGE_MAX = limits.MESSAGE_TEXT_MAX
POLL_QUESTION_MAX = limits.POLL_QUESTION_MAX
# Telegram takes up to 12 options; the course format (lessons/FORMAT.md) keeps a Quick Check to 10.
POLL_OPTIONS = (limits.POLL_OPTIONS_MIN, 10)
POLL_OPTION_MAX = limits.POLL_OPTION_MAX
EXPLANATION_MAX = limits.POLL_EXPLANATION_MAX
EXPLANATION_LINE_BREAKS_MAX = limits.POLL_EXPLANATION_LINE_FEEDS
telegram_length = utf16_len  # the length Telegram counts


def visible_length(html_text: str) -> int:
    """Return the length of rendered HTML once Telegram has parsed its entities."""
    return telegram_length(visible_text(html_text))


def check_course(course: Course, i18n: I18n) -> list[Problem]:
    """Return every screen of ``course`` (in its own language) that Telegram would refuse."""
    problems: list[Problem] = []
    with i18n.use(course.language):
        for lesson in course.lessons:
            for index, slide in enumerate(lesson.slides):
                if slide.fallback:
                    continue  # checked in English
                problems += _check_screen(
                    render.slide(course, lesson, index), f"slide '{slide.id}'", slide.source.path, slide.source.line
                )
            for question in lesson.quiz:
                if not question.fallback:
                    problems += _check_question(question)
            result = render.quiz_result(course, lesson, len(lesson.quiz), 0)
            problems += _check_screen(result, "the recap", lesson.source.path, lesson.source.line)
            exercise = lesson.exercise
            if exercise is not None and (course.language == DEFAULT_LANGUAGE or not exercise.fallback):
                problems += _check_exercise(course, lesson)
    return problems


# The longest output a verdict shows: what is left is the room for the exercise's own messages.
_LONGEST_OUTPUT = RunResult(
    status="ok", stdout="x" * feedback.OUTPUT_MAX, stderr="", exit_code=0, signal=None, duration_ms=0.0, truncated=True
)


def _check_exercise(course: Course, lesson: Lesson) -> list[Problem]:
    """Check every screen of the practice: the task, each hint, and a verdict with every check failing."""
    exercise = lesson.exercise
    assert exercise is not None
    screens = {"exercise: the practice task": render.practice_intro(course, lesson)}
    for shown in range(1, len(exercise.hints) + 1):
        screens[f"exercise: hint {shown}"] = render.hint(lesson, course, shown)
    failing = feedback.feedback_lines(
        [check.fail.replace("{got}", "`tensor([1., 2., 3.])`") for check in exercise.checks]
    )
    screens["exercise: a verdict with every check failing"] = render.practice_verdict(
        course, lesson, feedback.output_block(_LONGEST_OUTPUT), failing, passed=False, hints_shown=0
    )
    problems = []
    for what, screen in screens.items():
        problems += _check_screen(screen, what, exercise.source.path, exercise.source.line)
    return problems


def _check_screen(screen: render.Screen, what: str, path: str, line: int) -> list[Problem]:
    problems = []
    if (n := visible_length(screen.text)) > MESSAGE_MAX:
        problems.append(Problem(path, line, f"{what} renders to {n} characters; Telegram allows {MESSAGE_MAX}"))
    for row in screen.buttons.inline_keyboard if screen.buttons else ():
        for button in row:
            data = button.callback_data if isinstance(button.callback_data, str) else ""
            if len(data.encode()) > MAX_BYTES:
                problems.append(Problem(path, line, f"button data {data!r} is over {MAX_BYTES} bytes: shorten the ids"))
    return problems


def _check_question(source: Question) -> list[Problem]:
    where, path, line = f"question '{source.id}'", source.source.path, source.source.line
    # Measured as sent: in a right-to-left language the poll carries isolates too.
    question = render.poll(source)
    problems = []
    if (n := telegram_length(question.question)) > POLL_QUESTION_MAX:
        problems.append(
            Problem(path, line, f"{where}: the question has {n} characters; Telegram allows {POLL_QUESTION_MAX}")
        )
    low, high = POLL_OPTIONS
    if not low <= len(question.options) <= high:
        problems.append(
            Problem(path, line, f"{where}: has {len(question.options)} options; Telegram allows {low} to {high}")
        )
    for index, option in enumerate(question.options, start=1):
        if (n := telegram_length(option)) > POLL_OPTION_MAX:
            problems.append(
                Problem(path, line, f"{where}: option {index} has {n} characters; Telegram allows {POLL_OPTION_MAX}")
            )
    if (n := telegram_length(question.explanation)) > EXPLANATION_MAX:
        problems.append(
            Problem(path, line, f"{where}: the explanation has {n} characters; Telegram allows {EXPLANATION_MAX}")
        )
    if (n := question.explanation.count("\n")) > EXPLANATION_LINE_BREAKS_MAX:
        problems.append(
            Problem(
                path,
                line,
                f"{where}: the explanation has {n} line breaks; Telegram allows {EXPLANATION_LINE_BREAKS_MAX}",
            )
        )
    return problems
