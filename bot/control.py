"""The running bot's control socket: `coursebot reload` asks it to reload and prints what happened.

A Unix socket next to the database, readable by its owner only (the process's umask
is narrowed while it is created). One request per connection: a command line in, the
answer's lines out, the first line being "ok" or "refused". Only "reload" exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

from bot.errors import CoursebotError
from bot.library.live import Reloaded

log = logging.getLogger(__name__)

_REQUEST_MAX = 64  # bytes: a command name
RELOAD_TIMEOUT = 60.0  # seconds the client waits: linting every language takes a few


class NoRunningBot(CoursebotError):
    """No bot answers on the control socket."""


async def serve(path: Path, reload: Callable[[], Awaitable[Reloaded]]) -> asyncio.AbstractServer:
    """Listen on `path` (a stale socket from a dead bot is replaced) until the server is closed."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            command = (await reader.readline())[:_REQUEST_MAX].decode("ascii", "replace").strip()
            if command == "reload":
                outcome = await reload()
                lines = ["ok" if outcome.accepted else "refused", *outcome.lines()]
            else:
                lines = ["refused", f"unknown command {command!r}; the only one is reload"]
            writer.write(("\n".join(lines) + "\n").encode())
            await writer.drain()
        except ConnectionError:
            log.debug("the control client went away")
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(path)
    old_umask = os.umask(0o177)
    try:
        return await asyncio.start_unix_server(answer, path=str(path))
    finally:
        os.umask(old_umask)


def _remove_stale(path: Path) -> None:
    """Remove a socket file nobody listens on; refuse to start beside a live bot."""
    if not path.exists():
        return
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.connect(str(path))
    except OSError:
        path.unlink(missing_ok=True)
        return
    raise CoursebotError(f"another coursebot is running with the control socket {path}: stop it first")


def request(path: Path, command: str = "reload", timeout: float = RELOAD_TIMEOUT) -> tuple[bool, list[str]]:
    """Send `command` to the bot at `path`; return (accepted, the lines it answered). Blocking."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(timeout)
            client.connect(str(path))
            client.sendall(command.encode() + b"\n")
            chunks = []
            while chunk := client.recv(65536):
                chunks.append(chunk)
    except (FileNotFoundError, ConnectionRefusedError):
        raise NoRunningBot(f"no running coursebot answers at {path} (start it with make run)") from None
    except TimeoutError:
        raise CoursebotError(f"the coursebot at {path} did not answer within {timeout:.0f} s") from None
    status, *lines = b"".join(chunks).decode().splitlines() or ["refused", "the bot closed the connection"]
    return status == "ok", lines
