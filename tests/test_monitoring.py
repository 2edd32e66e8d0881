"""/healthz and /metrics over real HTTP on 127.0.0.1: what each answers, and that nothing breaks them."""

from __future__ import annotations

import asyncio
import json

import pytest

from bot.errors import ConfigError
from bot.metrics import Metrics
from bot.monitoring import HEALTH_INTERVAL_S, MonitoringServer
from runner.client import RunnerLoad


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
        status, body = await _get(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
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
        metrics.runner_load(RunnerLoad(running=2, waiting=5))

    async with MonitoringServer("127.0.0.1", 0, metrics, {}, refresh=refresh) as server:
        status, body = await _get(server.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
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
        status, body = await _get(server.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200 and b"coursebot_runner_busy_slots 1.0" in body


async def test_other_paths_methods_and_garbage_get_a_status_not_a_crash():
    async with MonitoringServer("127.0.0.1", 0, Metrics(), {"database": _ok()}) as server:
        assert (await _get(server.port, b"GET /admin HTTP/1.1\r\nHost: x\r\n\r\n"))[0] == 404
        assert (await _get(server.port, b"POST /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))[0] == 405
        assert (await _get(server.port, b"\x00" * 9000))[0] == 400
        # and it still answers afterwards
        assert (await _get(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))[0] == 200


async def test_head_gets_the_status_and_headers_without_a_body():
    async with MonitoringServer("127.0.0.1", 0, Metrics(), {"database": _ok()}) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        response = await reader.read()
        writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and b"application/json" in head
    assert body == b""


async def test_many_healthz_requests_run_the_checks_once_a_round_not_once_a_request():
    runs = 0
    ran = asyncio.Event()

    async def counted() -> None:
        nonlocal runs
        runs += 1
        ran.set()

    waits: list[float] = []
    rounds: asyncio.Queue[None] = asyncio.Queue()

    async def step(seconds: float) -> None:
        # The background checker's wait between rounds: it goes on only when the test lets it.
        waits.append(seconds)
        await rounds.get()

    async with MonitoringServer("127.0.0.1", 0, Metrics(), {"database": counted}, sleep=step) as server:
        assert runs == 1  # the first round, before the first request
        for _batch in range(20):
            answers = await asyncio.gather(
                *(_get(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") for _ in range(10))
            )
            assert {status for status, _ in answers} == {200}
        assert runs == 1  # 200 requests, no check: they read the latest result
        ran.clear()
        rounds.put_nowait(None)
        await asyncio.wait_for(ran.wait(), 5)
        assert runs == 2
        for _ in range(50):
            assert (await _get(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))[0] == 200
        assert runs == 2
    # Every round waits the interval first: at most one round of checks a second.
    assert waits and set(waits) == {HEALTH_INTERVAL_S} and HEALTH_INTERVAL_S >= 1.0


async def test_healthz_serves_the_latest_round():
    state = {"database": None}
    rounds: asyncio.Queue[None] = asyncio.Queue()
    done = asyncio.Event()

    async def database() -> str | None:
        done.set()
        return state["database"]

    async def step(seconds: float) -> None:
        await rounds.get()

    async with MonitoringServer("127.0.0.1", 0, Metrics(), {"database": database}, sleep=step) as server:
        assert (await _get(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))[0] == 200
        state["database"] = "the disk is full"
        assert (await _get(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))[0] == 200  # not checked again yet
        done.clear()
        rounds.put_nowait(None)
        await asyncio.wait_for(done.wait(), 5)
        await asyncio.sleep(0)  # the round's result is stored right after its checks return
        status, body = await _get(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 503 and json.loads(body)["checks"] == {"database": "the disk is full"}


async def _until(condition: object, what: str) -> None:
    """Wait (bounded) for the server to reach a state: connections are counted when the event loop gets to them."""
    for _ in range(500):
        if condition():  # type: ignore[operator]
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


async def test_connections_beyond_the_cap_are_closed_unanswered():
    async with MonitoringServer("127.0.0.1", 0, Metrics(), {"database": _ok()}, max_connections=3) as server:
        idle = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(3)]
        await _until(lambda: server.server.connections == 3, "three idle connections held")
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, never read
        writer.close()
        idle[0][1].close()
        await _until(lambda: server.server.connections < 3, "an idle connection gone")
        assert (await _get(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))[0] == 200
        for _, idle_writer in idle[1:]:
            idle_writer.close()


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
