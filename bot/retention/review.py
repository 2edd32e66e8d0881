"""Spaced review: one FSRS card per Quick Check question and per drill a learner has met, and what is due.

A card is born when the learner first answers its question or drill in a lesson: that answer is its first
review. The learner never rates themselves: a right answer on the first try is Good, anything else Again
(the FSRS maintainers' advice for pass/fail answers; Hard would count a failure as a pass, and Easy is not
ours to claim). A chat course has no 1- and 10-minute learning steps, so every card is scheduled in whole
days from its first answer on, at most a year ahead, fuzzed so cards met together drift apart.

Cards are stored as plain columns (``ReviewCard``) and every review appends a ``ReviewEntry``, enough for
FSRS's optimizer to tune the parameters later. Everything here is a pure function of its arguments: the
time of a review is passed in, and the fuzz is drawn from a generator seeded by the card and that time,
so a replayed update schedules exactly the same day.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum

import fsrs.scheduler as fsrs_scheduler
from fsrs import Card, Rating, ReviewLog, Scheduler, State

from bot.course.model import Lesson


class ItemKind(StrEnum):
    """What a card asks again: a Quick Check question or a drill (Parsons, fill-in, predict)."""

    QUESTION = "question"
    DRILL = "drill"


@dataclass(frozen=True, order=True)
class CardKey:
    """Which item of the course a card is for: ids from the lesson files, stable across edits and languages."""

    lesson: str
    kind: ItemKind
    item: str


def lesson_cards(lesson: Lesson) -> tuple[CardKey, ...]:
    """Return the cards a lesson can give: each Quick Check question, then each drill, in lesson order."""
    questions = (CardKey(lesson.id, ItemKind.QUESTION, q.id) for q in lesson.quiz)
    drills = (CardKey(lesson.id, ItemKind.DRILL, d.id) for d in lesson.drills)
    return (*questions, *drills)


def card_id(learner: int, key: CardKey) -> int:
    """Return the card's id: the same for the same learner and item on every run, unique in practice.

    FSRS keys its review log (and its optimizer) on an integer card id. Deriving it from the card's identity,
    rather than from the clock as the library's default does (it sleeps 1 ms to avoid collisions, blocking
    the event loop), makes a replayed first answer find the card it already made. 63 bits fit SQLite's INTEGER;
    at a million learners with 30 cards each, a collision has odds of about 1 in 20,000,000.
    """
    digest = hashlib.blake2b(f"{learner}:{key.lesson}:{key.kind}:{key.item}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def rating(right_first_try: bool) -> Rating:
    """Return the FSRS rating of an answer: Good for right on the first try, else Again; never Hard or Easy."""
    return Rating.Good if right_first_try else Rating.Again


# A chat course: no same-day learning or relearning steps (a card comes back tomorrow at the soonest), at most a
# year between reviews, and fuzz so that the 4 questions of a lesson met together do not all return together.
MAXIMUM_INTERVAL_DAYS = 365
SCHEDULER = Scheduler(
    learning_steps=(), relearning_steps=(), maximum_interval=MAXIMUM_INTERVAL_DAYS, enable_fuzzing=True
)

# A card counts as learned once FSRS expects it to be recalled with 90% odds for at least this many days.
LEARNED_STABILITY_DAYS = 21.0

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _seconds(moment: dt.datetime) -> int:
    if moment.tzinfo is None:
        raise ValueError(f"{moment!r} has no time zone: pass an aware datetime (the clock's, in UTC)")
    return int((moment - _EPOCH).total_seconds())


def _moment(seconds: int) -> dt.datetime:
    return _EPOCH + dt.timedelta(seconds=seconds)


def _int(value: object) -> int:
    if not isinstance(value, int | str) or isinstance(value, bool):
        raise TypeError(f"expected a whole number in a card row, got {value!r}")
    return int(value)


def _float(value: object) -> float:
    if not isinstance(value, int | float | str) or isinstance(value, bool):
        raise TypeError(f"expected a number in a card row, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class ReviewCard:
    """A learner's card as one row: every column a plain value, ``due`` indexable for "what is due now".

    Times are whole seconds since the Unix epoch, in UTC: compact in an index, exact in a round trip.
    ``stability`` and ``difficulty`` are FSRS's memory state; ``step`` is None once the card is in review.
    """

    learner: int
    key: CardKey
    state: int  # fsrs.State: 1 learning, 2 review, 3 relearning
    step: int | None
    stability: float | None
    difficulty: float | None
    due: int
    last_review: int | None

    @property
    def id(self) -> int:
        """Return the card's id (see ``card_id``)."""
        return card_id(self.learner, self.key)

    @property
    def due_at(self) -> dt.datetime:
        """Return when the card is due, in UTC."""
        return _moment(self.due)

    @property
    def learned(self) -> bool:
        """Whether the learner is expected to remember it for weeks (see LEARNED_STABILITY_DAYS)."""
        return self.state == State.Review and (self.stability or 0.0) >= LEARNED_STABILITY_DAYS

    def columns(self) -> dict[str, int | float | str | None]:
        """Return the row to store, by column name."""
        return {
            "card_id": self.id,
            "learner": self.learner,
            "lesson": self.key.lesson,
            "kind": self.key.kind.value,
            "item": self.key.item,
            "state": self.state,
            "step": self.step,
            "stability": self.stability,
            "difficulty": self.difficulty,
            "due": self.due,
            "last_review": self.last_review,
        }

    @classmethod
    def from_columns(cls, row: Mapping[str, object]) -> ReviewCard:
        """Rebuild a card from a stored row (any mapping with ``columns()``'s names)."""
        return cls(
            learner=_int(row["learner"]),
            key=CardKey(str(row["lesson"]), ItemKind(str(row["kind"])), str(row["item"])),
            state=int(State(_int(row["state"]))),
            step=None if row["step"] is None else _int(row["step"]),
            stability=None if row["stability"] is None else _float(row["stability"]),
            difficulty=None if row["difficulty"] is None else _float(row["difficulty"]),
            due=_int(row["due"]),
            last_review=None if row["last_review"] is None else _int(row["last_review"]),
        )

    def fsrs_card(self) -> Card:
        """Return the card as FSRS's own Card (with its id, so the library never makes one up)."""
        return Card(
            card_id=self.id,
            state=State(self.state),
            step=self.step,
            stability=self.stability,
            difficulty=self.difficulty,
            due=self.due_at,
            last_review=None if self.last_review is None else _moment(self.last_review),
        )


@dataclass(frozen=True)
class ReviewEntry:
    """One review, appended to the log and never changed: what FSRS's optimizer needs to tune the schedule."""

    card_id: int
    learner: int
    key: CardKey
    rating: int  # fsrs.Rating: 1 Again, 3 Good (never 2 or 4, see ``rating``)
    reviewed_at: int  # seconds since the epoch, UTC
    duration_ms: int | None  # how long the answer took, when known

    def columns(self) -> dict[str, int | str | None]:
        """Return the row to append, by column name."""
        return {
            "card_id": self.card_id,
            "learner": self.learner,
            "lesson": self.key.lesson,
            "kind": self.key.kind.value,
            "item": self.key.item,
            "rating": self.rating,
            "reviewed_at": self.reviewed_at,
            "duration_ms": self.duration_ms,
        }

    def fsrs_log(self) -> ReviewLog:
        """Return the entry as FSRS's own review log, for its optimizer or ``Scheduler.reschedule_card``."""
        return ReviewLog(
            card_id=self.card_id,
            rating=Rating(self.rating),
            review_datetime=_moment(self.reviewed_at),
            review_duration=self.duration_ms,
        )


# The library draws its fuzz from the random module's global generator, with no way to pass one in; for the
# length of one (synchronous) review it draws from ours. The lock keeps threads, should any review, apart.
_FUZZ_LOCK = threading.Lock()


@contextmanager
def _fuzz_from(generator: random.Random) -> Iterator[None]:
    with _FUZZ_LOCK:
        library_random = fsrs_scheduler.random  # type: ignore[attr-defined]
        fsrs_scheduler.random = generator.random  # type: ignore[attr-defined]
        try:
            yield
        finally:
            fsrs_scheduler.random = library_random  # type: ignore[attr-defined]


def _reviewed(
    learner: int, key: CardKey, card: Card, right_first_try: bool, at: dt.datetime, duration_ms: int | None
) -> tuple[ReviewCard, ReviewEntry]:
    when = _seconds(at)
    with _fuzz_from(random.Random(f"{card.card_id}:{when}")):
        card, _ = SCHEDULER.review_card(card, rating(right_first_try), _moment(when), duration_ms)
    assert card.last_review is not None  # a reviewed card always has one
    reviewed = ReviewCard(
        learner=learner,
        key=key,
        state=int(card.state),
        step=card.step,
        stability=card.stability,
        difficulty=card.difficulty,
        due=_seconds(card.due),
        last_review=_seconds(card.last_review),
    )
    entry = ReviewEntry(reviewed.id, learner, key, int(rating(right_first_try)), when, duration_ms)
    return reviewed, entry


def meet(
    learner: int, key: CardKey, right_first_try: bool, at: dt.datetime, duration_ms: int | None = None
) -> tuple[ReviewCard, ReviewEntry]:
    """Make the card for an item the learner just answered in a lesson; that answer is its first review."""
    new = Card(card_id=card_id(learner, key), state=State.Learning, step=0, due=_moment(_seconds(at)))
    return _reviewed(learner, key, new, right_first_try, at, duration_ms)


def review(
    card: ReviewCard, right_first_try: bool, at: dt.datetime, duration_ms: int | None = None
) -> tuple[ReviewCard, ReviewEntry]:
    """Return the card after a review answered at ``at``, and the entry to append to the log."""
    return _reviewed(card.learner, card.key, card.fsrs_card(), right_first_try, at, duration_ms)


def due_now(cards: Iterable[ReviewCard], now: dt.datetime) -> list[ReviewCard]:
    """Return the cards due at ``now``, most overdue first (ties in course order, by key)."""
    moment = _seconds(now)
    return sorted((card for card in cards if card.due <= moment), key=lambda card: (card.due, card.key))


def next_due(cards: Iterable[ReviewCard]) -> dt.datetime | None:
    """Return when the soonest card is due (possibly already past), or None for a learner with no cards."""
    return min((card.due_at for card in cards), default=None)


@dataclass(frozen=True)
class ReviewSummary:
    """What /progress says about review: cards due now, cards learned, and when the next one comes."""

    due: int
    learned: int
    total: int
    next_due: dt.datetime | None


def summary(cards: Iterable[ReviewCard], now: dt.datetime) -> ReviewSummary:
    """Count a learner's cards due at ``now`` and learned, and find the next one due."""
    cards = list(cards)
    return ReviewSummary(
        due=len(due_now(cards, now)),
        learned=sum(card.learned for card in cards),
        total=len(cards),
        next_due=next_due(cards),
    )
