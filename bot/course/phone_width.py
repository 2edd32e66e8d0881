"""Code lines against a phone's width: Telegram wraps a code block's long lines, which breaks Python's indentation.

A warning, not an error: a line that reads worse when split may stay a little over, and the bot shows it.

Why CODE_LINE_MAX is 36 (CJK counts two), from the open-source clients at 390 pt/dp: Telegram for Android
(Theme.createCommonMessageResources, MessageObject.generateLayout) lays a private chat's text out in the screen
less 80 dp and a code block in 15 dp less, 295 dp; its monospace (Droid Sans Mono, 0.6 em a column) is 14 dp in
a block of up to 80 characters, 13 dp up to 220, 11 dp beyond: 35, 37 and 44 columns. Telegram Web's bubbles
are the screen less 89 px (301 px), in Roboto Mono. The web chat shows exactly CODE_LINE_MAX columns (13 px
DejaVu Sans Mono; 37 would fit at 390 px). More in lessons/FORMAT.md, "Why code lines are 36 columns".
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator

from bot.course.model import Content, Lesson, Source
from bot.course.yamlfile import code_line
from bot.errors import Problem

# The evidence for the number (Telegram's clients, the web chat) is in the module docstring.
# Columns of monospace text a typical phone (about 390 points wide) shows in a code block before wrapping.
CODE_LINE_MAX = 36
# Telegram for Android sets a short block (SHORT_BLOCK characters at most) in a bigger font: 35 columns.
SHORT_BLOCK = 80
SHORT_LINE_MAX = 35


def line_max(code: str) -> int:
    """Return the columns a phone shows of ``code``'s lines: fewer in a short block, set in a bigger font."""
    return SHORT_LINE_MAX if len(code) <= SHORT_BLOCK else CODE_LINE_MAX


def display_width(line: str) -> int:
    """Return the columns ``line`` takes in a monospace font: wide (CJK) characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def wide_lines(code: str) -> list[tuple[int, int]]:
    """Return (line number, width) of each line of ``code`` wider than a phone shows (``line_max``)."""
    limit = line_max(code)
    return [
        (number, width)
        for number, line in enumerate(code.splitlines(), start=1)
        if (width := display_width(line)) > limit
    ]


def _shown_code(lesson: Lesson, english: Lesson) -> Iterator[tuple[str, str, Source, tuple[str, ...], str]]:
    """Yield (what, code, source, steps, key) for the code a lesson's file holds: its own, not English shown as is."""
    own = lesson is english
    for slide, source in zip(lesson.slides, english.slides, strict=True):
        if slide.code and (own or (not slide.fallback and slide.code != source.code)):
            yield f"slide '{slide.id}'", slide.code, slide.source, ("slides", f"#{slide.id}"), "code"
    exercise = lesson.exercise
    if exercise is not None and english.exercise is not None:
        if own or (not exercise.fallback and exercise.starter != english.exercise.starter):
            yield "exercise: 'starter'", exercise.starter, exercise.source, ("exercise",), "starter"


def warnings(content: Content) -> list[Problem]:
    """Return a warning for each line of code shown to learners that is too wide for a phone, at its file line."""
    found: list[Problem] = []
    for course in (content.english, *content.translations.values()):
        for lesson, english in zip(course.lessons, content.english.lessons, strict=True):
            for what, code, source, steps, key in _shown_code(lesson, english):
                wide = wide_lines(code)
                first = code_line(source.path, steps, key) if wide else None
                for number, width in wide:
                    found.append(
                        Problem(
                            source.path,
                            source.line if first is None else first + number - 1,
                            f"{what}: code line {number} is {width} columns wide; a phone shows {line_max(code)} "
                            "before it wraps it",
                        )
                    )
    return found
