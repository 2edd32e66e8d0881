"""Check lesson content against everything the bot relies on, including Telegram's limits."""

from __future__ import annotations

import html
import re
from pathlib import Path

from bot import loader, practice, render
from bot.course import Content, Course
from bot.errors import ContentError, Problem
from bot.i18n import I18n
from runner.result import RunResult

# Telegram's limits (Bot API): characters after entity parsing, counted in UTF-16 code units.
MESSAGE_MAX = 4096
POLL_QUESTION_MAX = 300
POLL_OPTIONS = (2, 10)
POLL_OPTION_MAX = 100
EXPLANATION_MAX = 200
EXPLANATION_LINE_BREAKS_MAX = 2


def telegram_length(text: str) -> int:
    """Return the length Telegram counts: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def visible_length(html_text: str) -> int:
    """Return the length of rendered HTML once Telegram has parsed its entities."""
    return telegram_length(html.unescape(re.sub(r"<[^>]+>", "", html_text)))


def _check_course(course: Course, i18n: I18n) -> list[Problem]:
    problems: list[Problem] = []
    with i18n.use(course.language):
        for lesson in course.lessons:
            for index, slide in enumerate(lesson.slides):
                if slide.fallback:
                    continue  # checked in English
                screen = render.slide(course, lesson, index)
                if (n := visible_length(screen.text)) > MESSAGE_MAX:
                    problems.append(
                        Problem(
                            slide.source.path,
                            slide.source.line,
                            f"slide '{slide.id}' renders to {n} characters; Telegram allows {MESSAGE_MAX}",
                        )
                    )
                problems += _check_buttons(screen, slide.source.path, slide.source.line)
            for question in lesson.quiz:
                if not question.fallback:
                    problems += _check_question(question)
            result = render.quiz_result(course, lesson, len(lesson.quiz), 0)
            if (n := visible_length(result.text)) > MESSAGE_MAX:
                problems.append(
                    Problem(
                        lesson.source.path,
                        lesson.source.line,
                        f"the recap renders to {n} characters; Telegram allows {MESSAGE_MAX}",
                    )
                )
            if lesson.exercise is not None and (course.language == "en" or not lesson.exercise.fallback):
                problems += _check_exercise(course, lesson)
    return problems


# The longest output a verdict shows: what is left is the room for the exercise's own messages.
_LONGEST_OUTPUT = RunResult(
    status="ok", stdout="x" * practice.OUTPUT_MAX, stderr="", exit_code=0, signal=None, duration_ms=0.0, truncated=True
)


def _check_exercise(course: Course, lesson) -> list[Problem]:
    """Check every screen of the practice: the task, each hint, and a verdict with every check failing."""
    exercise = lesson.exercise
    path, line = exercise.source.path, exercise.source.line
    screens = {"the practice task": render.practice_intro(course, lesson)}
    for shown in range(1, len(exercise.hints) + 1):
        screens[f"hint {shown}"] = render.hint(lesson, course, shown)
    feedback = practice.markup_lines(
        [check.fail.replace("{got}", "`tensor([1., 2., 3.])`") for check in exercise.checks]
    )
    screens["a verdict with every check failing"] = render.practice_verdict(
        course, lesson, practice.output_block(_LONGEST_OUTPUT), feedback, passed=False, hints_shown=0
    )
    problems = []
    for what, screen in screens.items():
        if (n := visible_length(screen.text)) > MESSAGE_MAX:
            problems.append(
                Problem(path, line, f"exercise: {what} renders to {n} characters; Telegram allows {MESSAGE_MAX}")
            )
        problems += _check_buttons(screen, path, line)
    return problems


def _check_buttons(screen: render.Screen, path: str, line: int) -> list[Problem]:
    problems = []
    for row in screen.buttons.inline_keyboard if screen.buttons else ():
        for button in row:
            if len((button.callback_data or "").encode()) > 64:
                problems.append(
                    Problem(path, line, f"button data {button.callback_data!r} is over 64 bytes: shorten the ids")
                )
    return problems


def _check_question(source) -> list[Problem]:
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


def lint(lessons_dir: Path, locales: Path | I18n) -> tuple[Content | None, list[Problem]]:
    """Load and check everything under ``lessons_dir``; return the content and every problem.

    ``locales`` is the catalogs folder, or the catalogs already compiled (the bot has them).
    """
    content, problems = loader.load(Path(lessons_dir))
    if content is None:
        return None, problems
    i18n = locales if isinstance(locales, I18n) else I18n(locales)
    problems += _check_course(content.english, i18n)
    for course in content.translations.values():
        problems += _check_course(course, i18n)
    return content, problems


def load_valid(lessons_dir: Path, locales: Path | I18n) -> Content:
    """Return the content if it passes lint; raise ContentError with every problem otherwise."""
    content, problems = lint(lessons_dir, locales)
    if problems or content is None:
        raise ContentError(problems or [Problem(str(lessons_dir), 1, "no content")])
    return content
