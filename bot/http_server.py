"""The one way coursebot listens for HTTP: the built-in Bot API server, the web chat, and /healthz and /metrics.

Each is aiohttp on one TCP site, without signal handling or an access log, stopped within a second. A server may
cap the connections it holds at once (one past the cap is closed unanswered) and close a connection that sends
nothing for ``idle_timeout_s`` seconds, so idle connections cannot pile up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

log = logging.getLogger(__name__)

Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
SHUTDOWN_TIMEOUT_S = 1.0  # requests still running when a server stops get this long
IDLE_TIMEOUT_S = 75.0  # aiohttp's own keep-alive default would hold an idle connection for an hour


class HttpServer:
    """A running aiohttp server: ``server = await HttpServer.start(...)``, then ``server.port``, ``await stop()``."""

    def __init__(self, runner: web.BaseRunner, port: int) -> None:
        self._runner: web.BaseRunner | None = runner
        self.port = port

    @classmethod
    async def start(
        cls,
        target: web.Application | Handler,
        host: str,
        port: int,
        *,
        max_connections: int | None = None,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        client_max_size: int | None = None,
    ) -> HttpServer:
        """Listen on host:port (port 0: any free one) with ``target``: an Application, or a bare request handler.

        ``client_max_size`` bounds a bare handler's request bodies (an Application states its own). Raises OSError
        when the address cannot be used.
        """
        options: dict[str, Any] = {"access_log": None, "keepalive_timeout": idle_timeout_s}
        runner: web.BaseRunner
        if isinstance(target, web.Application):
            runner = web.AppRunner(target, handle_signals=False, shutdown_timeout=SHUTDOWN_TIMEOUT_S, **options)
        else:
            loop = asyncio.get_running_loop()
            size = client_max_size or 1024**2

            def make_request(
                message: Any, payload: Any, protocol: RequestHandler, writer: Any, task: asyncio.Task[None]
            ) -> web.BaseRequest:
                return web.BaseRequest(message, payload, protocol, writer, task, loop, client_max_size=size)

            server = web.Server(target, request_factory=make_request, handler_cancellation=True, **options)
            runner = web.ServerRunner(server, handle_signals=False, shutdown_timeout=SHUTDOWN_TIMEOUT_S)
        await runner.setup()
        if max_connections is not None and runner.server is not None:
            _cap(runner.server, max_connections)
        try:
            await web.TCPSite(runner, host, port).start()
        except OSError:
            await runner.cleanup()
            raise
        return cls(runner, runner.addresses[0][1])

    @property
    def connections(self) -> int:
        """Return how many connections the server holds now."""
        server = self._runner.server if self._runner is not None else None
        return len(server.connections) if server is not None else 0

    async def stop(self) -> None:
        """Stop listening and close every connection; safe to call twice."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


def _cap(server: web.Server, max_connections: int) -> None:
    """Close each connection made while ``server`` already holds ``max_connections``, before it is read."""
    accept = server.connection_made

    def connection_made(handler: RequestHandler, transport: asyncio.Transport) -> None:
        if len(server.connections) >= max_connections:
            log.warning("refused a connection: %d are open already", max_connections)
            transport.close()
            return
        accept(handler, transport)

    # aiohttp's request handler tells its server of each new connection through this method.
    server.connection_made = connection_made  # type: ignore[method-assign]
