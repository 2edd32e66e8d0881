"""Live content: the lessons and catalogs the bot teaches from, replaced while it runs.

An Edition is one checked version of both. Library.reload() reads the files again and
lints them exactly as `coursebot lint` and the start do; invalid content is refused with
the same `file:line: message` lines, and the edition in use keeps serving. A valid one
replaces it in one assignment, so an update sees one edition from start to end: it
pins ``library.current`` when it begins (bot.context.update_scope).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from bot.course.model import Content
from bot.errors import ContentError, Problem, StorageError
from bot.i18n import I18n
from bot.library.load import lint

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Edition:
    """One version of what the bot teaches: the lessons and the catalogs, checked together."""

    content: Content
    i18n: I18n
    number: int = 1  # 1 at start, one more for every accepted reload


@dataclass(frozen=True)
class Reloaded:
    """What a reload did: `problems` empty means the new edition is in use."""

    edition: Edition  # the edition in use after the reload
    problems: tuple[Problem, ...] = ()

    @property
    def accepted(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        """What to tell an operator: the problems as file:line: message, or what is now in use."""
        if self.problems:
            return [str(p) for p in self.problems]
        lessons = self.edition.content.english.lessons
        return [
            f"edition {self.edition.number}: {len(lessons)} lessons in {len(self.edition.i18n.languages)} languages"
        ]


_pinned: ContextVar[Edition | None] = ContextVar("edition", default=None)


def read(lessons_dir: Path, locales_dir: Path) -> tuple[I18n, Content | None, list[Problem]]:
    """Compile the catalogs and lint the lessons with them (blocking: files and YAML)."""
    i18n = I18n(locales_dir)
    content, problems = lint(lessons_dir, i18n)
    return i18n, content, problems


class Library:
    """The edition in use, and the way to replace it. Built at start from valid content only."""

    def __init__(self, lessons_dir: Path, locales_dir: Path, edition: Edition | None = None):
        self.lessons_dir = lessons_dir
        self.locales_dir = locales_dir
        if edition is None:
            i18n, content, problems = read(lessons_dir, locales_dir)
            if problems or content is None:
                raise ContentError(problems or [Problem(str(lessons_dir), 1, "no content")])
            edition = Edition(content, i18n)
        self._current = edition
        self._lock = asyncio.Lock()
        # Told of every reload, accepted or refused: the web chat's banner, the command menu.
        self.listeners: list[Callable[[Reloaded], None]] = []
        # Run with a valid edition before it is put in use (the database adopting its lessons); if it fails,
        # the reload is refused and the edition in use keeps serving.
        self.prepare: Callable[[Edition], Awaitable[None]] | None = None

    @property
    def current(self) -> Edition:
        """The edition an update pinned when it began, else the newest."""
        return _pinned.get() or self._current

    @property
    def newest(self) -> Edition:
        return self._current

    @contextmanager
    def pinned(self) -> Iterator[Edition]:
        """Keep the newest edition for the code inside the block (one update), whatever reloads meanwhile."""
        token = _pinned.set(self._current)
        try:
            yield self._current
        finally:
            _pinned.reset(token)

    def pin(self) -> Edition:
        """Pin the newest edition for the rest of the current task (an update's handling); returns it."""
        _pinned.set(self._current)
        return self._current

    async def reload(self) -> Reloaded:
        """Read and lint the files again; use them if valid, else keep the edition in use."""
        async with self._lock:  # one reload at a time, each one reading the files afresh
            i18n, content, problems = await asyncio.to_thread(read, self.lessons_dir, self.locales_dir)
            if problems or content is None:
                outcome = Reloaded(self._current, tuple(problems or [Problem(str(self.lessons_dir), 1, "no content")]))
                log.error("content reload refused; still serving edition %d:", self._current.number)
                for line in outcome.lines():
                    log.error("%s", line)
            else:
                outcome = await self._put_in_use(Edition(content, i18n, self._current.number + 1))
        for listen in self.listeners:
            listen(outcome)
        return outcome

    async def _put_in_use(self, edition: Edition) -> Reloaded:
        if self.prepare is not None:
            try:
                await self.prepare(edition)
            except (StorageError, sqlite3.Error) as exc:
                log.error("content reload refused: the progress database could not follow it: %s", exc)
                return Reloaded(self._current, (Problem(str(self.lessons_dir), 1, f"progress database: {exc}"),))
        self._current = edition
        outcome = Reloaded(edition)
        log.info("content reloaded: %s", outcome.lines()[0])
        return outcome
