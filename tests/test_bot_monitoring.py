"""The running bot's /healthz and /metrics, over real HTTP, after a learner's taps through the stand-in."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from dataclasses import replace

import pytest

from tests.conftest import running
from tests.journey import send_and_wait, tap_and_wait_edit


async def _get(port: int, path: str) -> tuple[int, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    await writer.drain()
    response = await reader.read()
    writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode()


@pytest.fixture
async def monitored(config):
    async with running(replace(config, monitoring=("127.0.0.1", 0))) as bot:
        assert bot.monitoring is not None
        yield bot


async def test_metrics_count_a_learners_updates_handlers_and_bot_api_calls(monitored, standin):
    ada = standin.learner(user_id=9101)
    menu = await send_and_wait(ada, "/start")
    await tap_and_wait_edit(ada, menu, "Start the course")
    await send_and_wait(ada, "/run print(1)")  # running code is off here: a notice, no job

    def handled_count(text: str) -> float:
        lines = [line for line in text.splitlines() if line.startswith("coursebot_handler_seconds_count{")]
        return sum(float(line.split()[-1]) for line in lines)

    # A handler is timed when it returns, which can be just after its reply reached the learner.
    for _ in range(100):
        status, text = await _get(monitored.monitoring.port, "/metrics")
        if handled_count(text) >= 3:
            break
        await asyncio.sleep(0.05)
    assert status == 200
    assert 'coursebot_updates_total{kind="message"} 2.0' in text
    assert 'coursebot_updates_total{kind="callback_query"} 1.0' in text
    assert 'coursebot_bot_api_calls_total{method="sendMessage"} 2.0' in text
    assert 'coursebot_bot_api_calls_total{method="getUpdates"}' in text
    handled = [line for line in text.splitlines() if line.startswith("coursebot_handler_seconds_count{")]
    assert sum(float(line.split()[-1]) for line in handled) == 3.0, handled
    assert "coursebot_update_errors_total 0.0" in text
    assert standin.token not in text


async def test_healthz_is_ok_while_the_database_takes_writes_and_the_bot_api_answers(monitored, standin):
    status, body = await _get(monitored.monitoring.port, "/healthz")
    assert status == 200, body
    assert json.loads(body)["checks"] == {"database": "ok", "telegram": "ok"}


async def test_a_failed_save_is_counted_and_never_told_progress_is_saved(monitored, standin, monkeypatch):
    async def readonly(*args: object, **kwargs: object) -> object:
        raise sqlite3.OperationalError("attempt to write a readonly database")

    # /start's handler reads the learner's progress: the database fails there as a full disk or a
    # read-only file would.
    monkeypatch.setattr(monitored.db, "progress", readonly)
    ada = standin.learner(user_id=9102)
    reply = await send_and_wait(ada, "/start")
    assert "could not be saved" in reply["text"] and "progress is saved" not in reply["text"]
    _, text = await _get(monitored.monitoring.port, "/metrics")
    assert "coursebot_update_errors_total 1.0" in text
