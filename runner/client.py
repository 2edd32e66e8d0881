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
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Coroutine, Generator, Mapping
from pathlib import Path
from typing import Any

from . import protocol
from .config import RunnerConfig, TcpAddress, UnixAddress, parse_address
from .errors import (
    BY_NAME,
    InvalidRequest,
    ProtocolError,
    RunnerBusy,
    RunnerClosed,
    RunnerConfigError,
    RunnerError,
    SandboxUnavailable,
    Unauthorized,
)
from .grading import KINDS as CHECK_KINDS
from .grading import Check, ExerciseChecks
from .limits import Limits
from .result import CheckOutcome, RunResult

# The runner's one public surface: the bot imports these names from here and nothing else of runner/.
__all__ = [
    "CHECK_KINDS",
    "Check",
    "CheckOutcome",
    "ExerciseChecks",
    "InvalidRequest",
    "Limits",
    "RunResult",
    "RunnerBusy",
    "RunnerClient",
    "RunnerClosed",
    "RunnerConfig",
    "RunnerConfigError",
    "RunnerError",
    "SandboxUnavailable",
    "TcpAddress",
    "Unauthorized",
    "UnixAddress",
    "parse_address",
]

PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)


def worker_env(config: RunnerConfig) -> dict[str, str]:
    """The worker's whole environment: its settings (RUNNER_*), nothing secret, nothing else inherited."""
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "PYTHONPATH": PACKAGE_PARENT}
    return {**base, **config.to_env()}


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


class RunnerClient:
    """A connection to a runner; ``run`` a snippet, get a RunResult.  Open it with ``connect`` or ``embedded``."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request_timeout_s: float | None = None
    ) -> None:
        self._reader, self._writer = reader, writer
        self._request_timeout_s = request_timeout_s
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._lock = asyncio.Lock()
        self._closed = False
        self._proc: asyncio.subprocess.Process | None = None
        self._tmpdir: str | None = None
        self.info: dict[str, Any] = {}
        self._reader_task = asyncio.ensure_future(self._read_loop())

    # --- opening -----------------------------------------------------------
    @classmethod
    def connect(cls, address: str, timeout: float = 10.0, token: str | None = None) -> _Opener:
        """A runner already running at ``unix:///path``, an absolute path, or ``tcp://host:port``.

        Over TCP the runner wants its token (``RunnerConfig.token``, from RUNNER_TOKEN): without the right
        one, awaiting raises Unauthorized.  A malformed address raises RunnerConfigError here; an
        unreachable one, RunnerClosed when awaited.
        """
        where = parse_address(address)

        async def open_() -> RunnerClient:
            try:
                if isinstance(where, UnixAddress):
                    opening = asyncio.open_unix_connection(where.path, limit=protocol.MAX_FRAME + 8)
                else:
                    opening = asyncio.open_connection(where.host, where.port, limit=protocol.MAX_FRAME + 8)
                r, w = await asyncio.wait_for(opening, timeout)
            except (TimeoutError, OSError) as e:
                raise RunnerClosed(f"cannot reach the runner at {address}: {e}") from None
            client = cls(r, w)
            try:
                if token is not None:
                    await client.request({"op": "hello", "token": token}, timeout)
                client.info = await client.request({"op": "info"}, timeout)
            except BaseException:
                await client.close()
                raise
            return client

        return _Opener(open_)

    @classmethod
    def embedded(cls, config: RunnerConfig | None = None) -> _Opener:
        """Start ``python -m runner serve`` as our child, with every setting of ``config``, and connect to it."""
        config = config or RunnerConfig()

        async def open_() -> RunnerClient:
            tmpdir = tempfile.mkdtemp(prefix="coursebot-runner-")
            os.chmod(tmpdir, 0o700)
            sock = os.path.join(tmpdir, "runner.sock")
            # The settings travel in the worker's environment (worker_env), which it reads as any runner does.
            argv = [config.python, "-m", "runner", "serve", "--socket", sock, "--watch-stdin"]
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
                line = await asyncio.wait_for(_ready_line(proc), config.startup_timeout_s + 30)
                if not line.startswith("READY "):
                    raise _error_from_line(line)
            except BaseException:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
                shutil.rmtree(tmpdir, ignore_errors=True)
                raise
            r, w = await asyncio.open_unix_connection(sock, limit=protocol.MAX_FRAME + 8)
            client = cls(r, w, config.request_timeout_s)
            client._proc, client._tmpdir = proc, tmpdir
            client.info = json.loads(line[len("READY ") :])
            return client

        return _Opener(open_)

    # --- requests ----------------------------------------------------------
    async def run(
        self,
        code: str,
        limits: Limits | Mapping[str, Any] | None = None,
        checks: ExerciseChecks | None = None,
        seed: int | None = None,
    ) -> RunResult:
        """Run one snippet; a RunResult whatever the code does.  Raises only
        RunnerError subclasses (RunnerBusy when full, SandboxUnavailable, ...)."""
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
            wall = (lim or {}).get("wall_time_s") or self.info.get("limits", {}).get("wall_time_s", 10.0)
            # Queueing plus a reference run for graded checks, plus margin.
            timeout = 3 * float(wall) + 120.0
        return RunResult.from_dict(await self.request(msg, timeout))

    async def ping(self) -> bool:
        return bool((await self.request({"op": "ping"}, 10.0)).get("pong"))

    async def request(self, msg: dict[str, Any], timeout: float | None = 30.0) -> Any:
        if self._closed:
            raise RunnerClosed("the runner client is closed")
        rid = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        try:
            async with self._lock:
                try:
                    await protocol.write_frame(self._writer, {**msg, "id": rid})
                except (ConnectionError, RuntimeError) as e:
                    raise RunnerClosed(f"lost the runner: {e}") from None
            reply = await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise RunnerError(f"the runner did not answer in {timeout:.0f} s") from None
        finally:
            self._pending.pop(rid, None)
        if reply.get("ok"):
            return reply.get("result")
        raise _error_from_reply(reply)

    async def _read_loop(self) -> None:
        exc: BaseException = RunnerClosed("the runner closed the connection")
        try:
            while True:
                msg = await protocol.read_frame(self._reader)
                if msg is None:
                    break
                rid = msg.get("id")
                fut = self._pending.get(rid) if isinstance(rid, int) else None
                if fut is not None and not fut.done():
                    fut.set_result(msg)
                elif rid is None and not msg.get("ok"):
                    exc = _error_from_reply(msg)
                    break
        except ProtocolError as e:
            exc = e
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            exc = RunnerClosed("the runner client is closed")
        finally:
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(exc)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._reader_task.cancel()
        with contextlib.suppress(BaseException):
            await self._reader_task
        with contextlib.suppress(Exception):
            self._writer.close()
            await self._writer.wait_closed()
        if self._proc is not None:
            if self._proc.stdin is not None:
                self._proc.stdin.close()  # the worker sees EOF and shuts down
            try:
                await asyncio.wait_for(self._proc.wait(), 10.0)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self._proc.kill()
                await self._proc.wait()
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)

    async def __aenter__(self) -> RunnerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def _ready_line(proc: asyncio.subprocess.Process) -> str:
    assert proc.stdout is not None
    while True:
        raw = await proc.stdout.readline()
        if not raw:
            code = await proc.wait()
            return f"ERROR RunnerError: the runner exited with status {code} before it was ready"
        line = raw.decode("utf-8", "replace").strip()
        if line.startswith(("READY ", "ERROR ")):
            return line


def _error_from_reply(reply: Mapping[str, Any]) -> RunnerError:
    """The exception a failed reply names (a plain RunnerError for names we do not know)."""
    err = reply.get("error")
    err = err if isinstance(err, dict) else {}
    return BY_NAME.get(str(err.get("type")), RunnerError)(str(err.get("message", "runner error")))


def _error_from_line(line: str) -> RunnerError:
    body = line[len("ERROR ") :]
    name, _, message = body.partition(": ")
    cls = BY_NAME.get(name)
    if cls is None:
        return SandboxUnavailable(body)
    return cls(message)
