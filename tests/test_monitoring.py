"""/healthz and /metrics over real HTTP on 127.0.0.1: what each answers, and that nothing breaks them."""

from __future__ import annotations

import asyncio
import json

import pytest

from bot.errors import ConfigError
from bot.metrics import Metrics
from bot.monitoring import MonitoringServer


async def _get(port: int, request: bytes) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    response = await reader.read()
    writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def _ok() -> object:
    async def check() -> None:
        return None

    return check


def _problem(text: str) -> object:
    async def check() -> str:
        return text

    return check


async def test_healthz_is_200_when_every_check_passes_and_503_naming_each_that_fails():
    async def broken() -> None:
        raise OSError("attempt to write a readonly database")

    never = asyncio.Event()

    async def hangs() -> None:
        await never.wait()

    async with MonitoringServer("127.0.0.1", 0, Metrics(), {"database": _ok(), "runner": _ok()}) as server:
        status, body = await _get(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200 and json.loads(body) == {"status": "ok", "checks": {"database": "ok", "runner": "ok"}}

    checks = {"database": broken, "runner": hangs, "telegram": _problem("no answer from the Bot API for 95 s")}
    async with MonitoringServer("127.0.0.1", 0, Metrics(), checks, check_timeout_s=0.01) as server:
        status, body = await _get(server.port, b"GET /healthz HTTP/1.1\r\n\r\n")
    report = json.loads(body)
    assert status == 503 and report["status"] == "failing"
    assert report["checks"] == {
        "database": "OSError: attempt to write a readonly database",
        "runner": "no answer within 0.01 s",
        "telegram": "no answer from the Bot API for 95 s",
    }


async def test_metrics_are_refreshed_then_served_in_prometheus_text():
    metrics = Metrics()
    metrics.updates.labels("message").inc(3)
    metrics.jobs.labels("timeout").inc()

    async def refresh() -> None:
        metrics.runner_load({"running": 2, "waiting": 5})

    async with MonitoringServer("127.0.0.1", 0, metrics, {}, refresh=refresh) as server:
        status, body = await _get(server.port, b"GET /metrics HTTP/1.1\r\n\r\n")
    text = body.decode()
    assert status == 200
    assert 'coursebot_updates_total{kind="message"} 3.0' in text
    assert 'coursebot_runner_jobs_total{outcome="timeout"} 1.0' in text
    assert "coursebot_runner_busy_slots 2.0" in text and "coursebot_runner_queue_depth 5.0" in text


async def test_metrics_are_served_with_the_last_figures_when_the_refresh_fails():
    metrics = Metrics()
    metrics.busy_slots.set(1)

    async def refresh() -> None:
        raise ConnectionError("the runner is gone")

    async with MonitoringServer("127.0.0.1", 0, metrics, {}, refresh=refresh) as server:
        status, body = await _get(server.port, b"GET /metrics HTTP/1.1\r\n\r\n")
    assert status == 200 and b"coursebot_runner_busy_slots 1.0" in body


async def test_other_paths_methods_and_garbage_get_a_status_not_a_crash():
    async with MonitoringServer("127.0.0.1", 0, Metrics(), {"database": _ok()}) as server:
        assert (await _get(server.port, b"GET /admin HTTP/1.1\r\n\r\n"))[0] == 404
        assert (await _get(server.port, b"POST /healthz HTTP/1.1\r\n\r\n"))[0] == 405
        assert (await _get(server.port, b"\x00" * 9000))[0] == 400
        # and it still answers afterwards
        assert (await _get(server.port, b"GET /healthz HTTP/1.1\r\n\r\n"))[0] == 200


def test_seconds_since_the_bot_api_answered_follow_the_injected_clock():
    now = [100.0]
    metrics = Metrics(clock=lambda: now[0])
    assert metrics.seconds_since_api_answered() is None
    metrics.api_answered()
    now[0] = 160.5
    assert metrics.seconds_since_api_answered() == 60.5


async def test_a_port_in_use_is_one_line_naming_the_setting():
    async with MonitoringServer("127.0.0.1", 0, Metrics(), {}) as first:
        with pytest.raises(ConfigError) as refused:
            async with MonitoringServer("127.0.0.1", first.port, Metrics(), {}):
                pass
    assert str(refused.value).startswith("COURSEBOT_MONITORING: cannot serve") and "\n" not in str(refused.value)
