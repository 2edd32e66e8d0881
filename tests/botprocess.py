"""The bot as an operator runs it: ``python -m bot run`` in a process of its own, polling the stand-in.

Its output goes to a log file (every start appends to it), so a long run never blocks on a full pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.conftest import ROOT


def bot_env(standin, db_path: Path, **extra: str) -> dict[str, str]:
    """Return an environment for the bot that points it at ``standin`` and ``db_path``, running no code."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELEGRAM_", "COURSEBOT_"))}
    env.update(
        TELEGRAM_BOT_TOKEN=standin.token,
        TELEGRAM_API_BASE_URL=standin.api_base_url,
        COURSEBOT_DB=str(db_path),
        COURSEBOT_LOG_LEVEL="INFO",
        COURSEBOT_RUNNER_URL="off",
    )
    env.update(extra)
    return env


class BotProcess:
    """One bot process at a time: start it, kill it (``kill -9``) or stop it (SIGTERM), start it again."""

    def __init__(self, env: dict[str, str], log_path: Path):
        self.env = env
        self.log_path = log_path
        self.process: asyncio.subprocess.Process | None = None
        self.starts = 0
        self._log_offset = 0

    async def start(self) -> None:
        """Start the bot; it polls once it has read its lessons and handed over what was left unhandled."""
        if self.running:
            raise RuntimeError("the bot is running already")
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"---- start {self.starts}\n".encode())
            log.flush()
            self._log_offset = log.tell()
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bot",
                "run",
                cwd=ROOT,
                env=self.env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                # Its own process group: the runner it may start dies with it.
                start_new_session=True,
            )

    async def wait_polling(self, timeout: float = 60, says: bytes = b"coursebot is polling") -> None:
        """Wait until this start of the bot says it polls (or ``says`` something else: that it receives updates by
        webhook); raise if it exits or takes longer than ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            with self.log_path.open("rb") as log:
                log.seek(self._log_offset)
                if says in log.read():
                    return
            if not self.running:
                raise RuntimeError(f"the bot exited before it polled; see {self.log_path}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the bot did not poll within {timeout} s; see {self.log_path}")
            await asyncio.sleep(0.02)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def kill(self) -> None:
        """``kill -9`` the bot and its children: no handler runs, nothing is flushed."""
        process = self.process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()

    async def stop(self, timeout: float = 30) -> int:
        """Stop the bot as an operator does (SIGTERM) and return its exit code; kill it if it does not stop."""
        process = self.process
        if process is None:
            raise RuntimeError("the bot was never started")
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), timeout)
            except TimeoutError:
                await self.kill()
                raise
        return process.returncode if process.returncode is not None else -1

    def log(self) -> str:
        """Return everything the bot wrote, all starts included."""
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""

    async def __aenter__(self) -> BotProcess:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.kill()


async def wait_until(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    """Wait until ``condition()`` holds (checked every 10 ms); raise TimeoutError naming ``what`` if it never does."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting until {what}")
        await asyncio.sleep(0.01)


class RunnerProcess:
    """The runner as its own process (``python -m runner serve``), as compose runs it beside the bot: it outlives the
    bot's deaths. Use ``async with RunnerProcess(socket, log) as runner:``; the bot reaches it at unix://socket."""

    def __init__(self, socket: Path, log_path: Path):
        self.socket = socket
        self.log_path = log_path
        self.process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        """Return the address the bot takes in COURSEBOT_RUNNER_URL."""
        return f"unix://{self.socket}"

    async def __aenter__(self) -> RunnerProcess:
        log = self.log_path.open("ab")
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "runner",
            "serve",
            "--socket",
            str(self.socket),
            "--watch-stdin",
            cwd=ROOT,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
        )
        log.close()
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), 240)
        if not line.startswith(b"READY "):
            raise RuntimeError(f"the runner did not start: {line!r}; see {self.log_path}")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        process = self.process
        if process is None or process.returncode is not None:
            return
        if process.stdin is not None:
            process.stdin.close()  # --watch-stdin: it exits when its stdin closes
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()


def replicas_on(standin, pg_url: str, folder: Path, count: int = 2) -> list[BotProcess]:
    """Return ``count`` bot processes (not started) that share the PostgreSQL database ``pg_url``, each with its own
    control socket and log in ``folder``."""
    return [
        BotProcess(
            bot_env(
                standin,
                folder / f"unused{n}.sqlite3",
                COURSEBOT_DB=pg_url,
                COURSEBOT_CONTROL_SOCKET=str(folder / f"control{n}.sock"),
            ),
            folder / f"bot{n}.log",
        )
        for n in range(1, count + 1)
    ]
