"""How updates flow in: concurrently across learners, in order for each, each in its learner's language, and
each one only once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from telegram import Update
from telegram.ext import ApplicationHandlerStop, BaseUpdateProcessor, TypeHandler

from bot.context import CourseContext

UpdateScope = Callable[[object], AbstractAsyncContextManager[None]]


def _learner_key(update: object) -> int | None:
    if not isinstance(update, Update):
        return None
    user = update.effective_user
    if user is not None:
        return user.id
    chat = update.effective_chat
    return chat.id if chat is not None else None


class PerLearnerOrder(BaseUpdateProcessor):
    """Process many learners' updates at once, but one learner's updates one at a time, in order.

    Two quick taps of one learner must not race on their progress; two learners never wait for each other.
    Each update is handled inside ``scope`` (bot.context.update_scope: its learner's language), which
    encloses the error handler too.
    """

    def __init__(self, max_concurrent_updates: int, scope: UpdateScope):
        super().__init__(max_concurrent_updates)
        self._scope = scope
        self._locks: dict[int, asyncio.Lock] = {}
        self._users: dict[int, int] = {}

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        """Await ``coroutine`` (PTB's handling of ``update``) after the learner's earlier updates, in its scope."""
        key = _learner_key(update)
        if key is None:
            async with self._scope(update):
                await coroutine
            return
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] = self._users.get(key, 0) + 1
        try:
            async with lock, self._scope(update):
                await coroutine
        finally:
            self._users[key] -= 1
            if not self._users[key]:
                # Nobody else waits on this learner's lock; drop it so idle learners cost nothing.
                del self._users[key], self._locks[key]

    async def initialize(self) -> None:
        """Nothing to set up."""

    async def shutdown(self) -> None:
        """Nothing to tear down."""


async def _drop_redelivered(update: Update, context: CourseContext) -> None:
    # Telegram delivers at least once: an update seen before must change nothing.
    if not await context.services.db.first_delivery(update.update_id):
        raise ApplicationHandlerStop


def deduplication() -> TypeHandler[Update, CourseContext, None]:
    """Return the handler, for the earliest group, that stops updates already processed."""
    return TypeHandler(Update, _drop_redelivered)
