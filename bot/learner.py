"""What the bot keeps about a learner: who they are and where they are, their place in each lesson,
the quiz polls sent to them and their answers. Plain records; storage/db.py reads and writes them."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import Enum


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


@dataclass(frozen=True)
class LessonProgress:
    """A learner's place in one lesson."""

    lesson_id: str
    slide: int = 0
    furthest_slide: int = 0
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


@dataclass(frozen=True)
class Answer:
    """A learner's latest answer to one question."""

    lesson_id: str
    question_id: str
    option_index: int
    correct: bool
