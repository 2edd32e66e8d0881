"""Links straight into the course: ``t.me/<bot>?start=<lesson id>`` opens a lesson, ``?start=review`` the review.

Telegram hands the payload to the bot as the text after ``/start``. It is untrusted: anyone can type
``/start`` with anything after it, or edit a link. ``parse`` turns it into what to open, or into an
``UnknownLink`` that the flow shows as the course menu with a short note; it never raises.

A lesson's payload is its id (lowercase words joined by '-', at most 32 characters: always within
Telegram's 64 characters of ``A-Za-z0-9_-``). Ids are stable across edits and languages, so a link shared
today still opens the same lesson after the course is reordered, in whatever language the learner reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from telegram.constants import MessageLimit
from telegram.helpers import create_deep_linked_url

from bot.course.model import Course, Lesson

PAYLOAD_MAX = MessageLimit.DEEP_LINK_LENGTH  # Telegram's limit for a start parameter: 64 characters
_PAYLOAD = re.compile(rf"[A-Za-z0-9_-]{{1,{PAYLOAD_MAX}}}")  # used with fullmatch: '$' would allow a newline

REVIEW = "review"
# Payloads that mean something other than a lesson; a lesson with such an id could not be linked to.
RESERVED = frozenset({REVIEW})


@dataclass(frozen=True)
class OpenLesson:
    """Open this lesson (where the learner left it, or at its start)."""

    lesson_id: str


@dataclass(frozen=True)
class OpenReview:
    """Open the review of the cards due now."""


class Unusable(StrEnum):
    """Why a payload leads nowhere."""

    MALFORMED = "malformed"  # too long, or characters a link we made never has
    NO_SUCH_LESSON = "no-such-lesson"  # well formed, but no lesson (any more) has that id


@dataclass(frozen=True)
class UnknownLink:
    """A payload that opens nothing: the flow shows the course menu with a short note."""

    why: Unusable
    payload: str  # for the log only: cut to PAYLOAD_MAX characters, non-printable ones escaped

    @classmethod
    def of(cls, why: Unusable, payload: str) -> UnknownLink:
        """Return an UnknownLink keeping a bounded, printable copy of ``payload`` for the log."""
        shown = payload[:PAYLOAD_MAX]
        return cls(why, shown if shown.isprintable() else shown.encode("unicode_escape").decode("ascii"))


Link = OpenLesson | OpenReview | UnknownLink


def parse(payload: str | None, course: Course) -> Link | None:
    """Return what a ``/start`` payload opens; None for a plain ``/start`` (no payload)."""
    if payload is None or not payload.strip():
        return None
    payload = payload.strip()
    if not _PAYLOAD.fullmatch(payload):
        return UnknownLink.of(Unusable.MALFORMED, payload)
    # Lesson ids are lowercase; a payload typed by hand with capitals still finds its lesson.
    code = payload.lower()
    if code == REVIEW:
        return OpenReview()
    lesson = course.lesson(code)
    return OpenLesson(lesson.id) if lesson is not None else UnknownLink.of(Unusable.NO_SUCH_LESSON, payload)


def lesson_payload(lesson: Lesson) -> str:
    """Return the payload that opens ``lesson``; raise ValueError if its id cannot be one (see ``problems``)."""
    if lesson.id in RESERVED or not _PAYLOAD.fullmatch(lesson.id):
        raise ValueError(f"lesson id {lesson.id!r} cannot be a link: rename the lesson (see problems())")
    return lesson.id


def url(bot_username: str, payload: str | None = None) -> str:
    """Return ``https://t.me/<bot>`` with ``?start=<payload>`` when there is one (PTB checks it too)."""
    return create_deep_linked_url(bot_username, payload)


def lesson_url(bot_username: str, lesson: Lesson) -> str:
    """Return the link that opens ``lesson`` in the bot."""
    return url(bot_username, lesson_payload(lesson))


def review_url(bot_username: str) -> str:
    """Return the link that opens the review."""
    return url(bot_username, REVIEW)


def course_links(bot_username: str, course: Course) -> list[tuple[Lesson, str]]:
    """Return every lesson of ``course`` with its link, in course order (what ``coursebot links`` prints)."""
    return [(lesson, lesson_url(bot_username, lesson)) for lesson in course.lessons]


def problems(course: Course) -> list[str]:
    """Return one line per lesson whose id cannot be a link payload, saying how to fix it."""
    found = []
    for lesson in course.lessons:
        if lesson.id in RESERVED:
            found.append(f"lesson id {lesson.id!r} is what a link to the {lesson.id} means: choose another id")
        elif not _PAYLOAD.fullmatch(lesson.id):
            found.append(
                f"lesson id {lesson.id!r} cannot be a link: use at most {PAYLOAD_MAX} of A-Z, a-z, 0-9, '_' and '-'"
            )
    return found
