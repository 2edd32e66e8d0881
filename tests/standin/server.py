"""BotApiStandin: the Bot API served over real HTTP on 127.0.0.1, plus the test-side controls.

The HTTP layer is aiohttp's low-level server (no router, no middlewares, no access
log): one handler splits ``/bot<token>/<method>``, decodes params, applies planned
faults, runs the method and records an ApiCall. That is all the per-request work, so
the benchmark measures the bot, not the stand-in.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from .calls import ApiCall, Faults
from .chats import ChatState
from .errors import ApiError
from .learner import SimGroup, SimLearner
from .methods import METHODS, BotApi
from .params import read_params

_TOKEN = re.compile(r"\d+:[\w-]+")
_MAX_BODY = 50 * 1024 * 1024  # Telegram's upload limit for bots


class BotApiStandin(BotApi):
    """A strict, fast Telegram Bot API stand-in. Use ``async with BotApiStandin() as standin:``."""

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
        super().__init__(token, bot_username, bot_first_name, strict_html)
        self.host = host
        self.port = port
        self.calls: list[ApiCall] = []
        self.faults = Faults()
        self.learners: dict[int, SimLearner] = {}
        self.groups: dict[int, SimGroup] = {}
        self._errors: list[ApiCall] = []
        self._call_listeners: list[Callable[[ApiCall], bool]] = []
        self._runner: web.ServerRunner | None = None
        self._activity = asyncio.Event()
        self._last_activity = time.monotonic()
        self._reading = 0  # requests whose body is still being read

    # ------------------------------------------------------------ lifecycle

    @property
    def api_base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What PTB takes as base_url: it appends the token and the method."""
        return f"{self.api_base_url}/bot"

    async def start(self) -> BotApiStandin:
        loop = asyncio.get_running_loop()

        def make_request(message, payload, protocol, writer, task) -> web.BaseRequest:
            return web.BaseRequest(message, payload, protocol, writer, task, loop, client_max_size=_MAX_BODY)

        server = web.Server(self._handle, request_factory=make_request, handler_cancellation=True, access_log=None)
        self._runner = web.ServerRunner(server, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        for poll in self.polls.values():
            self._cancel_poll_timer(poll)
        self.updates.release()  # answer a waiting long poll so shutdown does not wait for it
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> BotApiStandin:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ HTTP

    async def _handle(self, request: web.BaseRequest) -> web.Response:
        arrival = time.monotonic()
        self._mark(arrival)
        path = request.path
        token, _, method = path[4:].partition("/") if path.startswith("/bot") else ("", "", path)
        entry = METHODS.get(method.lower()) if token == self.token else None
        name = entry[0] if entry is not None else method
        params: dict[str, Any] = {}
        injected = False
        try:
            if token != self.token:
                # Telegram: 401 for a well-formed but wrong token, 404 for anything else
                raise ApiError(401, "Unauthorized") if _TOKEN.fullmatch(token) else ApiError(404, "Not Found")
            self._reading += 1
            try:
                params = await read_params(request)
            finally:
                self._reading -= 1
            if entry is None:
                if method.lower() in _bot_api_method_names():
                    # a real method the stand-in lacks: say so instead of Telegram's 404
                    raise ApiError(400, f"Bad Request: method {method} is not implemented by the Bot API stand-in")
                raise ApiError(404, "Not Found")
            fault = self.faults.take(name)
            if fault is not None:
                injected = True
                raise fault
            self._now = arrival
            result = entry[1](self, params)
            if entry[2]:
                result = await result
        except ApiError as exc:
            # a 409 for a long poll the bot had already abandoned (PTB stopping) reaches nobody
            heard = not (exc.error_code == 409 and request.transport is None)
            self._record(
                ApiCall(name, params, False, None, exc.error_code, exc.description, arrival, injected),
                blame=heard and not injected,
            )
            return _response(exc.error_code, exc.payload())
        except Exception as exc:
            description = f"Internal Server Error: stand-in failed: {exc!r}"
            self._record(ApiCall(name, params, False, None, 500, description, arrival), blame=True)
            return _response(500, {"ok": False, "error_code": 500, "description": description})
        self._record(ApiCall(name, params, True, result, time=arrival))
        return _response(200, {"ok": True, "result": result})

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

    def _touch(self) -> None:
        self._mark(time.monotonic())

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
        user = {"id": user_id, "is_bot": False, "first_name": first_name}
        chat = {"id": user_id, "type": "private", "first_name": first_name}
        for key, value in (("last_name", last_name), ("username", username)):
            if value:
                user[key] = chat[key] = value
        if language_code:
            user["language_code"] = language_code
        self.users[user_id] = user
        state = self.chats[user_id] = ChatState(chat, known=False)
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
        state = self.chats[chat_id] = ChatState(chat, known=True)
        group = self.groups[chat_id] = SimGroup(self, state)
        return group

    def inject_nowait(self, update: dict) -> int | None:
        """Queue an update for getUpdates; returns its id (None if allowed_updates excludes it)."""
        message = update.get("message") or update.get("edited_message")
        if message is not None and message.get("chat", {}).get("id") is not None:
            self._learn_chat(message)
        return self.updates.push(update)

    async def inject(self, update: dict) -> int | None:
        """Queue a raw update (update_id assigned if missing)."""
        return self.inject_nowait(update)

    def _learn_chat(self, message: dict) -> None:
        """A raw message update makes its chat and sender known, as a real one would."""
        chat = message["chat"]
        state = self.chats.get(chat["id"])
        if state is None:
            state = self.chats[chat["id"]] = ChatState(chat, known=True)
        state.known = True
        sender = message.get("from")
        if sender and not sender.get("is_bot"):
            self.users.setdefault(sender["id"], sender)
        if "message_id" in message:
            state.messages.setdefault(message["message_id"], message)
            state.next_message_id = max(state.next_message_id, message["message_id"] + 1)

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


@functools.cache
def _bot_api_method_names() -> frozenset[str]:
    """Lower-cased Bot API method names, from PTB's camelCase aliases (empty without PTB)."""
    try:
        import telegram
    except ImportError:
        return frozenset()
    return frozenset(name.lower() for name in dir(telegram.Bot) if name[:1].islower() and not name.islower())


def _response(status: int, payload: dict) -> web.Response:
    return web.Response(
        status=status, body=json.dumps(payload, ensure_ascii=False).encode(), content_type="application/json"
    )
