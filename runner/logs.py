"""The runner's log lines, and its one announcement (READY or ERROR), as text or JSON (COURSEBOT_LOG_FORMAT).

``serve`` says once, on stdout, whether it runs: ``READY {...}`` (its addresses and its backend's facts) or
``ERROR Type: message``.  The embedded client reads that line; in a container it is also the first thing an
operator sees.  With ``json``, that line and every log line are JSON objects with the fields the bot's own
lines have (time, level, logger, message), so a log collector reads the runner as it reads the bot.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


def _line(level: int, logger: str, message: str, **fields: Any) -> dict[str, Any]:
    return {
        "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "level": logging.getLevelName(level),
        "logger": logger,
        "message": message,
        **fields,
    }


class JsonLines(logging.Formatter):
    """One JSON object per record: time (UTC), level, logger, message, and the traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line = _line(record.levelno, record.name, record.getMessage())
        line["time"] = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure(verbose: bool, json_lines: bool) -> None:
    """Log to stderr: warnings and worse (everything with ``verbose``), as text or JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonLines() if json_lines else logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)


def ready(facts: dict[str, Any], json_lines: bool) -> str:
    """The line that says the runner serves, with ``facts`` (its addresses, its backend's stats)."""
    if json_lines:
        return json.dumps(_line(logging.INFO, "runner", "READY", ready=facts), ensure_ascii=False, default=str)
    return "READY " + json.dumps(facts)


def failed(kind: str, message: str, json_lines: bool) -> str:
    """The line that says the runner cannot serve: the RunnerError's class name and its message."""
    if json_lines:
        error = {"type": kind, "message": message}
        return json.dumps(_line(logging.ERROR, "runner", f"ERROR {kind}: {message}", error=error), ensure_ascii=False)
    return f"ERROR {kind}: {message}"


@dataclass(frozen=True)
class Announcement:
    """What a READY or ERROR line said: the facts, or the error's class name and message."""

    facts: dict[str, Any] | None = None
    error: tuple[str, str] | None = None


def read(line: str) -> Announcement | None:
    """The announcement in a line of the runner's stdout (text or JSON), or None for any other line."""
    if line.startswith("READY "):
        facts = json.loads(line[len("READY ") :])
        return Announcement(facts=facts if isinstance(facts, dict) else {})
    if line.startswith("ERROR "):
        kind, _, message = line[len("ERROR ") :].partition(": ")
        return Announcement(error=(kind, message))
    if line.startswith("{"):
        try:
            obj = json.loads(line)
        except ValueError:
            return None
        if isinstance(obj, dict) and isinstance(obj.get("ready"), dict):
            return Announcement(facts=obj["ready"])
        error = obj.get("error") if isinstance(obj, dict) else None
        if isinstance(error, dict):
            return Announcement(error=(str(error.get("type")), str(error.get("message"))))
    return None
