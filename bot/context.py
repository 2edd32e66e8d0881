"""Typed state for handlers: the services of the running bot and the learner of the current update."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from telegram.ext import Application, CallbackContext, ExtBot

from bot.config import Config
from bot.course import Content, Course
from bot.i18n import I18n, current_language
from bot.storage.db import Database, Learner


class SnippetRunner(Protocol):
    """What the bot needs of the runner: run code, graded or not, and say its limits (in ``info``)."""

    info: dict[str, Any]

    async def run(self, code: str, *, checks: Any = None) -> Any: ...


@dataclass(frozen=True)
class Services:
    """What every handler may use; built once at start."""

    config: Config
    content: Content
    i18n: I18n
    db: Database
    runner: SnippetRunner | None = None
    # Learners whose code is running now: a second send is told to wait, not queued.
    running: set[int] = field(default_factory=set)


class BotData:
    """The application's bot_data: holds the services, set once before polling starts."""

    services: Services


class CourseContext(CallbackContext[ExtBot, dict, dict, BotData]):
    """The callback context of coursebot's handlers."""

    def __init__(self, application: Application, chat_id: int | None = None, user_id: int | None = None):
        super().__init__(application, chat_id=chat_id, user_id=user_id)
        self.learner: Learner | None = None

    @property
    def services(self) -> Services:
        return self.bot_data.services

    @property
    def course(self) -> Course:
        """Return the course in the current update's language."""
        return self.services.content.course(current_language())
