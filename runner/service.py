"""The runner as a service: the protocol (protocol.py) over a local socket.

One connection may carry many requests at once; each is answered with its
id.  The service never imports torch: all execution happens in the backend
(the sandboxed pool, or Docker).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import stat
from collections.abc import Awaitable, Callable
from typing import Any

from . import protocol
from .backend import Backend
from .config import UnixAddress, parse_address
from .errors import InvalidRequest, ProtocolError, RunnerError
from .grading import ExerciseChecks
from .limits import DEFAULT

log = logging.getLogger("runner.service")

# Variables that must never reach the runner (it only needs PATH and LANG).
SECRET_ENV = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|PRIVATE|AUTH", re.I)


def scrub_environment() -> None:
    """Drop secret-looking variables from our own environment (belt and braces:
    the embedded client already starts us with a clean one)."""
    for k in list(os.environ):
        if SECRET_ENV.search(k):
            del os.environ[k]


Reply = Callable[[dict[str, Any]], Awaitable[None]]


class Service:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._servers: list[asyncio.Server] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lock = asyncio.Lock()
        tasks: set[asyncio.Task[None]] = set()

        async def reply(msg: dict[str, Any]) -> None:
            async with lock:
                with contextlib.suppress(ConnectionError):
                    await protocol.write_frame(writer, msg)

        try:
            while True:
                try:
                    header = await reader.readexactly(4)
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                n = int.from_bytes(header, "big")
                if n > protocol.MAX_FRAME:
                    await reply(
                        {
                            "id": None,
                            "ok": False,
                            "error": _err(ProtocolError(f"frame of {n} bytes exceeds {protocol.MAX_FRAME}")),
                        }
                    )
                    break
                try:
                    body = await reader.readexactly(n)
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                # A frame that is not a request (not JSON, too deep, another version) is answered and never
                # acted on; the framing is intact, so the connection goes on with the next one.
                try:
                    raw = protocol.parse(body)
                except ProtocolError as e:
                    await reply({"id": None, "ok": False, "error": _err(e)})
                    continue
                try:
                    msg = protocol.check_version(raw)
                except ProtocolError as e:
                    await reply({"id": raw.get("id"), "ok": False, "error": _err(e)})
                    continue
                t = asyncio.ensure_future(self._answer(msg, reply))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
        finally:
            for t in tasks:
                t.cancel()
            with contextlib.suppress(Exception):
                writer.close()
                await writer.wait_closed()

    async def _answer(self, msg: dict[str, Any], reply: Reply) -> None:
        rid = msg.get("id")
        try:
            result = await self.dispatch(msg)
            await reply({"id": rid, "ok": True, "result": result})
        except RunnerError as e:
            await reply({"id": rid, "ok": False, "error": _err(e)})
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.exception("request %s failed", rid)
            await reply(
                {"id": rid, "ok": False, "error": {"type": "RunnerError", "message": f"{type(e).__name__}: {e}"}}
            )

    async def dispatch(self, msg: dict[str, Any]) -> Any:
        op = msg.get("op")
        if op == "ping":
            return {"pong": True}
        if op == "info":
            return {"protocol": protocol.VERSION, "limits": DEFAULT.to_dict(), **self.backend.stats()}
        if op == "run":
            code = msg.get("code")
            if not isinstance(code, str):
                raise InvalidRequest("'code' must be a string")
            limits = msg.get("limits")
            if limits is not None and not isinstance(limits, dict):
                raise InvalidRequest("'limits' must be an object")
            checks = msg.get("checks")
            checks = ExerciseChecks.from_dict(checks) if checks is not None else None
            seed = msg.get("seed")
            if seed is not None and not isinstance(seed, int):
                raise InvalidRequest("'seed' must be an integer")
            res = await self.backend.run(code, limits, checks, seed)
            return res.to_dict()
        raise InvalidRequest(f"unknown op {op!r}")

    async def listen(self, address: str) -> None:
        """Accept connections at ``address`` (see config.parse_address; RunnerConfigError if malformed)."""
        where = parse_address(address)
        if isinstance(where, UnixAddress):
            path = where.path
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISSOCK(os.lstat(path).st_mode):
                    os.unlink(path)
            old = os.umask(0o177)  # the socket is ours alone (0600)
            try:
                server = await asyncio.start_unix_server(self.handle, path=path)
            finally:
                os.umask(old)
        else:
            if where.host not in ("127.0.0.1", "localhost", "::1"):
                log.warning("listening on %s: the runner protocol has no authentication", where.host)
            server = await asyncio.start_server(self.handle, where.host, where.port)
        self._servers.append(server)

    def addresses(self) -> list[str]:
        out = []
        for s in self._servers:
            for sock in s.sockets:
                name = sock.getsockname()
                out.append(f"unix://{name}" if isinstance(name, str) else f"tcp://{name[0]}:{name[1]}")
        return out

    async def close(self) -> None:
        for s in self._servers:
            s.close()
            with contextlib.suppress(Exception):
                await s.wait_closed()
        self._servers.clear()


def _err(e: BaseException) -> dict[str, str]:
    return {"type": type(e).__name__ if isinstance(e, RunnerError) else "RunnerError", "message": str(e)}


async def serve_forever(
    backend: Backend, addresses: list[str], ready_line: bool = True, watch_stdin: bool = False
) -> None:
    """Listen until SIGTERM/SIGINT (or stdin closing, when watched)."""
    service = Service(backend)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    if watch_stdin:
        # The embedded client holds our stdin open; it closing means the bot
        # is gone, and so must we be.
        def on_stdin() -> None:
            try:
                data = os.read(0, 4096)
            except OSError:
                data = b""
            if not data:
                loop.remove_reader(0)
                stop.set()

        os.set_blocking(0, False)
        loop.add_reader(0, on_stdin)
    try:
        for a in addresses:
            await service.listen(a)
        if ready_line:
            print("READY " + json.dumps({"addresses": service.addresses(), **backend.stats()}), flush=True)
        await stop.wait()
    finally:
        await service.close()
        await backend.close()
