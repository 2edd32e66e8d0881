"""The operators' HTTP endpoint: GET /healthz (is the bot able to serve?) and GET /metrics (Prometheus).

Health is a set of named checks, each an awaitable that returns None when fine or a one-line problem. They run in
the background, at most once every HEALTH_INTERVAL_S, and /healthz serves the latest result: 200 when all were
fine and 503 otherwise, with each check's result as JSON, so a Docker HEALTHCHECK, a load balancer or a person can
read it. However often it is asked, the database takes one write and the runner one ping per interval. The server
holds at most MAX_CONNECTIONS connections, answers one request on each, and closes one that sends nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from bot.errors import ConfigError
from bot.http_server import HttpServer
from bot.metrics import Metrics

log = logging.getLogger(__name__)

Check = Callable[[], Awaitable[str | None]]
# Before the metrics are rendered (e.g. asking the runner for its load); failures only log.
Refresh = Callable[[], Awaitable[None]]
Sleep = Callable[[float], Awaitable[object]]

MAX_REQUEST_BYTES = 8192
IDLE_TIMEOUT_S = 5.0  # a connection that sends nothing for this long is closed
MAX_CONNECTIONS = 64  # held at once; one more is closed unanswered
CHECK_TIMEOUT_S = 5.0
HEALTH_INTERVAL_S = 1.0  # between the end of one round of checks and the start of the next
_HEADERS = {"Cache-Control": "no-store"}


class MonitoringServer:
    """``async with MonitoringServer(host, port, metrics, checks):`` serves until the block ends.

    ``sleep`` waits between rounds of checks; tests replace it to step the rounds themselves.
    """

    def __init__(
        self,
        host: str,
        port: int,
        metrics: Metrics,
        checks: Mapping[str, Check],
        refresh: Refresh | None = None,
        check_timeout_s: float = CHECK_TIMEOUT_S,
        *,
        interval_s: float = HEALTH_INTERVAL_S,
        sleep: Sleep = asyncio.sleep,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.host, self.port = host, port
        self.check_timeout_s = check_timeout_s
        self.interval_s = interval_s
        self.max_connections = max_connections
        self.metrics = metrics
        self.checks = dict(checks)
        self.refresh = refresh
        self._sleep = sleep
        self._latest: tuple[bool, dict[str, str]] = (False, {})
        self._checking: asyncio.Task[None] | None = None
        self.server: HttpServer | None = None

    async def __aenter__(self) -> MonitoringServer:
        # The first round before the first request: /healthz never answers from no checks at all.
        self._latest = await self.health()
        self._checking = asyncio.create_task(self._check_every_interval(), name="health checks")
        try:
            self.server = await HttpServer.start(
                self._handle,
                self.host,
                self.port,
                max_connections=self.max_connections,
                idle_timeout_s=IDLE_TIMEOUT_S,
                client_max_size=MAX_REQUEST_BYTES,
            )
        except OSError as exc:
            await self._stop_checking()
            raise ConfigError(
                f"COURSEBOT_MONITORING: cannot serve /healthz and /metrics on {self.host}:{self.port}: {exc.strerror}."
            ) from None
        self.port = self.server.port
        log.info("health and metrics on http://%s:%d/healthz and /metrics", self.host, self.port)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stop_checking()
        if self.server is not None:
            await self.server.stop()
            self.server = None

    async def _stop_checking(self) -> None:
        task, self._checking = self._checking, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _check_every_interval(self) -> None:
        while True:
            await self._sleep(self.interval_s)
            self._latest = await self.health()

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

    async def _handle(self, request: web.BaseRequest) -> web.Response:
        # aiohttp sends no body in answer to HEAD, whatever the response holds.
        response = await self._respond(request)
        response.force_close()  # one request per connection: nothing is left open between scrapes
        return response

    async def _respond(self, request: web.BaseRequest) -> web.Response:
        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, text="only GET\n", headers={**_HEADERS, "Allow": "GET, HEAD"})
        if request.path == "/healthz":
            fine, report = self._latest
            body = json.dumps({"status": "ok" if fine else "failing", "checks": report}) + "\n"
            return web.Response(
                status=200 if fine else 503, text=body, content_type="application/json", headers=_HEADERS
            )
        if request.path == "/metrics":
            if self.refresh is not None:
                try:
                    await asyncio.wait_for(self.refresh(), self.check_timeout_s)
                except Exception as error:  # the metrics are served anyway, with the last figures
                    log.warning("could not refresh the metrics: %s", error)
            response = web.Response(body=self.metrics.exposition(), headers=_HEADERS)
            response.headers["Content-Type"] = CONTENT_TYPE_LATEST
            return response
        return web.Response(status=404, text="try /healthz or /metrics\n", headers=_HEADERS)
