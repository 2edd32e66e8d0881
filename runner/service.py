"""The runner as a service: the protocol (protocol.py) over a local socket.

One connection may carry many requests at once; each is answered with its
id.  The service never imports torch: all execution happens in the backend
(the sandboxed pool, or Docker).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
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
from .errors import InvalidRequest, ProtocolError, RunnerConfigError, RunnerError, Unauthorized
from .grading import ExerciseChecks
from .limits import DEFAULT

log = logging.getLogger("runner.service")

HELLO_TIMEOUT_S = 10.0  # seconds a TCP peer has to present the token
HELLO_MAX_BYTES = 4096  # bytes of the first frame on a TCP connection, read before the peer is known
LOOPBACK = ("127.0.0.1", "localhost", "::1")

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
    """Serves a backend on Unix sockets (guarded by their file mode, 0600) and TCP (guarded by ``token``).

    Every TCP connection must open with ``{"op": "hello", "token": ...}`` carrying the runner's token
    (RUNNER_TOKEN); anything else is refused, logged, and the connection closed.  The token is a shared
    secret sent in clear text: TCP is for a runner on a private network, never on an open one.
    """

    def __init__(self, backend: Backend, token: str | None = None) -> None:
        self.backend = backend
        self._token = token
        self._servers: list[asyncio.Server] = []

    async def handle(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, authenticate: bool = False
    ) -> None:
        lock = asyncio.Lock()
        tasks: set[asyncio.Task[None]] = set()

        async def reply(msg: dict[str, Any]) -> None:
            async with lock:
                with contextlib.suppress(ConnectionError):
                    await protocol.write_frame(writer, msg)

        try:
            if authenticate and not await self._hello(reader, reply, writer.get_extra_info("peername")):
                return
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

    async def _hello(self, reader: asyncio.StreamReader, reply: Reply, peer: object) -> bool:
        """Whether the connection's first frame is a hello with the token; a refusal is answered and logged."""
        rid = None
        try:
            header = await asyncio.wait_for(reader.readexactly(4), HELLO_TIMEOUT_S)
            n = int.from_bytes(header, "big")
            if n > HELLO_MAX_BYTES:
                reason = f"a first frame of {n} bytes"
            else:
                msg = protocol.decode(await asyncio.wait_for(reader.readexactly(n), HELLO_TIMEOUT_S))
                rid = msg.get("id")
                token = msg.get("token")
                if msg.get("op") != "hello":
                    reason = f"no hello first (op {str(msg.get('op'))[:40]!r})"
                elif not isinstance(token, str) or self._token is None:
                    reason = "no token"
                elif not hmac.compare_digest(token.encode(), self._token.encode()):
                    reason = "a wrong token"
                else:
                    await reply({"id": rid, "ok": True, "result": {"hello": True}})
                    return True
        except TimeoutError:
            reason = f"no hello within {HELLO_TIMEOUT_S:.0f} s"
        except (asyncio.IncompleteReadError, ConnectionError):
            reason = "the connection closed before a hello"
        except ProtocolError as e:
            reason = f"a malformed hello ({e})"
        log.warning("refused a connection from %s: %s", _peer(peer), reason)
        error = Unauthorized("this runner needs its token (RUNNER_TOKEN) in a hello first")
        await reply({"id": rid, "ok": False, "error": _err(error)})
        return False

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
        if op == "hello":  # a connection already trusted (a Unix socket, or a TCP one after its hello)
            return {"hello": True}
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
            if self._token is None:
                raise RunnerConfigError(
                    f"listening on {where} needs RUNNER_TOKEN, the secret every TCP connection must present "
                    "(any local user can reach a TCP port); or serve on a Unix socket (--socket PATH)"
                )
            if where.host not in LOOPBACK:
                log.warning(
                    "listening on %s beyond this machine: the token travels unencrypted, keep it on a private network",
                    where,
                )
            server = await asyncio.start_server(
                functools.partial(self.handle, authenticate=True), where.host, where.port
            )
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


def _peer(peer: object) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


def _err(e: BaseException) -> dict[str, str]:
    return {"type": type(e).__name__ if isinstance(e, RunnerError) else "RunnerError", "message": str(e)}


async def serve_forever(
    backend: Backend,
    addresses: list[str],
    ready_line: bool = True,
    watch_stdin: bool = False,
    token: str | None = None,
) -> None:
    """Listen until SIGTERM/SIGINT (or stdin closing, when watched); TCP connections must present ``token``."""
    service = Service(backend, token)
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
