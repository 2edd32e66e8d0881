"""Stay under Telegram's flood limits, and wait out a 429 so the reply still arrives."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeAlias

from telegram.ext import AIORateLimiter

from bot.metrics import Metrics

# Edits and callback answers respond to the learner's own tap; Telegram's overall limit of
# about 30 per second is for messages sent to many chats, so these skip the overall bucket.
# What a Bot API call returns, as PTB's limiter passes it through (telegram._utils.types, private there).
ApiResult: TypeAlias = bool | dict[str, Any] | list[dict[str, Any]]

_RESPONSES = frozenset({"editMessageText", "editMessageReplyMarkup", "answerCallbackQuery", "sendChatAction"})


class CourseRateLimiter(AIORateLimiter):
    """PTB's AIORateLimiter, with responses to a tap kept out of the broadcast bucket, counting its retries.

    ``guard`` runs before every call and may refuse it by raising: every call to Telegram passes here, so the one
    check that the update a reply answers is still this process's (bot.updates.Inbox.guard) sits here.
    """

    def __init__(self, metrics: Metrics, guard: Callable[[], Awaitable[None]] | None = None, **options: Any) -> None:
        super().__init__(**options)
        self._metrics = metrics
        self._guard = guard

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, ApiResult]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: int | None,
    ) -> ApiResult:
        """Limit a request like PTB does, leaving responses to a tap out of the overall bucket."""
        if endpoint in _RESPONSES:
            # The limiter picks its buckets from chat_id alone; the request itself is unchanged.
            data = {key: value for key, value in data.items() if key != "chat_id"}
        sent = 0

        async def counted(*call_args: Any, **call_kwargs: Any) -> ApiResult:
            # The limiter calls this again for each 429 it waits out: every call after the first is a retry.
            nonlocal sent
            if self._guard is not None:
                # Here, once the limiter lets the call go, not before it waits: a replica frozen while its call
                # waited in a bucket must not send it on waking, if its update was taken over meanwhile.
                await self._guard()
            if sent:
                self._metrics.api_retries.inc()
            sent += 1
            return await callback(*call_args, **call_kwargs)

        return await super().process_request(counted, args, kwargs, endpoint, data, rate_limit_args)
