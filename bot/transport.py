"""PTB's HTTP transport over aiohttp: the Bot API calls PTB makes, sent for a fraction of httpx's CPU.

PTB's own transport (httpx, over httpcore and anyio) cost the bot more CPU per tap than everything else it does
(bench/bot.py --profile, issue 22), and its connection pool walks every queued request on each call, so a
backlog made every call dearer. This one keeps PTB's contract (BaseRequest: status and body back; PTB reads
them) and its timeouts, and sends parameters as one JSON body (files: multipart, as PTB does).
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from telegram._utils.defaultvalue import DefaultValue
from telegram._utils.types import ODVInput
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData

# PTB's HTTPXRequest defaults, in seconds (None waits for ever).
READ_TIMEOUT = 5.0
WRITE_TIMEOUT = 5.0
CONNECT_TIMEOUT = 5.0
POOL_TIMEOUT = 1.0
JSON = "application/json"


class AiohttpRequest(BaseRequest):
    """Send Bot API requests with one aiohttp session of ``connection_pool_size`` connections.

    Timeouts as PTB's HTTPXRequest takes them: ``pool`` is the wait for a free connection, ``connect`` for a new
    one, ``read`` for the answer; ``write`` bounds the whole call together with the others (aiohttp has no timer
    for writing alone).
    """

    def __init__(
        self,
        *,
        connection_pool_size: int = 1,
        read_timeout: float | None = READ_TIMEOUT,
        write_timeout: float | None = WRITE_TIMEOUT,
        connect_timeout: float | None = CONNECT_TIMEOUT,
        pool_timeout: float | None = POOL_TIMEOUT,
    ) -> None:
        self._pool_size = connection_pool_size
        self._read_timeout = read_timeout
        self._write_timeout = write_timeout
        self._connect_timeout = connect_timeout
        self._pool_timeout = pool_timeout
        self._session: aiohttp.ClientSession | None = None

    @property
    def read_timeout(self) -> float | None:
        """Return the read timeout used when a call names none."""
        return self._read_timeout

    async def initialize(self) -> None:
        """Open the session (again, after a shutdown)."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._pool_size),
                headers={"User-Agent": self.USER_AGENT},
                # No cookies: the Bot API sets none, and a jar costs a lookup per call.
                cookie_jar=aiohttp.DummyCookieJar(),
            )

    async def shutdown(self) -> None:
        """Close the session and its connections; calling it again does nothing."""
        if self._session is not None and not self._session.closed:
            await self._session.close()

    def _timeout(
        self,
        read: ODVInput[float],
        write: ODVInput[float],
        connect: ODVInput[float],
        pool: ODVInput[float],
    ) -> aiohttp.ClientTimeout:
        read_s = self._read_timeout if isinstance(read, DefaultValue) else read
        write_s = self._write_timeout if isinstance(write, DefaultValue) else write
        connect_s = self._connect_timeout if isinstance(connect, DefaultValue) else connect
        pool_s = self._pool_timeout if isinstance(pool, DefaultValue) else pool
        parts = (read_s, write_s, connect_s, pool_s)
        return aiohttp.ClientTimeout(
            total=None if None in parts else sum(p for p in parts if p is not None),
            # aiohttp's connect covers waiting for a pooled connection and making a new one.
            connect=None if pool_s is None or connect_s is None else pool_s + connect_s,
            sock_connect=connect_s,
            sock_read=read_s,
        )

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        """Send one request; return the answer's status and body (PTB reads them)."""
        session = self._session
        if session is None or session.closed:
            raise RuntimeError("this AiohttpRequest is not initialized")
        timeout = self._timeout(read_timeout, write_timeout, connect_timeout, pool_timeout)
        options: dict[str, Any] = {}
        if request_data is not None and request_data.contains_files:
            form = aiohttp.FormData()
            for name, value in request_data.json_parameters.items():
                form.add_field(name, value)
            for name, (filename, content, mimetype) in request_data.multipart_data.items():
                form.add_field(name, content, filename=filename, content_type=mimetype)
            options["data"] = form
        elif request_data is not None:
            # PTB's parameters are JSON values already (its objects turned into dicts): one dumps for the call.
            options["data"] = json.dumps(request_data.parameters).encode()
            options["headers"] = {"Content-Type": JSON}
        try:
            async with session.request(method, url, timeout=timeout, **options) as response:
                return response.status, await response.read()
        except TimeoutError as exc:
            raise TimedOut(f"aiohttp.{type(exc).__name__}: {exc}" if str(exc) else None) from exc
        except aiohttp.ClientError as exc:
            # The class name helps when the message is empty, as httpx's transport does it.
            raise NetworkError(f"aiohttp.{type(exc).__name__}: {exc}") from exc
