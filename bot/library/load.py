"""Load the course for use: parse every lesson file, then check every screen it renders against Telegram's limits."""

from __future__ import annotations

from pathlib import Path

from bot.course.model import Content
from bot.course.parsing import parse
from bot.errors import ContentError, Problem
from bot.i18n import I18n
from bot.library.screens import check_course


def lint(lessons_dir: Path, locales: Path | I18n) -> tuple[Content | None, list[Problem]]:
    """Load and check everything under ``lessons_dir``; return the content (None if unusable) and every problem.

    ``locales`` is the catalogs folder, or the catalogs already compiled (the bot has them).
    """
    content, problems = parse(Path(lessons_dir))
    if content is None:
        return None, problems
    i18n = locales if isinstance(locales, I18n) else I18n(locales)
    for course in (content.english, *content.translations.values()):
        problems += check_course(course, i18n)
    return content, problems


def load_valid(lessons_dir: Path, locales: Path | I18n) -> Content:
    """Return the content if it passes lint; raise ContentError with every problem otherwise."""
    content, problems = lint(lessons_dir, locales)
    if problems or content is None:
        raise ContentError(problems or [Problem(str(lessons_dir), 1, "no content")])
    return content
