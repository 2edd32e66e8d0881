"""Typed callback data: a prefix and ids, packed and unpacked in one place, and never trusted."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from enum import Enum
from typing import ClassVar, get_type_hints

from bot.telegram_rules.limits import CALLBACK_DATA_MAX_BYTES

MAX_BYTES = CALLBACK_DATA_MAX_BYTES  # Telegram refuses longer callback_data with BUTTON_DATA_INVALID
SEPARATOR = ":"
_FIELD = re.compile(r"[a-z0-9-]{1,40}")  # always used with fullmatch: '$' would allow a trailing newline


class CallbackDataError(ValueError):
    """Callback data that this bot never produced: forged, stale from another version, or garbled."""


class Move(Enum):
    """What a tap on a drill asks for; the value travels in callback data."""

    PLACE = "p"  # add a line (arg: its piece number) to the arrangement
    UNDO = "u"  # take the last line back
    RESET = "r"  # take every line back
    CHECK = "k"  # grade the arrangement
    CHOOSE = "c"  # pick a choice (arg: its number in the lesson file)
    AGAIN = "a"  # start a solved drill over, to practise it again


@dataclass(frozen=True)
class CallbackData:
    """Base of every button payload; subclasses set ``prefix`` and declare str, int or Enum fields (an Enum travels
    as its value, so a handler gets the member, never a string to parse)."""

    prefix: ClassVar[str] = ""
    _by_prefix: ClassVar[dict[str, type[CallbackData]]] = {}
    # Data an older version packed for a kind that takes no fields now (buttons in chats outlive a release).
    _former: ClassVar[dict[str, type[CallbackData]]] = {}

    def __init_subclass__(cls, prefix: str, former: tuple[str, ...] = (), **kwargs: object):
        super().__init_subclass__(**kwargs)
        if SEPARATOR in prefix or prefix in CallbackData._by_prefix:
            raise TypeError(f"callback prefix {prefix!r} must be unique and contain no {SEPARATOR!r}")
        cls.prefix = prefix
        CallbackData._by_prefix[prefix] = cls
        CallbackData._former.update(dict.fromkeys(former, cls))

    def pack(self) -> str:
        """Return the callback_data string, refusing values Telegram or unpack would reject."""
        parts = [self.prefix]
        for f in fields(self):
            raw = getattr(self, f.name)
            value = str(raw.value) if isinstance(raw, Enum) else str(raw)
            if (isinstance(raw, int) and raw < 0) or not _FIELD.fullmatch(value):
                raise ValueError(
                    f"{type(self).__name__}.{f.name}={value!r}: use 1-40 of a-z, 0-9 and '-' "
                    "(shorten the id in the lesson file)"
                )
            parts.append(value)
        packed = SEPARATOR.join(parts)
        if len(packed.encode()) > MAX_BYTES:
            raise ValueError(
                f"{packed!r} is {len(packed.encode())} bytes; Telegram allows {MAX_BYTES}: use shorter ids"
            )
        return packed

    @staticmethod
    def unpack(data: str | None) -> CallbackData:
        """Parse callback_data from an update; raise CallbackDataError for anything we did not pack."""
        if not data or len(data.encode()) > MAX_BYTES:
            raise CallbackDataError(f"unusable callback data {data!r}")
        if data in CallbackData._former:
            return CallbackData._former[data]()
        prefix, *values = data.split(SEPARATOR)
        cls = CallbackData._by_prefix.get(prefix)
        if cls is None:
            raise CallbackDataError(f"unknown callback prefix in {data!r}")
        declared, required = _field_types(cls)
        # A field added later has a default: buttons sent before it came leave it out, and still work.
        if not required <= len(values) <= len(declared) or not all(_FIELD.fullmatch(v) for v in values):
            raise CallbackDataError(f"malformed callback data {data!r}")
        parsed: dict[str, object] = {}
        for (name, kind), value in zip(declared, values, strict=False):
            if kind is int:
                if not value.isdigit():
                    raise CallbackDataError(f"{name} must be a number in {data!r}")
                parsed[name] = int(value)
            elif isinstance(kind, type) and issubclass(kind, Enum):
                try:
                    parsed[name] = kind(value)
                except ValueError:
                    raise CallbackDataError(f"{name} must be one of {[m.value for m in kind]} in {data!r}") from None
            else:
                parsed[name] = value
        return cls(**parsed)


_FIELD_TYPES: dict[type[CallbackData], tuple[tuple[tuple[str, object], ...], int]] = {}


def _field_types(cls: type[CallbackData]) -> tuple[tuple[tuple[str, object], ...], int]:
    """Each field of a callback kind with its type, in order, and how many have no default (resolved once)."""
    found = _FIELD_TYPES.get(cls)
    if found is None:
        types = get_type_hints(cls)
        declared = fields(cls)
        required = sum(1 for f in declared if f.default is MISSING)
        found = _FIELD_TYPES[cls] = (tuple((f.name, types[f.name]) for f in declared), required)
    return found


@dataclass(frozen=True)
class ShowSlide(CallbackData, prefix="s"):
    """Show the slide with id ``slide`` of a lesson.

    An id, never a position: a button on an old message still names the same slide after the lesson
    was edited. (Buttons made before ids, "s:lesson:3", name no slide and show the learner's place.)
    """

    lesson: str
    slide: str


@dataclass(frozen=True)
class OpenLesson(CallbackData, prefix="l"):
    """Open a lesson where the learner left it."""

    lesson: str


@dataclass(frozen=True)
class Continue(CallbackData, prefix="c", former=("c:course",)):
    """Continue the course where the learner left off."""


@dataclass(frozen=True)
class ShowMenu(CallbackData, prefix="m", former=("m:course",)):
    """Show the course menu in place."""


@dataclass(frozen=True)
class StartQuiz(CallbackData, prefix="q"):
    """Start a lesson's Quick Check."""

    lesson: str


@dataclass(frozen=True)
class ResendPoll(CallbackData, prefix="a"):
    """Send the awaited poll of the lesson's Quick Check round again."""

    lesson: str


@dataclass(frozen=True)
class RetakeMissed(CallbackData, prefix="r"):
    """Ask again only the questions whose latest answer was wrong."""

    lesson: str


class Confirm(Enum):
    """An answer to a confirmation."""

    YES = "yes"
    NO = "no"


@dataclass(frozen=True)
class ConfirmReset(CallbackData, prefix="x"):
    """Answer the reset confirmation."""

    answer: Confirm


def matches(kind: type[CallbackData]) -> Callable[[object], bool]:
    """Return a CallbackQueryHandler pattern that selects taps carrying ``kind``'s prefix."""
    start = kind.prefix + SEPARATOR
    return lambda data: isinstance(data, str) and (data.startswith(start) or data == kind.prefix)


@dataclass(frozen=True)
class StartPractice(CallbackData, prefix="p"):
    """Open a lesson's practice exercise."""

    lesson: str


@dataclass(frozen=True)
class ShowHint(CallbackData, prefix="h"):
    """Show the next hint of the exercise under way: the one about ``mistake`` (bot.mistakes' id) first."""

    lesson: str
    mistake: str = "none"


@dataclass(frozen=True)
class LeavePractice(CallbackData, prefix="e"):
    """Stop taking messages as answers to the exercise."""

    lesson: str


@dataclass(frozen=True)
class ChooseLanguage(CallbackData, prefix="g"):
    """Speak ``language`` from now on ('pt-br' for pt_BR), or follow Telegram's setting ('auto')."""

    language: str

    AUTO: ClassVar[str] = "auto"

    @staticmethod
    def _field(language: str) -> str:
        # Callback fields are [a-z0-9-]: pt_BR travels as pt-br.
        return language.lower().replace("_", "-")

    @classmethod
    def of(cls, language: str | None) -> ChooseLanguage:
        return cls(cls.AUTO if language is None else cls._field(language))

    def resolve(self, shipped: list[str]) -> str | None:
        """Return the shipped language this button names (None for 'auto'); raise CallbackDataError if none."""
        if self.language == self.AUTO:
            return None
        for language in shipped:
            if self._field(language) == self.language:
                return language
        raise CallbackDataError(f"no shipped language {self.language!r}")


@dataclass(frozen=True)
class StartDrills(CallbackData, prefix="dl"):
    """Open a lesson's drills in a new message, at the first one not solved yet."""

    lesson: str


@dataclass(frozen=True)
class ShowDrill(CallbackData, prefix="dv"):
    """Show one drill of a lesson in the tapped message."""

    lesson: str
    drill: str


@dataclass(frozen=True)
class DrillTap(CallbackData, prefix="dm"):
    """A move on the drill shown: ``arg`` is the piece or choice ``move`` names.

    ``turn`` is the attempt's turn the screen was drawn at: a tap from an older screen is stale.
    """

    lesson: str
    drill: str
    move: Move
    arg: int
    turn: int


# What brings a learner back (bot.retention): the review, the reminders and their settings.


@dataclass(frozen=True)
class StartReview(CallbackData, prefix="rv"):
    """Start the review of the cards due now (from a reminder, /progress, or the end of a review)."""

    where: str = "now"


@dataclass(frozen=True)
class StopReview(CallbackData, prefix="rx"):
    """Stop the review under way; the cards left wait for the next one."""

    where: str = "now"


@dataclass(frozen=True)
class ReviewChoice(CallbackData, prefix="rc"):
    """An answer to a choice drill's review card: ``choice`` is its number in the lesson file.

    ``seen`` is the card's last review (seconds, modulo 10**6) when the screen was drawn: a tap from an
    older screen of the card is stale.
    """

    card: int
    choice: int
    seen: int


@dataclass(frozen=True)
class ReminderChoice(CallbackData, prefix="rm"):
    """A reminder button: 'yes' or 'no' (the offer's answer), 'on' or 'off' (/settings, a reminder's Stop), 'snooze',
    'earlier' or 'later' (move the hour by one), 'auto' (back to the learner's habit)."""

    action: str
