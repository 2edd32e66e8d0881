"""The small exception tree of coursebot: failures of infrastructure, never a learner's mistake."""

from __future__ import annotations

from dataclasses import dataclass


class CoursebotError(Exception):
    """Something coursebot depends on is broken."""


class ConfigError(CoursebotError):
    """The environment does not configure the bot correctly."""


@dataclass(frozen=True)
class Problem:
    """One problem in a content file, located at a line."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


class ContentError(CoursebotError):
    """The lesson files are invalid; carries every problem found, each with file and line."""

    def __init__(self, problems: list[Problem]):
        self.problems = sorted(problems, key=lambda p: (p.path, p.line, p.message))
        super().__init__("\n".join(str(p) for p in self.problems))


class StorageError(CoursebotError):
    """The progress database cannot be opened, migrated or written."""


class BotApiRefused(CoursebotError):
    """The Bot API refused an operator's request (a deploy step such as setWebhook), or could not be reached."""


class ClaimLost(CoursebotError):
    """An update's write found its claim taken over by another replica (this one was frozen past its lease): nothing
    of it is stored, nothing is sent; the other replica handles the update."""
