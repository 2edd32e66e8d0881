"""Learner progress in one SQLite file (the default) or one PostgreSQL database: the table groups joined over one
engine (bot.storage.engine), whose backend runs each query as written on either.

Rows are read by column name into the records of bot.learner; each method that changes a
learner's state performs one step of a machine in bot.states, in one transaction.
"""

from __future__ import annotations

from bot.storage.drills import DrillQueries
from bot.storage.engine import BUSY_TIMEOUT_MS, Clock, Engine, timestamp, utc_now
from bot.storage.events import EventQueries
from bot.storage.files import backup, ensure_writable
from bot.storage.inbox import InboxQueries
from bot.storage.learners import LearnerQueries
from bot.storage.lessons import Adopted, LessonQueries
from bot.storage.outbox import OutboxQueries
from bot.storage.outcomes import OutcomeQueries
from bot.storage.practice import PracticeQueries
from bot.storage.quiz import QuizQueries
from bot.storage.sending import SendingQueries
from bot.storage.snapshots import SnapshotQueries

__all__ = [
    "BUSY_TIMEOUT_MS",
    "Adopted",
    "Clock",
    "Database",
    "Engine",
    "backup",
    "ensure_writable",
    "timestamp",
    "utc_now",
]


class Database(
    InboxQueries,
    LearnerQueries,
    LessonQueries,
    QuizQueries,
    PracticeQueries,
    EventQueries,
    DrillQueries,
    OutcomeQueries,
    OutboxQueries,
    SnapshotQueries,
    SendingQueries,
    Engine,
):
    """The progress database. Open it once with ``await Database.open(path)``; ``close()`` is idempotent."""
