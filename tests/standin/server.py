"""BotApiStandin: the product's Bot API server plus the test-side controls.

The Bot API itself (HTTP, methods, Telegram's rules) is coursebot's built-in server,
``bot.localapi``; this subclass adds what only tests need: every call recorded, faults
injected on demand (429, 5xx), simulated users and groups, and waits on all of it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from bot.localapi import BotApiServer
from bot.localapi.errors import ApiError

from .calls import ApiCall, Faults, InjectedFault
from .learner import SimGroup, SimLearner


class BotApiStandin(BotApiServer):
    """A strict, fast Telegram Bot API stand-in. Use ``async with BotApiStandin() as standin:``."""

    implementation = "the Bot API stand-in"

    def __init__(
        self,
        token: str = "123456:TEST-TOKEN",
        bot_username: str = "coursebot_test_bot",
        *,
        bot_first_name: str = "Coursebot",
        host: str = "127.0.0.1",
        port: int = 0,
        strict_html: bool = True,
    ):
        super().__init__(
            token, bot_username, bot_first_name=bot_first_name, host=host, port=port, strict_html=strict_html
        )
        self.calls: list[ApiCall] = []
        self.faults = Faults()
        self.learners: dict[int, SimLearner] = {}
        self.groups: dict[int, SimGroup] = {}
        self._errors: list[ApiCall] = []
        # Second answers to one callback query: Telegram refuses them ("query is too old ... or query ID is
        # invalid"), which a bot that takes that for an expired tap never notices. Each is a bug of the bot.
        self.answered_again: list[ApiCall] = []
        self._call_listeners: list[Callable[[ApiCall], bool]] = []
        self._activity = asyncio.Event()
        self._last_activity = time.monotonic()

    async def __aenter__(self) -> BotApiStandin:
        await self.start()
        return self

    # ------------------------------------------------------- the server's hooks

    def _check_call(self, name: str, arrival: float) -> None:
        fault = self.faults.take(name)
        if fault is not None:
            raise fault

    def _answered(self, name: str, params: dict, result: Any, arrival: float) -> None:
        self._record(ApiCall(name, params, True, result, time=arrival))

    def _refused(self, name: str, params: dict, error: ApiError, arrival: float, heard: bool, bug: bool) -> None:
        injected = isinstance(error, InjectedFault)
        call = ApiCall(name, params, False, None, error.error_code, error.description, arrival, injected)
        self._record(call, blame=bug or (heard and not injected))
        if name == "answerCallbackQuery" and not injected:
            query = self.callback_queries.get(str(params.get("callback_query_id")))
            if query is not None and query.answer is not None:
                self.answered_again.append(call)

    def _record(self, call: ApiCall, blame: bool = False) -> None:
        """Append to calls; `blame` also lists it in errors() (refused because of the bot)."""
        self.calls.append(call)
        if blame:
            self._errors.append(call)
        self._mark(time.monotonic())
        if self._call_listeners:
            self._call_listeners = [listen for listen in self._call_listeners if not listen(call)]

    def _mark(self, now: float) -> None:
        self._last_activity = now
        self._activity.set()

    # ------------------------------------------------------- recorded calls

    def errors(self) -> list[ApiCall]:
        """Calls the stand-in refused because of the bot (injected faults are not included)."""
        return list(self._errors)

    def calls_to(self, method: str) -> list[ApiCall]:
        method = method.lower()
        return [call for call in self.calls if call.method.lower() == method]

    def clear_calls(self) -> None:
        self.calls.clear()
        self._errors.clear()

    def describe_calls(self, last: int = 8) -> str:
        return "\n".join("  " + call.describe() for call in self.calls[-last:]) or "  (no calls)"

    def fail_next(
        self,
        method: str,
        status: int = 429,
        retry_after: int | None = 1,
        count: int = 1,
        description: str | None = None,
    ) -> None:
        """Make the next `count` calls of `method` ("*" for any) fail with `status`."""
        self.faults.add(method, status, retry_after, count, description)

    async def wait_call(
        self,
        method: str,
        predicate: Callable[[ApiCall], bool] | None = None,
        timeout: float = 5.0,
        since: int | None = None,
    ) -> ApiCall:
        """The next recorded call of `method` (from index `since` of `calls`, else from now)."""
        method = method.lower()

        def matches(call: ApiCall) -> bool:
            return call.method.lower() == method and (predicate is None or predicate(call))

        if since is not None:
            for call in self.calls[since:]:
                if matches(call):
                    return call
        future = asyncio.get_running_loop().create_future()

        def listen(call: ApiCall) -> bool:
            if future.done():
                return True
            if matches(call):
                future.set_result(call)
                return True
            return False

        self._call_listeners.append(listen)
        return await self.wait_for(future, timeout, f"a {method} call")

    async def wait_for(self, future: asyncio.Future, timeout: float, what: str) -> Any:
        """Await future; on timeout raise asyncio.TimeoutError naming `what` and the last calls."""
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise TimeoutError(
                f"timed out after {timeout}s waiting for {what}; last calls:\n{self.describe_calls()}"
            ) from None

    # ------------------------------------------------------- users and updates

    def learner(
        self,
        user_id: int,
        first_name: str = "Ada",
        *,
        last_name: str | None = None,
        username: str | None = None,
        language_code: str | None = "en",
    ) -> SimLearner:
        """A simulated user; its private chat id is its user id. Same id, same learner."""
        if user_id in self.learners:
            return self.learners[user_id]
        if user_id <= 0:
            raise ValueError("user ids are positive")
        user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": first_name}
        for key, value in (("last_name", last_name), ("username", username), ("language_code", language_code)):
            if value:
                user[key] = value
        state = self.add_user(user)
        learner = self.learners[user_id] = SimLearner(self, user, state)
        return learner

    def group(self, chat_id: int, title: str = "Study group", *, username: str | None = None) -> SimGroup:
        """A group the bot is a member of (ids starting with -100 are supergroups)."""
        if chat_id in self.groups:
            return self.groups[chat_id]
        if chat_id >= 0:
            raise ValueError("group chat ids are negative")
        chat = {"id": chat_id, "type": "supergroup" if str(chat_id).startswith("-100") else "group", "title": title}
        if username:
            chat["username"] = username
        state = self.new_chat(chat, known=True)
        group = self.groups[chat_id] = SimGroup(self, state)
        return group

    def inject_nowait(self, update: dict) -> int | None:
        """Queue a raw update for getUpdates; returns its id (None if allowed_updates excludes it)."""
        return self.push_update(update)

    async def inject(self, update: dict) -> int | None:
        """Queue a raw update (update_id assigned if missing)."""
        return self.push_update(update)

    def redeliver(self, update_id: int) -> None:
        """Deliver an already delivered update once more, same update_id (at-least-once delivery)."""
        self.updates.redeliver(update_id)

    def chat_messages(self, chat_id: int) -> list[dict]:
        """The bot's messages in any chat, current state."""
        return self.chats[chat_id].bot_messages()

    async def settle(self, quiet: float = 0.15, timeout: float = 10.0) -> None:
        """Wait until every queued update was fetched and no call arrived for `quiet` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            remaining = deadline - loop.time()
            if self.updates.settled and not self._reading:
                idle = time.monotonic() - self._last_activity
                if idle >= quiet:
                    return
                if remaining <= 0:
                    break
                await asyncio.sleep(min(quiet - idle, remaining))  # the quiet window itself
                continue
            if remaining <= 0:
                break
            self._activity.clear()
            try:
                await asyncio.wait_for(self._activity.wait(), remaining)
            except TimeoutError:
                pass
        unfetched = "" if self.updates.settled else " (updates are still waiting for getUpdates)"
        raise TimeoutError(
            f"stand-in did not settle within {timeout}s{unfetched}; last calls:\n{self.describe_calls()}"
        )
