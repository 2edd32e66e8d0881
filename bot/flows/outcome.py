"""What a flow decides for one update: the screens to show, the changes to store, the events to record."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from bot.changes import Change, Event
from bot.i18n import _
from bot.learner import ReaderView
from bot.render import Screen


class Where(Enum):
    """Where a screen is shown."""

    TAPPED = "tapped"  # in the message whose button was tapped, edited in place (sent anew if it cannot be)
    NEW = "new"  # as a new message, below


@dataclass(frozen=True)
class Show:
    """One screen to show; ``reader``: the message showing it becomes the one edited in place, showing that;
    ``supersedes``: see below."""

    screen: Screen
    where: Where = Where.TAPPED
    reader: ReaderView | None = None
    # A new message that supersedes the last one shown with ``supersedes``: that one's buttons are taken off, so
    # old practice buttons (Hint, Leave) do not pile up.
    supersedes: bool = False


@dataclass(frozen=True)
class ResumeQuiz:
    """Bring the Quick Check round under way in ``lesson_id`` back into view (its poll is Telegram's side)."""

    lesson_id: str
    asked: bool = False  # the learner asked for the poll again in so many words: no double-tap guard


@dataclass(frozen=True)
class Outcome:
    """What one update does: ``changes`` and ``events`` stored in one transaction with the replies showing its
    screens, which go out once it commits (bot.handlers.common.carry_out)."""

    screens: tuple[Show, ...] = ()
    changes: tuple[Change, ...] = ()
    events: tuple[Event, ...] = ()
    toast: str | None = None  # the answer to a tapped button
    resume: ResumeQuiz | None = None  # then, the Quick Check's Telegram side

    def then(self, other: Outcome) -> Outcome:
        """Return this outcome followed by ``other`` (its toast and resume win when set)."""
        return Outcome(
            screens=self.screens + other.screens,
            changes=self.changes + other.changes,
            events=self.events + other.events,
            toast=other.toast if other.toast is not None else self.toast,
            resume=other.resume or self.resume,
        )


def toast(text: str) -> Outcome:
    """Return an outcome that only answers the tap with ``text``."""
    return Outcome(toast=text)


def lesson_gone() -> str:
    """Return the toast for a button naming a lesson the course no longer has."""
    return _("This lesson is no longer in the course. Send /lessons to see the course.")


def button_refused() -> str:
    """Return the toast for a tap whose data this bot never made."""
    return _("This button is not valid any more. Send /lessons to see the course.")
