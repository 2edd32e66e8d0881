"""Check every screen the content renders to against Telegram's limits, in every language."""

from __future__ import annotations

import re

from bot import feedback, mistakes, render
from bot.course.model import Course, Drill, Lesson, ParsonsDrill, Question
from bot.drills import Reason, Verdict
from bot.errors import Problem
from bot.i18n import DEFAULT_LANGUAGE, I18n
from bot.learner import FRESH, DrillProgress
from bot.telegram_rules.html import HtmlError, parse_html
from bot.telegram_rules.limits import (
    MESSAGE_TEXT_MAX,
    POLL_EXPLANATION_LINE_FEEDS,
    POLL_EXPLANATION_MAX,
    POLL_OPTION_MAX,
    POLL_OPTIONS_MIN,
    POLL_QUESTION_MAX,
)
from bot.telegram_rules.text import visible_length
from bot.telegram_rules.units import utf16_len
from runner.client import CheckOutcome, MessageKey, RunResult, Status

# Telegram takes up to 12 options; the course format (lessons/FORMAT.md) keeps a Quick Check to 10.
POLL_OPTIONS = (POLL_OPTIONS_MIN, 10)

# One phone screen: a 6.1-inch phone at Telegram's default text size shows about 30 lines of 40 characters
# between the chat's title and its input bar (code, monospaced, fits phone_width.CODE_LINE_MAX); a row of buttons is as
# tall as two lines. A drill is tapped through without scrolling, so each of its screens must fit.
PHONE_LINES = 30
PHONE_LINE_CHARS = 40
BUTTON_ROW_LINES = 2
_PRE = re.compile(r"<pre>(.*?)</pre>", re.DOTALL)


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
            for drill in lesson.drills:
                if course.language == DEFAULT_LANGUAGE or not drill.fallback:
                    problems += _check_drill(course, lesson, drill)
    return problems


def phone_lines(screen: render.Screen) -> int:
    """Return how many lines of a phone screen a message takes: its wrapped text, then its rows of buttons."""
    lines = 0
    segments = _PRE.split(screen.text)
    for index, segment in enumerate(segments):
        pieces = parse_html(segment)[0].split("\n")  # untrimmed: its line breaks are lines
        if index % 2:  # inside <pre>: code, one line per line
            lines += len(pieces)
            continue
        # A block of code starts and ends a line of its own: the text around it shares no line with it.
        pieces = pieces[1 if index else 0 : -1 if index + 1 < len(segments) else None]
        lines += sum(max(1, -(-utf16_len(line) // PHONE_LINE_CHARS)) for line in pieces)
    rows = len(screen.buttons.inline_keyboard) if screen.buttons else 0
    return lines + BUTTON_ROW_LINES * rows


def _check_drill(course: Course, lesson: Lesson, drill: Drill) -> list[Problem]:
    """Check the tallest screens of a drill: untouched, answered wrong with every message, and solved."""
    every = frozenset(d.id for d in lesson.drills)
    if isinstance(drill, ParsonsDrill):
        order = list(range(len(drill.pieces)))
        wrong = Verdict(
            False, Reason.CHECKS, failed=tuple(c.fail.replace("{got}", "`tensor([1., 2., 3.])`") for c in drill.checks)
        )
        placed = DrillProgress(placed=tuple(range(len(drill.lines))), turn=1, checked=True)
        right = Verdict(True, Reason.SAME_RESULTS)
    else:
        order = list(range(len(drill.choices)))
        wrong_ones = [i for i in range(len(drill.choices)) if i != drill.correct]
        longest = max(wrong_ones, key=lambda i: len(drill.choices[i]) + len(drill.reason(i)))  # with its reason
        wrong = Verdict(False, Reason.WRONG_CHOICE, drill.choices[longest])
        placed = DrillProgress(ruled_out=frozenset(order) - {drill.correct}, turn=1)
        right = Verdict(True, Reason.RIGHT_CHOICE)
    solved = DrillProgress(placed=placed.placed, turn=2, solved=True, done=True)
    screens = {
        "its first screen": render.DrillView(FRESH, order),
        "a wrong answer": render.DrillView(placed, order, verdict=wrong),
        "its last screen, solved": render.DrillView(solved, order, every, right, quiz_left=True),
    }
    problems = []
    where = f"drill '{drill.id}'"
    for what, view in screens.items():
        screen = render.drill(course, lesson, drill, view)
        problems += _check_screen(screen, f"{where}: {what}", drill.source.path, drill.source.line)
        if (n := phone_lines(screen)) > PHONE_LINES:
            problems.append(
                Problem(
                    drill.source.path,
                    drill.source.line,
                    f"{where}: {what} takes {n} lines of a phone screen, about {PHONE_LINES} fit: "
                    "shorten the prompt, the code or the explanation",
                )
            )
    return problems


# A verdict keeps at least this much of a run's output when every check fails at once (the rest of the
# message is the exercise's own words, which lint keeps short enough for it).
OUTPUT_ROOM_MIN = 1000
# The longest value a failed check shows (the runner cuts what it renders at this many characters).
_LONGEST_VALUE = "[" + "1.2345, " * 9 + "1.…"


def _worst_verdict(course: Course, lesson: Lesson) -> render.Screen:
    """A verdict with every check failing, the longest values shown, every likely mistake, and endless output."""
    exercise = lesson.exercise
    assert exercise is not None
    failing = tuple(
        CheckOutcome(c.id, False, MessageKey.MISMATCH, {"got": _LONGEST_VALUE, "expected": _LONGEST_VALUE})
        for c in exercise.checks
    )
    result = RunResult(Status.OK, "x" * feedback.OUTPUT_MAX, "", 0, None, 0.0, True, checks=failing)
    lines = feedback.check_feedback(exercise, result)
    everything = [m.explain(mistakes.Evidence(expr=exercise.checks[0].expr, ratio=2)) for m in mistakes.MISTAKES]
    return render.fitting(
        lambda room: render.verdict_screen(course, lesson, result, lines, everything, hints_shown=0, output_room=room),
        feedback.OUTPUT_MAX,
    )


def _check_exercise(course: Course, lesson: Lesson) -> list[Problem]:
    """Check every screen of the practice: the task, each hint, and a verdict with every check failing."""
    exercise = lesson.exercise
    assert exercise is not None
    screens = {"exercise: the practice task": render.practice_intro(course, lesson)}
    for shown in range(1, len(exercise.hints) + 1):
        screens[f"exercise: hint {shown}"] = render.hint(lesson, course, shown)
    problems = []
    for what, screen in screens.items():
        problems += _check_screen(screen, what, exercise.source.path, exercise.source.line)
    verdict = _worst_verdict(course, lesson)
    if (room := MESSAGE_TEXT_MAX - (visible_length(verdict.text) - _output_length(verdict))) < OUTPUT_ROOM_MIN:
        problems.append(
            Problem(
                exercise.source.path,
                exercise.source.line,
                f"exercise: a verdict with every check failing leaves {room} characters for the learner's output "
                f"(at least {OUTPUT_ROOM_MIN}); shorten the fail messages",
            )
        )
    return problems


def _output_length(screen: render.Screen) -> int:
    """The length of the output block (<pre>...</pre>) in a verdict, as Telegram counts it."""
    text = str(screen.text)
    start, end = text.find("<pre>"), text.find("</pre>")
    return visible_length(text[start : end + len("</pre>")]) if 0 <= start < end else 0


def _check_screen(screen: render.Screen, what: str, path: str, line: int) -> list[Problem]:
    try:
        n = visible_length(screen.text)
    except HtmlError as exc:
        return [Problem(path, line, f"{what} renders to HTML Telegram refuses ({exc}): check its markup")]
    # A button's data needs no check here: CallbackData.pack refuses more than Telegram's 64 bytes as it is built,
    # and the readers keep the ids it packs short enough (bot.course.parsing).
    if n > MESSAGE_TEXT_MAX:
        return [Problem(path, line, f"{what} renders to {n} characters; Telegram allows {MESSAGE_TEXT_MAX}")]
    return []


def _check_question(source: Question) -> list[Problem]:
    where, path, line = f"question '{source.id}'", source.source.path, source.source.line
    # Measured as sent: in a right-to-left language the poll carries isolates too.
    question = render.poll(source)
    problems = []
    if (n := utf16_len(question.question)) > POLL_QUESTION_MAX:
        problems.append(
            Problem(path, line, f"{where}: the question has {n} characters; Telegram allows {POLL_QUESTION_MAX}")
        )
    low, high = POLL_OPTIONS
    if not low <= len(question.options) <= high:
        problems.append(
            Problem(path, line, f"{where}: has {len(question.options)} options; Telegram allows {low} to {high}")
        )
    for index, option in enumerate(question.options, start=1):
        if (n := utf16_len(option)) > POLL_OPTION_MAX:
            problems.append(
                Problem(path, line, f"{where}: option {index} has {n} characters; Telegram allows {POLL_OPTION_MAX}")
            )
    if (n := utf16_len(question.explanation)) > POLL_EXPLANATION_MAX:
        problems.append(
            Problem(
                path,
                line,
                f"{where}: the explanation has {n} characters; Telegram allows {POLL_EXPLANATION_MAX}",
            )
        )
    if (n := question.explanation.count("\n")) > POLL_EXPLANATION_LINE_FEEDS:
        problems.append(
            Problem(
                path,
                line,
                f"{where}: the explanation has {n} line breaks; Telegram allows {POLL_EXPLANATION_LINE_FEEDS}",
            )
        )
    return problems
