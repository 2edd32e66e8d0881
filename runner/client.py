"""The runner's one public surface, and the bot's side of it: an asyncio client.  Never imports torch.

    config = RunnerConfig.from_env(os.environ)  # every RUNNER_* setting; RunnerConfigError if one is invalid
    async with RunnerClient.embedded(config) as runner:
        result = await runner.run("print(1 + 1)")
        graded = await runner.run(code, checks=ExerciseChecks(checks=(Check("g", "x.grad", expect=6.0),)))

    async with RunnerClient.connect("unix:///run/coursebot/runner.sock") as runner:
        ...

``embedded`` starts ``python -m runner serve`` as a child process with a
scrubbed environment (no bot token or other secret ever reaches it: only
PATH, LANG and the config's own RUNNER_* settings), waits until it has proved
its isolation, and stops it on exit.  ``connect`` talks to a runner started
elsewhere (``unix:///path``, an absolute path, or ``tcp://host:port``: see
``parse_address``).  The bot imports the names in ``__all__`` from here and
nothing else of runner/.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import random
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Coroutine, Generator, Mapping
from pathlib import Path
from typing import Any, Protocol

from . import logs, protocol
from .config import RunnerConfig, TcpAddress, UnixAddress, parse_address
from .errors import (
    BY_NAME,
    InvalidRequest,
    JobLost,
    ProtocolError,
    RunnerBusy,
    RunnerClosed,
    RunnerConfigError,
    RunnerError,
    SandboxUnavailable,
    Unauthorized,
)
from .grading import KINDS as CHECK_KINDS
from .grading import SOURCE_KINDS as SOURCE_CHECK_KINDS
from .grading import Check, ExerciseChecks
from .info import RunnerInfo, RunnerLoad, sandbox_fingerprint
from .limits import Limits
from .result import CheckOutcome, MessageKey, RunResult, Status

# The runner's one public surface: the bot imports these names from here and nothing else of runner/.
__all__ = [
    "CHECK_KINDS",
    "SOURCE_CHECK_KINDS",
    "Check",
    "CheckOutcome",
    "ExerciseChecks",
    "InvalidRequest",
    "JobLost",
    "Limits",
    "MessageKey",
    "RunResult",
    "Runner",
    "RunnerBusy",
    "RunnerClient",
    "RunnerClosed",
    "RunnerConfig",
    "RunnerConfigError",
    "RunnerError",
    "RunnerInfo",
    "RunnerLoad",
    "SandboxUnavailable",
    "Status",
    "TcpAddress",
    "Unauthorized",
    "UnixAddress",
    "embedded_fingerprint",
    "parse_address",
]

log = logging.getLogger("runner.client")


PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)


class Runner(Protocol):
    """What the bot needs of a runner (``RunnerClient`` is one): run code, say what it runs with, and its load."""

    @property
    def info(self) -> RunnerInfo: ...

    async def run(
        self,
        code: str,
        limits: Limits | Mapping[str, Any] | None = None,
        checks: ExerciseChecks | None = None,
        seed: int | None = None,
    ) -> RunResult: ...

    async def ping(self) -> bool: ...

    async def load(self) -> RunnerLoad: ...


def embedded_fingerprint(config: RunnerConfig) -> str | None:
    """Return the fingerprint an embedded runner with ``config`` reports, known without starting it.

    The embedded runner runs this package in ``config.python``, so its fingerprint is this package's with
    that interpreter's torch.  None when that cannot be known here (the Docker backend: its image decides).
    """
    if config.backend != "sandbox":
        return None
    probe = "import importlib.metadata as m\ntry: print(m.version('torch'))\nexcept m.PackageNotFoundError: pass"
    try:
        done = subprocess.run(
            [config.python, "-I", "-c", probe], capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    version = done.stdout.strip()
    return sandbox_fingerprint(version) if version else None


def worker_env(config: RunnerConfig) -> dict[str, str]:
    """The worker's whole environment: its settings (RUNNER_*), nothing secret, nothing else inherited.

    Not even its own secrets: the embedded worker serves a Unix socket only and never needs RUNNER_TOKEN, which
    would otherwise stay readable in its /proc/PID/environ for as long as it runs.
    """
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "PYTHONPATH": PACKAGE_PARENT}
    return {**base, **config.to_env(secrets=False)}


class _Opener:
    """Both ``await X`` and ``async with X as client`` work."""

    def __init__(self, factory: Callable[[], Coroutine[Any, Any, RunnerClient]]) -> None:
        self._factory = factory
        self._client: RunnerClient | None = None

    def __await__(self) -> Generator[Any, None, RunnerClient]:
        return self._factory().__await__()

    async def __aenter__(self) -> RunnerClient:
        self._client = await self._factory()
        return self._client

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.close()


# Seconds a job waits for a runner that is away (restarting, or its host rebooting) before the client gives up:
# about one cold start of a runner (torch imported, isolation proved) on a loaded host, with margin.
RECONNECT_WAIT_S = 30.0
# Back-off between attempts to reach a runner that is away: from the first to the longest pause, in seconds.
# The longest stays short, so a runner that is back is found within about a second.
RECONNECT_FIRST_S = 0.05
RECONNECT_LONGEST_S = 1.0
# A TCP connection closed before the hello was answered means no runner took the job (nothing of it ran).
# Closed after waiting ADMIT_QUEUED_S or more, it sat in a balancer's queue (HAProxy's `timeout queue`): every
# runner is full, so the job tries ADMIT_TRIES times in all, then is RunnerBusy.  Closed sooner, no runner is
# up behind the balancer (or a runner's door is full): that is a runner away, tried again as above.
ADMIT_TRIES = 3
ADMIT_QUEUED_S = 0.25
# Back-off between starts of an embedded runner that keeps dying: the first restart is at once, the next ones
# wait from the first to the longest pause, in seconds; one that ran for STABLE_S resets it.
RESTART_FIRST_S = 1.0
RESTART_LONGEST_S = 60.0
STABLE_S = 60.0


class _Backoff:
    """Pauses that double from ``first`` to ``longest`` (after one of 0 when ``at_once``), each shortened by up
    to half at random: that spreads over time the many clients (or bot replicas) that lost the same runner."""

    def __init__(self, first: float, longest: float, at_once: bool = False) -> None:
        self.first, self.longest, self.at_once = first, longest, at_once
        self._next: float = 0.0
        self.reset()

    def pause(self) -> float:
        pause = self._next * random.uniform(0.5, 1.0)
        self._next = min(max(self._next * 2, self.first), self.longest)
        return pause

    def reset(self) -> None:
        self._next = 0.0 if self.at_once else self.first


class RunnerClient:
    """The bot's side of a runner: ``run`` a snippet, get a RunResult.  Open it with ``connect`` or ``embedded``.

    Every request opens a connection of its own (presenting the token first over TCP) and closes it once
    answered.  So a runner that restarts is simply reached again by the next request, and a balancer in
    front of several runners can spread the jobs.  A request finds the runner away (restarting, say): it tries
    again with back-off, for up to ``wait_s``.  A runner that goes away while it holds a request costs that
    request a JobLost, which the bot turns into "send it again".
    """

    def __init__(
        self,
        address: UnixAddress | TcpAddress,
        token: str | None = None,
        connect_timeout_s: float = 10.0,
        request_timeout_s: float | None = None,
    ) -> None:
        self._address = address
        self._token = token
        self._connect_timeout_s = connect_timeout_s
        self._request_timeout_s = request_timeout_s
        self._ids = itertools.count(1)
        self._closed = False
        self._embedded: _Embedded | None = None
        self._info: RunnerInfo | None = None

    # --- opening -----------------------------------------------------------
    @classmethod
    def connect(cls, address: str, timeout: float = 10.0, token: str | None = None) -> _Opener:
        """A runner already running at ``unix:///path``, an absolute path, or ``tcp://host:port``.

        Over TCP the runner wants its token (``RunnerConfig.token``, from RUNNER_TOKEN): without the right
        one, awaiting raises Unauthorized.  A malformed address raises RunnerConfigError here; one that
        does not answer within ``timeout`` seconds, RunnerClosed when awaited.
        """
        where = parse_address(address)

        async def open_() -> RunnerClient:
            client = cls(where, token=token, connect_timeout_s=timeout)
            await client._read_info(timeout, wait_s=timeout)
            return client

        return _Opener(open_)

    @classmethod
    def embedded(cls, config: RunnerConfig | None = None) -> _Opener:
        """Start ``python -m runner serve`` as our child, with every setting of ``config``, and connect to it.

        A child that dies is started again (at once, then with back-off while it keeps dying); requests made
        meanwhile wait for it.  It fails to start the first time: awaiting raises what it said.
        """
        config = config or RunnerConfig()

        async def open_() -> RunnerClient:
            embedded = _Embedded(config)
            await embedded.start()
            client = cls(UnixAddress(embedded.socket), request_timeout_s=config.request_timeout_s)
            client._embedded = embedded
            try:
                await client._read_info(30.0)
            except BaseException:
                await client.close()
                raise
            return client

        return _Opener(open_)

    @property
    def info(self) -> RunnerInfo:
        """What the runner runs with, read once when the client connected (a restart changes none of it)."""
        if self._info is None:
            raise RunnerClosed("the runner client is not connected")
        return self._info

    async def _read_info(self, timeout: float, wait_s: float = 0.0) -> None:
        # A pool that is full when the bot starts is waited for as long as a pool that is away (``wait_s``).
        reply = await self.request({"op": "info"}, timeout, wait_s=wait_s, queued_tries=0)
        if not isinstance(reply, dict):
            raise ProtocolError("the runner's info is not an object")
        self._info = RunnerInfo.from_dict(reply)

    @property
    def _proc(self) -> asyncio.subprocess.Process | None:
        """The embedded runner's current process (None for a runner elsewhere)."""
        return self._embedded.proc if self._embedded is not None else None

    # --- requests ----------------------------------------------------------
    async def run(
        self,
        code: str,
        limits: Limits | Mapping[str, Any] | None = None,
        checks: ExerciseChecks | None = None,
        seed: int | None = None,
    ) -> RunResult:
        """Run one snippet; a RunResult whatever the code does.  Raises only
        RunnerError subclasses (RunnerBusy when full, JobLost when the runner went away meanwhile, ...)."""
        lim = limits.to_dict() if isinstance(limits, Limits) else (dict(limits) if limits else None)
        msg: dict[str, Any] = {
            "op": "run",
            "code": code,
            "limits": lim,
            "checks": checks.to_dict() if checks is not None else None,
        }
        if seed is not None:
            msg["seed"] = seed
        timeout = self._request_timeout_s
        if timeout is None:
            wall = (lim or {}).get("wall_time_s") or self.info.limits.wall_time_s
            # Queueing plus a reference run for graded checks, plus margin.
            timeout = 3 * float(wall) + 120.0
        return RunResult.from_dict(await self.request(msg, timeout, wait_s=RECONNECT_WAIT_S))

    async def ping(self) -> bool:
        """Whether the runner answers now (no waiting for one that is away: a health check wants the truth).

        Behind a balancer, a ping that waited in its queue and was dropped met runners that are up, every one
        busy: that is an answer (the bot still serves; its learners hear "busy"), not a runner down.
        """
        try:
            return bool((await self.request({"op": "ping"}, 10.0)).get("pong"))
        except RunnerBusy:
            return True

    async def load(self) -> RunnerLoad:
        """Return what the runner is doing now: jobs running and waiting."""
        reply = await self.request({"op": "info"}, 5.0)
        if not isinstance(reply, dict):
            raise ProtocolError("the runner's info is not an object")
        return RunnerLoad.from_dict(reply)

    async def request(
        self, msg: dict[str, Any], timeout: float | None = 30.0, wait_s: float = 0.0, queued_tries: int | None = None
    ) -> Any:
        """Send one request on a connection of its own; its result, or the RunnerError it failed with.

        ``timeout`` bounds the answer once connected; ``wait_s`` how long to keep trying to reach a runner
        that is away (0: one attempt).  A connection that no runner took (closed before the hello was
        answered: a balancer in front of full or absent runners) is tried again too: ``queued_tries`` times in
        all when it waited in a queue (ADMIT_TRIES by default; 0: for as long as ``wait_s``), then RunnerBusy;
        within ``wait_s`` when it was closed at once.
        """
        tries = ADMIT_TRIES if queued_tries is None else queued_tries
        if self._closed:
            raise RunnerClosed("the runner client is closed")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        backoff = _Backoff(RECONNECT_FIRST_S, RECONNECT_LONGEST_S)
        queued = 0
        while True:
            connection = await self._open(deadline - loop.time(), backoff)
            sent = loop.time()
            try:
                return await asyncio.wait_for(self._exchange(connection, msg), timeout)
            except TimeoutError:
                raise RunnerError(f"the runner did not answer in {timeout:.0f} s") from None
            except _NotAdmitted as e:
                waited = loop.time() - sent
                queued += waited >= ADMIT_QUEUED_S
                pause = backoff.pause()
                out_of_time = loop.time() + pause > deadline
                if waited >= ADMIT_QUEUED_S and (queued >= tries > 0 or out_of_time):
                    raise RunnerBusy(
                        f"no runner at {self._address} took the job in {queued} tries: every one is busy ({e})"
                    ) from None
                if out_of_time:
                    raise RunnerClosed(f"no runner at {self._address} took the job: {e}") from None
                await asyncio.sleep(pause)
            finally:
                connection.close()

    async def _open(self, wait_s: float, backoff: _Backoff | None = None) -> _Connection:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        backoff = backoff or _Backoff(RECONNECT_FIRST_S, RECONNECT_LONGEST_S)
        while True:
            if self._embedded is not None:
                await self._embedded.ready(deadline - loop.time())
            try:
                return await _Connection.open(self._address, self._connect_timeout_s)
            except (TimeoutError, OSError) as e:
                pause = backoff.pause()
                if loop.time() + pause > deadline:
                    raise RunnerClosed(f"cannot reach the runner at {self._address}: {e}") from None
                await asyncio.sleep(pause)

    async def _exchange(self, connection: _Connection, msg: dict[str, Any]) -> Any:
        """Write the token's hello (over TCP) and the request at once, then read their answers.

        Over TCP, an end before the hello's answer is _NotAdmitted: no runner read the request (a balancer
        closed the connection, or a runner refused it unread), so trying again is safe and costs nothing.
        """
        frames = []
        hello = None
        if self._token is not None:
            hello = next(self._ids)
            frames.append(protocol.encode({"op": "hello", "token": self._token, "id": hello}))
        rid = next(self._ids)
        frames.append(protocol.encode({**msg, "id": rid}))
        admitted = hello is None
        try:
            await connection.send(b"".join(frames))
            while True:
                reply = await connection.frame()
                if reply is None:
                    if not admitted:
                        raise _NotAdmitted("the connection closed before the runner's hello")
                    raise JobLost(f"the runner at {self._address} went away before it answered")
                if reply.get("id") == hello and hello is not None:
                    if not reply.get("ok"):
                        raise _error_from_reply(reply)
                    admitted = True
                elif reply.get("id") == rid or not reply.get("ok"):
                    break
        except (OSError, ProtocolError) as e:
            if not admitted:
                raise _NotAdmitted(f"the connection failed before the runner's hello ({e})") from None
            raise JobLost(f"the runner at {self._address} went away before it answered ({e})") from None
        if reply.get("ok"):
            return reply.get("result")
        raise _error_from_reply(reply)

    async def close(self) -> None:
        """Stop the embedded runner, if this client started one; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._embedded is not None:
            await self._embedded.close()

    async def __aenter__(self) -> RunnerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _NotAdmitted(Exception):
    """A request's connection ended before any runner took it (before the hello's answer): nothing of it ran."""


class _Connection:
    """One request's connection: a plain non-blocking socket read and written on the event loop.

    Lighter than asyncio's streams, which a connection this short would set up for one frame each way.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = bytearray()
        self._loop = asyncio.get_running_loop()

    @classmethod
    async def open(cls, where: UnixAddress | TcpAddress, timeout: float) -> _Connection:
        """Connected, or OSError (BlockingIOError when a Unix socket's backlog is full: try again)."""
        loop = asyncio.get_running_loop()
        if isinstance(where, UnixAddress):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.setblocking(False)
                # A Unix socket connects at once, or fails: asyncio's sock_connect would take a full backlog's
                # EAGAIN for a connection in progress and hand back a socket that never connected.
                sock.connect(where.path)
            except BaseException:
                sock.close()
                raise
            return cls(sock)
        family, kind, proto, _, address = (await loop.getaddrinfo(where.host, where.port, type=socket.SOCK_STREAM))[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            await asyncio.wait_for(loop.sock_connect(sock, address), timeout)
        except BaseException:
            sock.close()
            raise
        return cls(sock)

    async def send(self, data: bytes) -> None:
        await self._loop.sock_sendall(self._sock, data)

    async def frame(self) -> dict[str, Any] | None:
        """The next frame (checked as protocol.read_frame checks it), or None at a clean end of stream."""
        if not await self._fill(4):
            if self._buffer:
                raise ProtocolError("stream ended inside a frame header")
            return None
        n = int.from_bytes(self._buffer[:4], "big")
        if n > protocol.MAX_FRAME:
            raise ProtocolError(f"frame of {n} bytes exceeds {protocol.MAX_FRAME}")
        if not await self._fill(4 + n):
            raise ProtocolError("stream ended inside a frame")
        body = bytes(self._buffer[4 : 4 + n])
        del self._buffer[: 4 + n]
        return protocol.decode(body)

    async def _fill(self, size: int) -> bool:
        while len(self._buffer) < size:
            chunk = await self._loop.sock_recv(self._sock, max(65536, size - len(self._buffer)))
            if not chunk:
                return False
            self._buffer += chunk
        return True

    def close(self) -> None:
        self._sock.close()


class _Embedded:
    """The embedded runner: a ``python -m runner serve`` child on a socket in a private folder, kept running."""

    def __init__(self, config: RunnerConfig) -> None:
        self._config = config
        self._tmpdir = tempfile.mkdtemp(prefix="coursebot-runner-")
        os.chmod(self._tmpdir, 0o700)
        self.socket = os.path.join(self._tmpdir, "runner.sock")
        self.proc: asyncio.subprocess.Process | None = None
        self._ready = asyncio.Event()
        self._closing = False
        self._keeper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the child; the first start failing raises what it said (and leaves nothing behind)."""
        try:
            await self._spawn()
        except BaseException:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            raise
        self._keeper = asyncio.ensure_future(self._keep())

    async def _spawn(self) -> None:
        config = self._config
        # The settings travel in the worker's environment (worker_env), which it reads as any runner does.
        argv = [config.python, "-m", "runner", "serve", "--socket", self.socket, "--watch-stdin"]
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=worker_env(config),
            cwd="/",
            limit=1 << 20,
        )
        try:
            # The worker imports torch (startup_timeout_s at most), then proves its isolation.
            said = await asyncio.wait_for(_announcement(proc), config.startup_timeout_s + 30)
            if said.facts is None:
                raise _error_from(said.error or ("RunnerError", "the runner said nothing"))
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise
        self.proc = proc
        self._ready.set()

    async def _keep(self) -> None:
        """Start the child again whenever it dies: at once, then with back-off while it keeps dying young."""
        loop = asyncio.get_running_loop()
        backoff = _Backoff(RESTART_FIRST_S, RESTART_LONGEST_S, at_once=True)
        started = loop.time()
        while True:
            assert self.proc is not None
            status = await self.proc.wait()
            self._ready.clear()
            if loop.time() - started >= STABLE_S:
                backoff.reset()
            pause = backoff.pause()
            log.warning("the embedded runner exited (status %s); starting it again in %.1f s", status, pause)
            while True:
                await asyncio.sleep(pause)
                started = loop.time()
                try:
                    await self._spawn()
                    break
                except (RunnerError, OSError) as e:
                    pause = backoff.pause()
                    log.warning("the embedded runner did not start again (%s); next try in %.1f s", e, pause)
            log.warning("the embedded runner is running again")

    async def ready(self, within_s: float) -> None:
        """Return once the child is running; RunnerClosed if it is not back within ``within_s`` seconds."""
        if self._ready.is_set():
            return
        try:
            await asyncio.wait_for(self._ready.wait(), max(0.0, within_s))
        except TimeoutError:
            raise RunnerClosed("the embedded runner is starting again and is not ready yet") from None

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        if self._keeper is not None:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
        proc = self.proc
        if proc is not None and proc.returncode is None:
            if proc.stdin is not None:
                proc.stdin.close()  # the worker sees EOF and shuts down
            try:
                await asyncio.wait_for(proc.wait(), 10.0)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        shutil.rmtree(self._tmpdir, ignore_errors=True)


async def _announcement(proc: asyncio.subprocess.Process) -> logs.Announcement:
    """The READY or ERROR line the worker says first (as text or JSON); an exit before it is an error too."""
    assert proc.stdout is not None
    while True:
        raw = await proc.stdout.readline()
        if not raw:
            code = await proc.wait()
            return logs.Announcement(error=("RunnerError", f"the runner exited with status {code} before it was ready"))
        said = logs.read(raw.decode("utf-8", "replace").strip())
        if said is not None:
            return said


def _error_from_reply(reply: Mapping[str, Any]) -> RunnerError:
    """The exception a failed reply names (a plain RunnerError for names we do not know)."""
    err = reply.get("error")
    err = err if isinstance(err, dict) else {}
    return BY_NAME.get(str(err.get("type")), RunnerError)(str(err.get("message", "runner error")))


def _error_from(error: tuple[str, str]) -> RunnerError:
    """The exception an ERROR line names (SandboxUnavailable, saying it all, for a name we do not know)."""
    name, message = error
    cls = BY_NAME.get(name)
    return cls(message) if cls is not None else SandboxUnavailable(f"{name}: {message}")
