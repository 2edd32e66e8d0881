"""Logging set up once, with the bot token scrubbed from every record."""

from __future__ import annotations

import logging

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


def configure(level: str, token: str) -> None:
    """Log to stderr at ``level``, never showing ``token``."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactSecrets(token))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # httpx logs every request URL, and Bot API URLs contain the token; one line per call is noise anyway.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
