"""The operators' HTTP endpoint: GET /healthz (is the bot able to serve?) and GET /metrics (Prometheus).

A deliberately tiny HTTP/1.1 server on asyncio: two read-only paths, bounded requests, one response
per connection. Health is a set of named checks, each an awaitable that returns None when fine or a
one-line problem; /healthz answers 200 when all are fine and 503 otherwise, with each check's result
as JSON, so a Docker HEALTHCHECK, a load balancer or a person can read it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping

from prometheus_client import CONTENT_TYPE_LATEST

from bot.errors import ConfigError
from bot.metrics import Metrics

log = logging.getLogger(__name__)

Check = Callable[[], Awaitable[str | None]]
# Before the metrics are rendered (e.g. asking the runner for its load); failures only log.
Refresh = Callable[[], Awaitable[None]]

MAX_REQUEST_BYTES = 8192
READ_TIMEOUT_S = 5.0
CHECK_TIMEOUT_S = 5.0


class MonitoringServer:
    """``async with MonitoringServer(host, port, metrics, checks):`` serves until the block ends."""

    def __init__(
        self,
        host: str,
        port: int,
        metrics: Metrics,
        checks: Mapping[str, Check],
        refresh: Refresh | None = None,
        check_timeout_s: float = CHECK_TIMEOUT_S,
    ) -> None:
        self.host, self.port = host, port
        self.check_timeout_s = check_timeout_s
        self.metrics = metrics
        self.checks = dict(checks)
        self.refresh = refresh
        self._server: asyncio.AbstractServer | None = None

    async def __aenter__(self) -> MonitoringServer:
        try:
            self._server = await asyncio.start_server(self._handle, self.host, self.port, limit=MAX_REQUEST_BYTES)
        except OSError as exc:
            raise ConfigError(
                f"COURSEBOT_MONITORING: cannot serve /healthz and /metrics on {self.host}:{self.port}: {exc.strerror}."
            ) from None
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("health and metrics on http://%s:%d/healthz and /metrics", self.host, self.port)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def health(self) -> tuple[bool, dict[str, str]]:
        """Run every check at once; (all fine, {name: "ok" or the problem})."""

        async def run(check: Check) -> str | None:
            try:
                return await asyncio.wait_for(check(), self.check_timeout_s)
            except TimeoutError:
                return f"no answer within {self.check_timeout_s:g} s"
            except Exception as error:  # a check that breaks is a failed check, said in one line
                return f"{type(error).__name__}: {error}"

        names = list(self.checks)
        results = await asyncio.gather(*(run(self.checks[name]) for name in names))
        report = {name: result or "ok" for name, result in zip(names, results, strict=True)}
        return all(result is None for result in results), report

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            status, content_type, body = await asyncio.wait_for(self._respond(reader), READ_TIMEOUT_S)
        except (TimeoutError, ValueError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            status, content_type, body = "400 Bad Request", "text/plain", b"bad request\n"
        head = (
            f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\n\r\n"
        )
        with contextlib.suppress(ConnectionError):
            writer.write(head.encode() + body)
            await writer.drain()
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()

    async def _respond(self, reader: asyncio.StreamReader) -> tuple[str, str, bytes]:
        request = await reader.readuntil(b"\r\n\r\n")
        method, _, rest = request.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
        path = rest.split(" ", 1)[0].split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", "text/plain", b"only GET\n"
        if path == "/healthz":
            fine, report = await self.health()
            body = json.dumps({"status": "ok" if fine else "failing", "checks": report}).encode() + b"\n"
            return ("200 OK" if fine else "503 Service Unavailable"), "application/json", body
        if path == "/metrics":
            if self.refresh is not None:
                try:
                    await asyncio.wait_for(self.refresh(), self.check_timeout_s)
                except Exception as error:  # the metrics are served anyway, with the last figures
                    log.warning("could not refresh the metrics: %s", error)
            return "200 OK", CONTENT_TYPE_LATEST, self.metrics.exposition()
        return "404 Not Found", "text/plain", b"try /healthz or /metrics\n"
