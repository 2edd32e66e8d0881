"""Logging: the bot token is scrubbed from every record, whatever logged it and however."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from bot import logs
from bot.logs import REDACTED, RedactSecrets

TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
URL = f"https://api.telegram.org/bot{TOKEN}/getUpdates"


@pytest.fixture
def logged() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A real logger writing through a handler with the filter, the way logs.configure sets it up."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    handler.addFilter(RedactSecrets(TOKEN))
    logger = logging.getLogger("tests.logs.redact")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    yield logger, stream
    logger.handlers[:] = []


def test_token_in_the_message_is_replaced(logged):
    logger, stream = logged
    logger.info(f"polling {URL}")
    assert stream.getvalue() == f"INFO polling https://api.telegram.org/bot{REDACTED}/getUpdates\n"


def test_token_in_the_arguments_is_replaced(logged):
    logger, stream = logged
    logger.warning("request to %s failed after %d tries", URL, 3)
    assert (
        stream.getvalue()
        == f"WARNING request to https://api.telegram.org/bot{REDACTED}/getUpdates failed after 3 tries\n"
    )


def test_a_message_with_percent_signs_survives_redaction(logged):
    logger, stream = logged
    logger.info("%s at 100%%", TOKEN)
    assert stream.getvalue() == f"INFO {REDACTED} at 100%\n"


def test_token_in_exception_text_is_replaced(logged):
    logger, stream = logged
    try:
        raise RuntimeError(f"cannot reach {URL}")
    except RuntimeError:
        logger.exception("network down")
    output = stream.getvalue()
    assert TOKEN not in output
    assert f"RuntimeError: cannot reach https://api.telegram.org/bot{REDACTED}/getUpdates" in output
    assert "Traceback" in output


def test_token_in_a_chained_exception_is_replaced(logged):
    logger, stream = logged
    try:
        try:
            raise OSError(f"connect {URL}")
        except OSError as exc:
            raise RuntimeError("retry failed") from exc
    except RuntimeError:
        logger.error("giving up", exc_info=True)
    assert TOKEN not in stream.getvalue()
    assert f"OSError: connect https://api.telegram.org/bot{REDACTED}/getUpdates" in stream.getvalue()


def test_records_without_the_token_are_left_alone(logged):
    logger, stream = logged
    logger.info("slide %d of %d", 3, 13)
    assert stream.getvalue() == "INFO slide 3 of 13\n"


def test_the_filter_never_drops_a_record():
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "token %s", (TOKEN,), None)
    assert RedactSecrets(TOKEN).filter(record) is True
    assert record.getMessage() == f"token {REDACTED}"


def test_an_empty_secret_redacts_nothing():
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "plain text", None, None)
    RedactSecrets("").filter(record)
    assert record.getMessage() == "plain text"


def test_several_secrets_are_all_replaced():
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "%s and %s", ("alpha-secret", "beta-secret"), None)
    RedactSecrets("alpha-secret", "beta-secret").filter(record)
    assert record.getMessage() == f"{REDACTED} and {REDACTED}"


@pytest.fixture
def root_logger() -> Iterator[logging.Logger]:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    httpx = logging.getLogger("httpx").level
    yield root
    root.handlers[:], level = saved
    root.setLevel(level)
    logging.getLogger("httpx").setLevel(httpx)


def test_configure_scrubs_the_token_from_everything_logged_to_stderr(root_logger, capsys):
    logs.configure("INFO", TOKEN)
    logging.getLogger("telegram.ext.Updater").info("fetching %s", URL)
    logging.getLogger("some.library").debug("hidden at INFO %s", TOKEN)
    err = capsys.readouterr().err
    assert TOKEN not in err
    assert f"fetching https://api.telegram.org/bot{REDACTED}/getUpdates" in err
    assert "hidden at INFO" not in err


def test_configure_quiets_httpx_which_logs_urls_with_the_token(root_logger):
    logs.configure("DEBUG", TOKEN)
    assert logging.getLogger("httpx").getEffectiveLevel() == logging.WARNING
    assert root_logger.level == logging.DEBUG


def test_json_lines_carry_the_update_handler_and_latency_and_never_the_token():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonLines())
    handler.addFilter(RedactSecrets(TOKEN))
    logger = logging.getLogger("tests.logs.json")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    token = logs.UPDATE_ID.set(4242)
    try:
        logger.info("handled %s", URL, extra={"handler": "show_slide", "latency_ms": 3.5})
        try:
            raise RuntimeError(f"failed calling {URL}")
        except RuntimeError:
            logger.exception("update failed")
    finally:
        logs.UPDATE_ID.reset(token)
        logger.handlers[:] = []
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["update_id"] == 4242 and first["handler"] == "show_slide" and first["latency_ms"] == 3.5
    assert first["level"] == "INFO" and first["logger"] == "tests.logs.json" and first["time"].endswith("+00:00")
    assert "RuntimeError" in second["exception"] and second["update_id"] == 4242
    assert TOKEN not in stream.getvalue() and REDACTED in second["exception"]
