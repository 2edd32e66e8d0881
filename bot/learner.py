"""What the bot keeps about a learner: who they are and where they are, their place in each lesson,
the quiz polls sent to them, their answers and their attempts at drills. Plain records; storage reads and
writes them.

Places are kept by id (a slide id, a question id, an option id), never by position, so an edit of the
lesson files moves nobody: bot.navigation finds each id in the lessons as they are now.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from enum import Enum, StrEnum


class ReaderView(Enum):
    """What the message the bot edits in place shows."""

    SLIDE = "slide"
    QUIZ = "quiz"  # the Quick Check under way
    RESULT = "result"  # a Quick Check's score and recap
    MENU = "menu"


@dataclass(frozen=True)
class Learner:
    """A learner: who they are, their language, and where they are (see bot.states for the machines)."""

    user_id: int
    chat_id: int
    language: str | None  # chosen with /language; None follows Telegram's
    telegram_language: str | None  # the last language_code Telegram sent
    lesson_id: str | None  # the lesson the learner is in, None before the first
    reader_message_id: int | None
    reader_view: ReaderView | None
    quiz_lesson_id: str | None  # the lesson whose Quick Check round is under way
    quiz_queue: tuple[str, ...]  # question ids still to ask in that round
    quiz_poll_id: str | None  # the poll awaiting an answer
    practice_lesson_id: str | None = None  # the exercise messages answer
    hints_shown: int = 0
    quiz_seed: int = 0  # the round's shuffle: the order of each question's options (bot.shuffle)


@dataclass(frozen=True)
class Rhythm:
    """When the learner studies and where their reminders stand, read with their row: what every update needs for
    the streak's day and the reminder's hour (bot.handlers.comeback), so it costs no read of its own."""

    reminders: str = "unasked"  # bot.retention.plan.Status
    utc_offset_minutes: int | None = None  # from the web chat's time zone, once
    completion_card_sent: bool = False
    activity: tuple[int, ...] = ()  # when they did something (epoch seconds, oldest first), over the habit's window


@dataclass(frozen=True)
class LessonProgress:
    """A learner's place in one lesson."""

    lesson_id: str
    slide_id: str | None = None  # the slide on screen
    furthest_slide_id: str | None = None  # the furthest slide reached
    slides_read: bool = False
    completed: bool = False
    started: bool = False
    completed_on: dt.date | None = None  # the day (UTC) the lesson was first completed


NOT_STARTED = LessonProgress(lesson_id="")


@dataclass(frozen=True)
class SentPoll:
    """A quiz poll the bot sent, so its answer can be matched to a question."""

    poll_id: str
    user_id: int
    lesson_id: str
    question_id: str
    options: tuple[str, ...] = ()  # the option ids in the order the poll showed them


@dataclass(frozen=True)
class Answer:
    """A learner's latest answer to one question."""

    lesson_id: str
    question_id: str
    option_id: str | None  # the option chosen, by id (None: an answer from before ids, to a question since removed)
    correct: bool


# Buttons carry the attempt's turn modulo this, so callback data stays short; a stale tap is one turn behind.
TURNS = 1000


@dataclass(frozen=True)
class DrillProgress:
    """One learner's attempt at one drill, as stored (bot.drills says what each tap does to it)."""

    placed: tuple[int, ...] = ()  # Parsons: piece numbers in the order tapped
    ruled_out: frozenset[int] = frozenset()  # choices tried and wrong in this attempt
    turn: int = 0  # counts every change: a tap carrying an older turn is stale
    tries: int = 0  # wrong answers, over every attempt
    solved: bool = False  # ever answered right: this is what progress counts
    done: bool = False  # this attempt is answered right
    checked: bool = False  # Parsons: the arrangement on screen was checked and is wrong

    @property
    def stamp(self) -> int:
        """Return the turn as buttons carry it."""
        return self.turn % TURNS


FRESH = DrillProgress()


class EventKind(StrEnum):
    """What one learning event records (a row of events, migration 4), and what its fields hold."""

    SLIDE = "slide"  # a slide shown: item_id is its id, seconds the time on the learner's previous slide
    BACK = "back"  # Back tapped: item_id is the slide the learner went back from
    ANSWER = "answer"  # a Quick Check answer: item_id the question, option_id the option, verdict right|wrong
    RETAKE = "retake"  # a round of the questions missed begins
    RUN = "run"  # a graded practice run: item_id the exercise, verdict passed|failed|error|timeout..., failed_check
    HINT = "hint"  # a hint shown: item_id is its number, from 1
    LEAVE = "leave"  # the practice left
    DONE = "done"  # the lesson completed
    DRILL = "drill"  # a drill answered: item_id the drill, verdict right|wrong


@dataclass(frozen=True)
class LessonState:
    """What the bot keeps of one learner in one lesson, read in one go: their place, latest answers and drills."""

    progress: LessonProgress
    answers: dict[tuple[str, str], Answer]  # the latest answer to each question, by (lesson id, question id)
    drills: dict[str, DrillProgress]  # the attempt at each drill touched, by drill id
    # The learner's review cards of the lesson's drills, by card id, as stored rows (ReviewCard.from_columns reads
    # them): a drill answered while its card is due reviews it, with no read of its own.
    drill_cards: dict[int, dict[str, object]] = field(default_factory=dict)

    @property
    def solved(self) -> frozenset[str]:
        """Return the drills of the lesson solved, by id."""
        return frozenset(drill_id for drill_id, attempt in self.drills.items() if attempt.solved)
