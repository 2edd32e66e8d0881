"""Typed state for handlers: the services of the running bot, and the learner and language of the current update."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from telegram import Update
from telegram.ext import Application, CallbackContext, ExtBot

from bot import logs
from bot.config import Config
from bot.course.model import Content, Course
from bot.errors import StorageError
from bot.faults import FaultPoints
from bot.i18n import I18n, current_language
from bot.learner import Learner, LessonProgress, Rhythm
from bot.library.live import Library
from bot.metrics import Metrics
from bot.snapshot import Snapshot, activity_since
from bot.storage.db import Database
from runner.client import Runner

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Services:
    """What every handler may use; built once at start."""

    config: Config
    library: Library  # the lessons and catalogs: replaced by a reload, pinned for each update
    db: Database
    runner: Runner | None = None
    # Learners whose code is running now: a second send is told to wait, not queued.
    running: set[int] = field(default_factory=set)
    # The last screen with buttons that a newer one supersedes (bot.flows.outcome.Show.supersedes), by user id:
    # the next such screen takes its buttons away, so old practice buttons (Hint, Leave) do not pile up. In memory
    # only: after a restart one old set of buttons stays, and it still works.
    superseded_keyboards: dict[int, int] = field(default_factory=dict)
    # What the bot counts for /metrics (bot.metrics).
    metrics: Metrics = field(default_factory=Metrics)
    # Where a test makes the bot fail between two steps of an update, as a crash would (bot.faults).
    faults: FaultPoints = field(default_factory=FaultPoints)
    # The time zone a learner's app reported (the web chat's browser does, once); Telegram gives none.
    time_zone: Callable[[int], str | None] = field(default=lambda user_id: None)

    @property
    def content(self) -> Content:
        """Return the lessons of the edition the current update began with."""
        return self.library.current.content

    @property
    def i18n(self) -> I18n:
        """Return the catalogs of the edition the current update began with."""
        return self.library.current.i18n


class BotData:
    """The application's bot_data: holds the services, set once before polling starts."""

    services: Services


# The learner's row, current place and rhythm as update_scope read them; for_learner builds the update's snapshot on
# them rather than reading them again.
StoredLearner = tuple[Learner, LessonProgress | None, Rhythm]
_stored_learner: ContextVar[StoredLearner | None] = ContextVar("stored_learner", default=None)


def stored_learner() -> StoredLearner | None:
    """Return the current update's learner as stored when the update came in, with their place in the lesson they
    are in and their rhythm (reminders, time zone, recent activity) (None: not a learner yet)."""
    return _stored_learner.get()


@asynccontextmanager
async def update_scope(services: Services, update: object) -> AsyncIterator[None]:
    """Handle one update on one edition of the content, in its learner's language (chosen here only).

    Everything the update runs is inside: its handlers, the error handler, and the background tasks they
    start (a task copies the context it is created in).
    """
    with services.library.pinned():  # a reload during the update leaves it on this edition
        async with _learner_scope(services, update):
            yield


@asynccontextmanager
async def _learner_scope(services: Services, update: object) -> AsyncIterator[None]:
    user = update.effective_user if isinstance(update, Update) else None
    read: StoredLearner | None = None
    if user is not None and not user.is_bot:
        try:
            read = await services.db.learner_at(user.id, activity_since(services.db.clock()))
        except (sqlite3.Error, StorageError):
            # Speak Telegram's language; the handler meets the same failure and tells the learner of it.
            log.exception("cannot read the language of user %s", user.id)
    found = read[0] if read is not None else None
    language = services.i18n.choose(
        found.language if found else None,
        (user.language_code if user else None) or (found.telegram_language if found else None),
    )
    token = _stored_learner.set(read)
    update_id = logs.UPDATE_ID.set(update.update_id if isinstance(update, Update) else None)
    if isinstance(update, Update):
        services.metrics.updates.labels(update_kind(update)).inc()
    try:
        with services.i18n.use(language):
            yield
    finally:
        logs.UPDATE_ID.reset(update_id)
        _stored_learner.reset(token)


def update_kind(update: Update) -> str:
    """The kind of an update as Telegram names its field: message, callback_query, poll_answer, ..."""
    for kind in ("message", "edited_message", "callback_query", "poll_answer", "my_chat_member"):
        if getattr(update, kind, None) is not None:
            return kind
    return "other"


class CourseContext(CallbackContext[ExtBot[None], dict[Any, Any], dict[Any, Any], BotData]):
    """The callback context of coursebot's handlers."""

    def __init__(
        self,
        application: Application[Any, Any, Any, Any, Any, Any],
        chat_id: int | None = None,
        user_id: int | None = None,
    ):
        super().__init__(application, chat_id=chat_id, user_id=user_id)
        self._snapshot: Snapshot | None = None

    @property
    def services(self) -> Services:
        """Return the services of the running bot."""
        return self.bot_data.services

    @property
    def snapshot(self) -> Snapshot:
        """Return the update's learner as read once, with what flows need loaded on demand (for_learner sets it)."""
        if self._snapshot is None:
            raise RuntimeError("this handler has no learner: wrap it in for_learner")
        return self._snapshot

    @snapshot.setter
    def snapshot(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    @property
    def learner(self) -> Learner:
        """Return the update's learner, as handlers wrapped in for_learner see it."""
        return self.snapshot.learner

    @property
    def course(self) -> Course:
        """Return the course in the current update's language."""
        return self.services.content.course(current_language())
