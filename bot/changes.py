"""What one update changes in a learner's records, as data: the flows (bot.flows) decide these, storage writes them.

bot.storage.outcomes writes every change and event of one update in one transaction, keyed by the update, so an
update replayed after a crash stores nothing twice. Each record names one step of a machine in bot.states.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.learner import DrillProgress, EventKind, ReaderView, SentPoll


@dataclass(frozen=True)
class Event:
    """One learning event to record (bot.learner.EventKind says what each kind's fields hold)."""

    kind: EventKind
    lesson_id: str
    item_id: str | None = None
    option_id: str | None = None
    verdict: str | None = None
    failed_check: str | None = None


@dataclass(frozen=True)
class SlideShown:
    """The learner is on ``slide_id`` of ``lesson_id``; ``last`` marks the lesson's slides read for good."""

    lesson_id: str
    slide_id: str
    furthest_slide_id: str  # the furthest slide reached, this one included
    last: bool


@dataclass(frozen=True)
class ReaderAt:
    """The message edited in place for the learner, and what it shows now."""

    message_id: int
    view: ReaderView


@dataclass(frozen=True)
class DrillSaved:
    """An attempt at a drill moved from ``before`` to ``after``: stored only if it is still ``before``
    (compare-and-set); otherwise the whole outcome is dropped and the tap is stale."""

    lesson_id: str
    drill_id: str
    before: DrillProgress
    after: DrillProgress


@dataclass(frozen=True)
class LessonCompleted:
    """The lesson is done (its DONE event is recorded with it, once: only when it was not done before)."""

    lesson_id: str


@dataclass(frozen=True)
class AnswerRecorded:
    """A Quick Check answer: the position tapped and the option there. Recorded once per poll: if it was recorded
    before, the whole outcome is dropped (a replay). ``remaining``: the round's questions left when it answers the
    awaited poll (its question popped), None when it answers an earlier poll, which moves nothing."""

    poll: SentPoll
    option_index: int
    option_id: str
    correct: bool
    remaining: tuple[str, ...] | None


@dataclass(frozen=True)
class QuizStarted:
    """A Quick Check round of ``question_ids`` begins, replacing any under way; ``seed`` is its shuffle."""

    lesson_id: str
    question_ids: tuple[str, ...]
    seed: int


@dataclass(frozen=True)
class PracticeStarted:
    """The learner is on a lesson's exercise, with no hints shown yet: messages are answers now."""

    lesson_id: str


@dataclass(frozen=True)
class PracticeLeft:
    """The learner left the exercise under way: messages are no longer answers."""


@dataclass(frozen=True)
class HintsShown:
    """The learner has seen ``count`` hints of the exercise under way."""

    count: int


@dataclass(frozen=True)
class AttemptGraded:
    """One graded attempt at a lesson's exercise."""

    lesson_id: str
    passed: bool


@dataclass(frozen=True)
class LanguageChosen:
    """The learner's chosen language (None: follow Telegram's)."""

    language: str | None


@dataclass(frozen=True)
class CardMet:
    """A review card made by the first answer to an item in a lesson, that answer its first review (bot.retention.review
    columns); a card that exists already is kept as it is."""

    card: dict[str, int | float | str | None]
    entry: dict[str, int | str | None]


@dataclass(frozen=True)
class CardReviewed:
    """A review card rescheduled by an answer, stored only if it is still as it was reviewed from (its last review is
    ``before``); with ``required``, a card changed meanwhile drops the whole outcome (a double tap, a replay)."""

    card: dict[str, int | float | str | None]
    before: int | None
    entry: dict[str, int | str | None]
    required: bool = True


@dataclass(frozen=True)
class StreakDay:
    """The learner finished something on ``day`` (their local day, ISO): it counts in their streak."""

    day: str


@dataclass(frozen=True)
class RemindersOffered:
    """The learner finished a lesson while never asked about reminders: they are offered now (once: only while the
    status is still unasked)."""


@dataclass(frozen=True)
class CompletionCardClaimed:
    """The learner finished the whole course: their completion card goes out, marked ``at`` (epoch seconds), once."""

    at: int


@dataclass(frozen=True)
class ActivityNoted:
    """The learner did something at ``at`` (epoch seconds): noted unless a row lies within ``step`` seconds before it
    (a session leaves a few rows, not one per tap) or this update noted it before (a replay). A row added answers
    the reminders sent before it (none counts as ignored any more) and sets the learner's UTC offset to
    ``utc_offset`` (minutes) if none is stored yet; it changes their habit, so their reminder is planned again."""

    at: int
    step: int
    utc_offset: int | None = None


Change = (
    SlideShown
    | ReaderAt
    | DrillSaved
    | AnswerRecorded
    | LessonCompleted
    | QuizStarted
    | PracticeStarted
    | PracticeLeft
    | HintsShown
    | AttemptGraded
    | LanguageChosen
    | CardMet
    | CardReviewed
    | StreakDay
    | RemindersOffered
    | CompletionCardClaimed
    | ActivityNoted
)
