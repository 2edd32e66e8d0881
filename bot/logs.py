"""Logging set up once, with the bot token scrubbed from every record; plain text or JSON lines."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import TextIO

REDACTED = "<token>"


class RedactSecrets(logging.Filter):
    """Replace secrets in a record's final text, whatever library logged it."""

    def __init__(self, *secrets: str):
        super().__init__()
        self._secrets = [s for s in secrets if s]

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        scrubbed, exc_text = message, record.exc_text
        for secret in self._secrets:
            scrubbed = scrubbed.replace(secret, REDACTED)
            if exc_text:
                exc_text = exc_text.replace(secret, REDACTED)
        if scrubbed != message:
            record.msg, record.args = scrubbed, None
        record.exc_text = exc_text
        return True


# The update being handled, set for the length of its handling (bot.updates): every line logged
# meanwhile, by us or a library, carries its id in JSON logs.
UPDATE_ID: ContextVar[int | None] = ContextVar("update_id", default=None)
# Fields a record may carry (logging's ``extra``) that JSON lines include.
FIELDS = ("handler", "latency_ms", "kind", "user_id")


class JsonLines(logging.Formatter):
    """One JSON object per record: time (UTC), level, logger, message, the update's id and FIELDS when known."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            # After RedactSecrets: the message and the traceback are already scrubbed.
            "message": record.getMessage(),
        }
        update_id = getattr(record, "update_id", None) or UPDATE_ID.get()
        if update_id is not None:
            line["update_id"] = update_id
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_text:
            line["exception"] = record.exc_text
        return json.dumps(line, ensure_ascii=False, default=str)


def configure(level: str, token: str, json_lines: bool = False, others: tuple[str, ...] = ()) -> None:
    """Log to stderr at ``level`` as text (or JSON lines), never showing ``token`` (nor the ``others`` secrets)."""
    handler = logging.StreamHandler()
    handler.setFormatter(
        JsonLines() if json_lines else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    handler.addFilter(RedactSecrets(token, *others))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # httpx logs every request URL, and Bot API URLs contain the token; one line per call is noise anyway.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
    # While PostgreSQL restarts, psycopg's pool warns of every connection it discards and every reconnection that
    # fails (a dozen lines a restart); bot.storage.postgres says one line per operation that waits it out, and an
    # ERROR when it gives up. The pool's own ERRORs (it gave up reconnecting) still show.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)


def json_requested(env: Mapping[str, str]) -> bool:
    """Whether COURSEBOT_LOG_FORMAT asks for JSON lines, read as it stands: for the lines said when the
    configuration itself could not be read (bot.config reads it for everything else)."""
    return env.get("COURSEBOT_LOG_FORMAT", "").strip().lower() == "json"


def say(text: str, json_lines: bool, level: int = logging.ERROR, stream: TextIO | None = None) -> None:
    """Print one line of coursebot's own, outside logging (why a start failed, where the web chat is):
    ``coursebot: text``, or in JSON logs an object like every other line."""
    stream = stream or sys.stderr
    if json_lines:
        record = logging.LogRecord("coursebot", level, __file__, 0, text, None, None)
        print(JsonLines().format(record), file=stream, flush=True)
    else:
        print(f"coursebot: {text}", file=stream, flush=True)
