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
import ipaddress
import json
import logging
import os
import re
import signal
import socket
import stat
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from . import logs, protocol, sandbox, trace
from .backend import Backend
from .config import TcpAddress, UnixAddress, parse_address
from .errors import InvalidRequest, ProtocolError, RunnerConfigError, RunnerError, Unauthorized
from .grading import ExerciseChecks
from .limits import DEFAULT

log = logging.getLogger("runner.service")

HELLO_TIMEOUT_S = 10.0  # seconds a TCP peer has, from connecting, to present the token
HELLO_MAX_BYTES = 4096  # bytes of the first frame on a TCP connection, read before the peer is known
TOKEN_MAX_CHARS = 1024  # characters of a token presented; a longer one is malformed
LOOPBACK = ("127.0.0.1", "localhost", "::1")
# Connections waiting for their hello, at most: from one host, and from all together.  One more is closed
# unread, so idle connections cannot use up the runner's descriptors (1,069 once failed a real job).  Every
# job comes on a connection of its own (runner.client), and behind a balancer all of them from one host, so a
# host's share is a burst of a bot's jobs, not a handful: the pool's slots and queue fit in it twice over.
HELLO_PENDING_PER_HOST = 64
HELLO_PENDING = 256
# After a wrong or malformed token, the host's next refusal waits BACKOFF_BASE_S, doubling per failure up to
# BACKOFF_MAX_S (the connection keeps its place meanwhile, so guesses slow down); forgotten after BACKOFF_FORGET_S.
BACKOFF_BASE_S = 0.05
BACKOFF_MAX_S = 10.0
BACKOFF_FORGET_S = 300.0
LOG_EVERY_S = 10.0  # refusals are logged at most this often per host, with a count of the ones left unsaid
PEERS_KEPT = 4096  # hosts remembered at most (the least recently seen are forgotten first)
# The health endpoint (``--health``): a request's head must arrive within this many seconds and bytes, and this
# many checks are answered at once (one more is closed unread: a balancer checks a host a few times a second).
HEALTH_TIMEOUT_S = 2.0
HEALTH_MAX_BYTES = 1024
HEALTH_PENDING = 16
# Connections the kernel queues before they are accepted. Each request comes on a connection of its own
# (runner.client): a burst of jobs is a burst of connections, and a full Unix backlog refuses at once.
BACKLOG = 1024

# Variables that must never reach the runner (it only needs PATH and LANG).
SECRET_ENV = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|PRIVATE|AUTH", re.I)


def scrub_environment() -> None:
    """Drop secret-looking variables from our own environment (belt and braces:
    the embedded client already starts us with a clean one)."""
    for k in list(os.environ):
        if SECRET_ENV.search(k):
            del os.environ[k]


Reply = Callable[[dict[str, Any]], Awaitable[None]]


def _bind_unix(path: str) -> socket.socket:
    """A Unix socket bound at ``path`` (a stale socket there replaced), mode 0600: ours alone.

    A root runner (per-slot uids) with no CAP_DAC_OVERRIDE, as in the image, makes it as the folder's owner
    (the image's user, who alone may then connect: the bot, the health check); anyone else as itself.
    """
    folder = os.stat(os.path.dirname(os.path.abspath(path)))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    old = os.umask(0o177)
    try:
        with sandbox.filesystem_ids(folder.st_uid, folder.st_gid):
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISSOCK(os.lstat(path).st_mode):
                    os.unlink(path)
            sock.bind(path)
    except BaseException:
        sock.close()
        raise
    finally:
        os.umask(old)
    return sock


@dataclass
class _Peer:
    pending: int = 0  # its connections waiting for their hello
    failures: int = 0  # wrong or malformed tokens since it was last forgiven
    last_failure: float = -1e18
    last_log: float = -1e18
    unsaid: int = 0  # refusals not logged since the last log line


class TcpDoor:
    """Who may try a hello over TCP, how long a wrong token waits, and which refusals are logged.  Pure (a clock
    is injected): the service asks it, and tests drive it.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._peers: dict[str, _Peer] = {}
        self.pending = 0

    def _peer(self, host: str) -> _Peer:
        peer = self._peers.pop(host, None) or _Peer()
        self._peers[host] = peer  # most recently seen last
        while len(self._peers) > PEERS_KEPT:
            oldest = next(iter(self._peers))
            if self._peers[oldest].pending:
                break  # never forget a host that holds connections (its count must come back down)
            del self._peers[oldest]
        return peer

    def enter(self, host: str) -> str | None:
        """Count a new connection from ``host`` waiting for its hello, or say why it is refused."""
        peer = self._peer(host)
        if self.pending >= HELLO_PENDING:
            return f"{HELLO_PENDING} connections are waiting for their hello"
        if peer.pending >= HELLO_PENDING_PER_HOST:
            return f"{HELLO_PENDING_PER_HOST} of its connections are waiting for their hello"
        peer.pending += 1
        self.pending += 1
        return None

    def leave(self, host: str) -> None:
        """A connection of ``host`` said hello, was refused, or closed."""
        peer = self._peer(host)
        peer.pending -= 1
        self.pending -= 1

    def failed(self, host: str) -> float:
        """Count a wrong token from ``host``; return the seconds its refusal waits."""
        peer, now = self._peer(host), self._clock()
        if now - peer.last_failure > BACKOFF_FORGET_S:
            peer.failures = 0
        peer.failures += 1
        peer.last_failure = now
        return min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2.0 ** min(peer.failures - 1, 30))

    def passed(self, host: str) -> None:
        self._peer(host).failures = 0

    def log_line(self, host: str, what: str) -> str | None:
        """The line to log for this refusal, or None while ``host``'s refusals are held back."""
        peer, now = self._peer(host), self._clock()
        if now - peer.last_log < LOG_EVERY_S:
            peer.unsaid += 1
            return None
        line = what + (f" ({peer.unsaid} more refused from {host} since the last line)" if peer.unsaid else "")
        peer.last_log, peer.unsaid = now, 0
        return line


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
        self._health: list[asyncio.Server] = []
        self._health_pending = 0
        self.door = TcpDoor()
        self.wait = asyncio.sleep  # how a wrong token's refusal waits (tests count the waits instead)

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
            if authenticate and not await self._admit(reader, reply, writer.get_extra_info("peername")):
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
                read_at = trace.now()
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
                t = asyncio.ensure_future(self._answer(msg, reply, read_at))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
        finally:
            for t in tasks:
                t.cancel()
            with contextlib.suppress(Exception):
                writer.close()
                await writer.wait_closed()

    async def _admit(self, reader: asyncio.StreamReader, reply: Reply, peer: object) -> bool:
        """Whether a TCP connection may go on: room for it to wait for its hello, then the hello itself."""
        host = peer[0] if isinstance(peer, tuple) and peer else str(peer)
        refused = self.door.enter(host)
        if refused is not None:  # closed unread and unanswered: an answer would cost what the cap saves
            self._log_refusal(host, peer, refused)
            return False
        try:
            return await self._hello(reader, reply, host, peer)
        finally:
            self.door.leave(host)

    async def _hello(self, reader: asyncio.StreamReader, reply: Reply, host: str, peer: object) -> bool:
        """Whether the connection's first frame is a hello with the token; a refusal is answered and logged."""
        rid = None
        guessed = False  # a token was presented, and it was not ours
        try:
            async with asyncio.timeout(HELLO_TIMEOUT_S):  # one deadline for the whole hello, however it trickles
                header = await reader.readexactly(4)
                n = int.from_bytes(header, "big")
                if n > HELLO_MAX_BYTES:
                    reason = f"a first frame of {n} bytes"
                else:
                    msg = protocol.decode(await reader.readexactly(n))
                    rid = msg.get("id") if type(msg.get("id")) is int else None
                    token = msg.get("token")
                    if msg.get("op") != "hello":
                        reason = "no hello first"
                    elif token is None or self._token is None:
                        reason = "no token"
                    elif (presented := _token_bytes(token)) is None:
                        reason, guessed = "a malformed token", True
                    elif not hmac.compare_digest(presented, self._token.encode("utf-8", "surrogateescape")):
                        reason, guessed = "a wrong token", True
                    else:
                        self.door.passed(host)
                        await reply({"id": rid, "ok": True, "result": {"hello": True}})
                        return True
                if guessed:  # the connection keeps its place while it waits: guesses slow down with each one
                    await self.wait(self.door.failed(host))
        except TimeoutError:
            reason = f"no hello within {HELLO_TIMEOUT_S:.0f} s"
        except (asyncio.IncompleteReadError, ConnectionError):
            reason = "the connection closed before a hello"
        except ProtocolError:
            reason = "a malformed hello"
        self._log_refusal(host, peer, reason)
        error = Unauthorized("this runner needs its token (RUNNER_TOKEN) in a hello first")
        await reply({"id": rid, "ok": False, "error": _err(error)})
        return False

    def _log_refusal(self, host: str, peer: object, reason: str) -> None:
        line = self.door.log_line(host, f"refused a connection from {_peer(peer)}: {reason}")
        if line is not None:
            log.warning("%s", line)

    async def _answer(self, msg: dict[str, Any], reply: Reply, read_at: int | None = None) -> None:
        rid = msg.get("id")
        marks = None
        if read_at is not None and msg.get("trace") is True and msg.get("op") == "run":
            # Only this request's task sees them: a task runs in a copy of the context it was made in.
            marks = trace.start("service.frame_read", read_at)
            trace.mark("service.task")
        try:
            result = await self.dispatch(msg)
            if marks is not None:
                trace.mark("service.result")
                result["trace"] = trace.to_wire(marks)
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
            trace.mark("service.request")
            res = await self.backend.run(code, limits, checks, seed)
            return res.to_dict()
        raise InvalidRequest("unknown op: a request's op is one of ping, hello, info, run")

    async def listen(self, address: str) -> None:
        """Accept connections at ``address`` (see config.parse_address; RunnerConfigError if malformed)."""
        where = parse_address(address)
        if isinstance(where, UnixAddress):
            server = await asyncio.start_unix_server(self.handle, sock=_bind_unix(where.path), backlog=BACKLOG)
        else:
            if self._token is None:
                raise RunnerConfigError(
                    f"listening on {where} needs RUNNER_TOKEN, the secret every TCP connection must present "
                    "(any local user can reach a TCP port); or serve on a Unix socket (--socket PATH)"
                )
            if where.host not in LOOPBACK and not _loopback(where.host):
                log.warning(
                    "listening on %s beyond this machine: the token travels unencrypted, keep it on a private network",
                    where,
                )
            server = await asyncio.start_server(
                functools.partial(self.handle, authenticate=True), where.host, where.port, backlog=BACKLOG
            )
        self._servers.append(server)

    async def listen_health(self, address: str) -> None:
        """Answer a balancer's health checks at ``address`` (tcp://HOST:PORT): plain HTTP, no token.

        ``GET /healthz`` is answered 200 with the pool's load (running, waiting, size) while this runner serves,
        and nothing else: a check takes no slot, presents no token (so never counts as a wrong one), and a runner
        that is gone stops answering, which is what takes its host out of the balancer's rotation.
        """
        where = parse_address(address, "--health")
        if not isinstance(where, TcpAddress):
            raise RunnerConfigError(f"--health must be tcp://HOST:PORT, got {address!r}")
        server = await asyncio.start_server(
            self._health_check, where.host, where.port, backlog=64, limit=HEALTH_MAX_BYTES
        )
        self._health.append(server)

    async def _health_check(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._health_pending >= HEALTH_PENDING:
            writer.close()
            return
        self._health_pending += 1
        try:
            await self._answer_health(reader, writer)
        finally:
            self._health_pending -= 1

    async def _answer_health(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(HEALTH_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            head = b""
        line = head.split(b"\r\n", 1)[0].split()
        if len(line) == 3 and line[0] in (b"GET", b"HEAD") and line[1] == b"/healthz":
            stats = self.backend.stats()
            load = {k: stats.get(k) for k in ("running", "waiting", "size")}
            body = json.dumps({"ok": True, **load}).encode() + b"\n"
            status = b"200 OK"
        else:
            body, status = b"GET /healthz\n", b"404 Not Found"
        head_out = b"HTTP/1.0 %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
        with contextlib.suppress(ConnectionError):
            writer.write(head_out % (status, len(body)) + (body if line[:1] != [b"HEAD"] else b""))
            await writer.drain()
        with contextlib.suppress(Exception):
            writer.close()
            await writer.wait_closed()

    def health_addresses(self) -> list[str]:
        return [str(TcpAddress(*s.getsockname()[:2])) for h in self._health for s in h.sockets]

    def addresses(self) -> list[str]:
        out = []
        for s in self._servers:
            for sock in s.sockets:
                name = sock.getsockname()
                out.append(f"unix://{name}" if isinstance(name, str) else f"tcp://{name[0]}:{name[1]}")
        return out

    async def close(self) -> None:
        for s in self._health + self._servers:
            s.close()
            with contextlib.suppress(Exception):
                await s.wait_closed()
        self._servers.clear()
        self._health.clear()


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _token_bytes(token: object) -> bytes | None:
    """A presented token as bytes to compare, or None when it cannot be one (not text, too long, not UTF-8)."""
    if not isinstance(token, str) or len(token) > TOKEN_MAX_CHARS:
        return None
    try:
        return token.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: JSON allows it, UTF-8 does not
        return None


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
    json_lines: bool = False,
    health: str | None = None,
) -> None:
    """Listen until SIGTERM/SIGINT (or stdin closing, when watched); TCP connections must present ``token``.

    ``health`` (tcp://HOST:PORT) also answers a balancer's health checks there (``Service.listen_health``).
    """
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
        if health is not None:
            await service.listen_health(health)
        if ready_line:
            said = {"addresses": service.addresses(), **backend.stats()}
            if health is not None:
                said["health"] = service.health_addresses()
            print(logs.ready(said, json_lines), flush=True)
        await stop.wait()
    finally:
        await service.close()
        await backend.close()
