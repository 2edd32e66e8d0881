"""BotApiServer: the Bot API served over real HTTP, on loopback, for the bot to poll.

The HTTP layer is aiohttp's low-level server (no router, no middlewares, no access log;
started by bot.http_server, as the web chat and /healthz are): one handler splits
``/bot<token>/<method>``, decodes params, runs the method and answers Telegram's JSON.
That is all the per-request work, so a benchmark driving the bot through it measures
the bot. Subclasses see every call through three hooks (``_check_call``, ``_answered``,
``_refused``); the tests' stand-in records calls and injects faults there.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import time
from typing import Any

from aiohttp import web

from bot.http_server import HttpServer

from .errors import ApiError
from .floodlimit import FloodLimit
from .methods import METHODS, BotApi
from .params import read_params
from .store import StateStore
from .webhooks import WebhookTiming

log = logging.getLogger(__name__)

_TOKEN = re.compile(r"\d+:[\w-]+")
_MAX_BODY = 50 * 1024 * 1024  # Telegram's upload limit for bots


class BotApiServer(BotApi):
    """Telegram's Bot API for one bot, on http://host:port. ``async with BotApiServer(...) as api:``."""

    implementation = "coursebot's built-in Bot API server"

    def __init__(
        self,
        token: str,
        bot_username: str,
        *,
        bot_first_name: str = "Coursebot",
        host: str = "127.0.0.1",
        port: int = 0,
        strict_html: bool = True,
        store: StateStore | None = None,
        flood: FloodLimit | None = None,
        webhook_timing: WebhookTiming | None = None,
    ):
        super().__init__(token, bot_username, bot_first_name, strict_html)
        # Telegram's 429s for a bot sending too fast (bot.localapi.floodlimit), when given one (on its own clock,
        # in tests); None: no flood limit, as tests that fire hundreds of calls at one chat need.
        self.flood = flood
        if webhook_timing is not None:
            self.webhook_timing = webhook_timing
        self.host = host
        self.port = port
        self.store = store
        self._server: HttpServer | None = None
        self._reading = 0  # requests whose body is still being read

    @property
    def api_base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What PTB takes as base_url: it appends the token and the method."""
        return f"{self.api_base_url}/bot"

    async def start(self) -> BotApiServer:
        """Restore the saved state (if a store is given), then listen."""
        if self.store is not None:
            await self.store.open()
            try:
                self.restore(await self.store.load())
            except BaseException:
                await self.store.close()
                raise
            self.journal = self.store.save
        self._server = await HttpServer.start(self._handle, self.host, self.port, client_max_size=_MAX_BODY)
        self.port = self._server.port
        return self

    async def stop(self) -> None:
        """Stop listening and save what is still unsaved; safe to call twice."""
        self.close_poll_timers()
        await self._stop_webhook()
        self.updates.release()  # answer a waiting long poll so shutdown does not wait for it
        server, self._server = self._server, None
        if server is not None:
            await server.stop()
        if self.store is not None:
            self.journal = None
            await self.store.close()

    async def __aenter__(self) -> BotApiServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # ------------------------------------------------------------- the hooks

    def _mark(self, now: float) -> None:
        """Called on every request and every delivered update (time.monotonic())."""

    def _touch(self) -> None:
        self._mark(time.monotonic())

    def _check_call(self, name: str, arrival: float) -> None:
        """Called before a known method runs; raise ApiError to refuse it."""

    def _answered(self, name: str, params: dict[str, Any], result: Any, arrival: float) -> None:
        """Called after a method succeeded."""

    def _refused(
        self, name: str, params: dict[str, Any], error: ApiError, arrival: float, heard: bool, bug: bool
    ) -> None:
        """Called after a call was refused; `heard` is False when the client had gone, `bug` for a 500."""

    # ------------------------------------------------------------------ HTTP

    async def _handle(self, request: web.BaseRequest) -> web.Response:
        arrival = time.monotonic()
        self._mark(arrival)
        path = request.path
        if path.startswith("/file/bot"):
            return self._download(path[len("/file/bot") :])
        token, _, method = path[4:].partition("/") if path.startswith("/bot") else ("", "", path)
        entry = METHODS.get(method.lower()) if token == self.token else None
        name = entry[0] if entry is not None else method
        params: dict[str, Any] = {}
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
                    # a real method this server lacks: say so instead of Telegram's 404
                    raise ApiError(400, f"Bad Request: method {method} is not implemented by {self.implementation}")
                raise ApiError(404, "Not Found")
            self._check_call(name, arrival)
            if self.flood is not None:
                self.flood.check(name, params.get("chat_id"))
            self._now = arrival
            result = entry[1](self, params)
            if entry[2]:
                result = await result
        except ApiError as exc:
            # a 409 for a long poll the bot had already abandoned (PTB stopping) reaches nobody
            heard = not (exc.error_code == 409 and request.transport is None)
            self._refused(name, params, exc, arrival, heard, bug=False)
            return _response(exc.error_code, exc.payload())
        except Exception as exc:
            log.exception("Bot API method %s failed", name)
            error = ApiError(500, f"Internal Server Error: {self.implementation} failed: {exc!r}")
            self._refused(name, params, error, arrival, True, bug=True)
            return _response(500, error.payload())
        self._answered(name, params, result, arrival)
        return _response(200, {"ok": True, "result": result})

    def _download(self, rest: str) -> web.Response:
        """GET /file/bot<token>/<file_path>: a file's bytes, as Telegram serves what getFile names."""
        token, _, file_path = rest.partition("/")
        stored = self.files.by_path.get(file_path) if token == self.token else None
        if stored is None:
            return _response(404, ApiError(404, "Not Found").payload())
        return web.Response(body=stored.data, content_type=stored.mime)


@functools.cache
def _bot_api_method_names() -> frozenset[str]:
    """Lower-cased Bot API method names, from PTB's camelCase aliases."""
    import telegram

    return frozenset(name.lower() for name in dir(telegram.Bot) if name[:1].islower() and not name.islower())


def _response(status: int, payload: dict[str, Any]) -> web.Response:
    return web.Response(
        status=status, body=json.dumps(payload, ensure_ascii=False).encode(), content_type="application/json"
    )
