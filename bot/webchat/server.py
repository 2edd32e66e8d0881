"""The web chat's HTTP side: the page, its static files, and one WebSocket per open page.

Updates reach the page the moment the bot answers: the Bot API server tells each Page
of a change in its chat, the Page queues a JSON message, and the connection's writer
sends it. Nothing polls. It binds to loopback unless configured otherwise: it is a
local preview of the course, with no login, not a channel for the public.

Every request must name this machine in its Host header: a loopback name, or the host the
chat was configured to listen on. A web page whose own DNS name an attacker re-points at
127.0.0.1 (DNS rebinding) sends its own name as Host and its own origin as Origin, so the
Origin check alone would pass it; the Host check refuses it, page and WebSocket alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from aiohttp import WSMsgType, web
from aiohttp.typedefs import Handler

from bot.http_server import HttpServer
from bot.library.live import Library, Reloaded
from bot.localapi import BotApi

from .page import Page

log = logging.getLogger(__name__)

_STATIC = {
    "chat.js": "text/javascript",
    "chat.css": "text/css",
}
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
_MAX_MESSAGE = 64 * 1024  # bytes of one message from a page: a 4096-character text fits many times
# A browser should not guess types, frame the page, or load anything from elsewhere.
_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "Cache-Control": "no-cache",
}


class WebChat:
    """Serve the web chat for `api` on http://host:port. ``await start()``, ``await stop()``."""

    def __init__(self, api: BotApi, library: Library, *, host: str = "127.0.0.1", port: int = 8080):
        self.api = api
        self.library = library  # the page's words come from the newest catalogs
        self.host = host
        self.port = port
        self.pages: set[Page] = set()
        self._banner: list[str] = []
        self._server: HttpServer | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    async def start(self) -> WebChat:
        app = web.Application(middlewares=[self._this_machine_only])
        app.router.add_get("/", self._index)
        app.router.add_get("/static/{name}", self._static)
        app.router.add_get("/photo/{file_id}", self._photo)
        app.router.add_get("/ws", self._websocket)
        self._server = await HttpServer.start(app, self.host, self.port)
        self.port = self._server.port
        return self

    async def stop(self) -> None:
        """Close every page's connection and stop listening; safe to call twice."""
        server, self._server = self._server, None
        if server is not None:
            await server.stop()

    def show_banner(self, lines: list[str]) -> None:
        """Show `lines` (file:line: message) on every page until clear_banner(); new pages see them too."""
        self._banner = list(lines)
        for page in self.pages:
            page.show_banner(self._banner)

    def clear_banner(self) -> None:
        self.show_banner([])

    def reloaded(self, outcome: Reloaded) -> None:
        """A content reload happened: show its problems until one is accepted (a Library listener)."""
        self.show_banner(outcome.lines() if not outcome.accepted else [])

    # ------------------------------------------------------------------ HTTP

    def host_allowed(self, host: str) -> bool:
        """Whether a Host header names this machine: a loopback name or the configured host, any port."""
        try:
            name = urlsplit(f"//{host}").hostname
        except ValueError:  # a malformed port or bracket
            return False
        return name is not None and (name in LOOPBACK_HOSTS or name == self.host.strip("[]").lower())

    @web.middleware
    async def _this_machine_only(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not self.host_allowed(request.host):
            raise web.HTTPForbidden(
                text=f"the web chat answers at {self.url} (or another loopback address) only; "
                "set COURSEBOT_WEB_HOST to serve it under another name.",
                headers=_HEADERS,
            )
        return await handler(request)

    async def _index(self, request: web.Request) -> web.Response:
        return web.Response(body=_file("index.html"), content_type="text/html", charset="utf-8", headers=_HEADERS)

    async def _static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in _STATIC:
            raise web.HTTPNotFound()
        return web.Response(body=_file(name), content_type=_STATIC[name], charset="utf-8", headers=_HEADERS)

    async def _photo(self, request: web.Request) -> web.Response:
        """A photo the bot sent, by its file_id (Telegram's apps download it the same way)."""
        stored = self.api.files.by_id.get(request.match_info["file_id"])
        if stored is None or stored.kind != "photo":
            raise web.HTTPNotFound()
        headers = {**_HEADERS, "Cache-Control": "private, max-age=86400, immutable"}  # a file_id never changes
        return web.Response(body=stored.data, content_type=stored.mime, headers=headers)

    async def _websocket(self, request: web.Request) -> web.WebSocketResponse:
        origin = request.headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc != request.host:
            # Another site open in the same browser may not drive a learner's chat.
            raise web.HTTPForbidden(text="the web chat answers its own page only")
        ws = web.WebSocketResponse(heartbeat=30.0, max_msg_size=_MAX_MESSAGE)
        await ws.prepare(request)
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        page = Page(self.api, lambda: self.library.newest.i18n, lambda: self._banner, queue.put_nowait)
        self.pages.add(page)
        writer = asyncio.create_task(_write(ws, queue))
        try:
            async for message in ws:
                if message.type != WSMsgType.TEXT:
                    continue
                try:
                    data = json.loads(message.data)
                except ValueError:
                    page.send({"type": "error", "text": "not JSON"})
                    continue
                page.feed(data)
        finally:
            self.pages.discard(page)
            page.close()
            queue.put_nowait(None)
            with contextlib.suppress(asyncio.CancelledError):
                await writer
        return ws


async def _write(ws: web.WebSocketResponse, queue: asyncio.Queue[dict[str, Any] | None]) -> None:
    """Send queued messages in order until None; a closed connection drops the rest."""
    while (item := await queue.get()) is not None:
        if ws.closed:
            continue
        try:
            await ws.send_str(json.dumps(item, ensure_ascii=False))
        except ConnectionError:
            log.debug("a web chat page went away")


@functools.cache
def _file(name: str) -> bytes:
    """A static file's bytes, read once (the page files ship inside the package)."""
    return resources.files(__package__).joinpath("static", name).read_bytes()
