"""A job no runner took (a balancer closed its connection before the hello's answer) is tried again, boundedly;
one a runner took and then lost is JobLost at once.  And the health endpoint a balancer checks.  Fake runners
on real sockets: the real pool behind a real HAProxy is tests/test_runner_hosts.py."""

import asyncio
import json
import logging

import pytest

from runner import client as client_module
from runner import protocol
from runner.client import JobLost, RunnerBusy, RunnerClient, RunnerClosed, TcpAddress
from runner.limits import DEFAULT
from runner.service import Service

TOKEN = "admission-token-for-the-tests-0123456789"
INFO = {"protocol": 1, "backend": "fake", "size": 1, "queue": 0, "limits": DEFAULT.to_dict(), "fingerprint": "f"}
RESULT = {
    "status": "ok",
    "stdout": "RAN",
    "stderr": "",
    "exit_code": 0,
    "signal": None,
    "duration_ms": 1.0,
    "truncated": False,
}


class FakeDoor:
    """A TCP listener that plays, per connection in turn, one of: "queued" (held, then closed unanswered, as
    HAProxy's `timeout queue` does), "refused" (closed at once unanswered, as HAProxy with no host up does),
    "lost" (the hello answered, then closed: a host that died with the job), "serve" (a runner that answers)."""

    def __init__(self, script: list[str], hold_s: float = 0.15) -> None:
        self.script = script
        self.hold_s = hold_s
        self.connections: list[str] = []
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        part = self.script[min(len(self.connections), len(self.script) - 1)]
        self.connections.append(part)
        try:
            if part == "queued":
                await asyncio.sleep(self.hold_s)
            elif part in ("lost", "serve"):
                hello = await protocol.read_frame(reader)
                assert hello is not None and hello["token"] == TOKEN
                await protocol.write_frame(writer, {"id": hello["id"], "ok": True, "result": {"hello": True}})
                request = await protocol.read_frame(reader)
                assert request is not None
                if part == "serve":
                    result = RESULT if request["op"] == "run" else INFO
                    await protocol.write_frame(writer, {"id": request["id"], "ok": True, "result": result})
        finally:
            writer.close()

    async def __aenter__(self) -> "FakeDoor":
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    def client(self) -> RunnerClient:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return RunnerClient(TcpAddress("127.0.0.1", port), token=TOKEN, request_timeout_s=10)


@pytest.fixture(autouse=True)
def quick(monkeypatch):
    monkeypatch.setattr(client_module, "ADMIT_QUEUED_S", 0.1)
    monkeypatch.setattr(client_module, "RECONNECT_WAIT_S", 1.0)


async def test_a_full_pool_is_tried_a_bounded_number_of_times_then_busy():
    async with FakeDoor(["queued"]) as door:
        with pytest.raises(RunnerBusy, match=r"no runner .* took the job in 3 tries"):
            await door.client().run("print(1)")
    assert door.connections == ["queued"] * client_module.ADMIT_TRIES


async def test_a_job_queued_once_then_taken_runs():
    async with FakeDoor(["queued", "queued", "serve"]) as door:
        assert (await door.client().run("print(1)")).stdout == "RAN"
    assert door.connections == ["queued", "queued", "serve"]


async def test_connecting_to_a_full_pool_waits_for_a_slot_for_as_long_as_it_waits_for_a_runner_away():
    async with FakeDoor(["queued"] * 4 + ["serve"]) as door:
        port = door.server.sockets[0].getsockname()[1]
        async with RunnerClient.connect(f"tcp://127.0.0.1:{port}", timeout=10, token=TOKEN) as runner:
            assert runner.info.backend == "fake"  # read once, after four tries that met a full pool
    assert door.connections == ["queued"] * 4 + ["serve"]
    async with FakeDoor(["queued"]) as door:
        port = door.server.sockets[0].getsockname()[1]
        with pytest.raises(RunnerBusy):
            await RunnerClient.connect(f"tcp://127.0.0.1:{port}", timeout=1, token=TOKEN)


async def test_no_runner_up_is_a_runner_away_tried_within_the_wait_then_closed():
    async with FakeDoor(["refused", "refused", "serve"]) as door:  # a host back within the wait: the job runs
        assert (await door.client().run("print(1)")).stdout == "RAN"
    async with FakeDoor(["refused"]) as door:
        with pytest.raises(RunnerClosed, match=r"no runner .* took the job") as caught:
            await door.client().run("print(1)")
        assert not isinstance(caught.value, (JobLost, RunnerBusy))
    assert len(door.connections) > 2  # tried again with back-off, for RECONNECT_WAIT_S (1 s here) only


async def test_a_runner_that_took_the_job_and_died_costs_it_a_job_lost_never_a_second_run():
    async with FakeDoor(["lost", "serve"]) as door:
        with pytest.raises(JobLost, match="went away before it answered"):
            await door.client().run("print(1)")
    assert door.connections == ["lost"]


async def test_a_ping_tries_once_and_a_full_pool_is_up_but_no_runner_is_down():
    async with FakeDoor(["queued"]) as door:
        assert await door.client().ping() is True  # runners up, all busy: the bot's /healthz stays healthy
    assert door.connections == ["queued"]
    async with FakeDoor(["refused"]) as door:
        with pytest.raises(RunnerClosed):
            await door.client().ping()
    assert door.connections == ["refused"]


class Backend:
    def stats(self):
        return {"backend": "fake", "size": 3, "running": 2, "waiting": 1, "queue": 4}


async def http(host: str, port: int, request: bytes) -> tuple[str, bytes]:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), body


async def test_the_health_endpoint_answers_without_a_token_and_takes_no_place_at_the_door(caplog):
    caplog.set_level(logging.WARNING)
    svc = Service(Backend(), token=TOKEN)  # type: ignore[arg-type]
    await svc.listen("tcp://127.0.0.1:0")
    await svc.listen_health("tcp://127.0.0.1:0")
    try:
        (health,) = svc.health_addresses()
        host, port = health[len("tcp://") :].rsplit(":", 1)
        status, body = await http(host, int(port), b"GET /healthz HTTP/1.0\r\n\r\n")
        assert status == "HTTP/1.0 200 OK"
        assert json.loads(body) == {"ok": True, "running": 2, "waiting": 1, "size": 3}
        assert (await http(host, int(port), b"HEAD /healthz HTTP/1.0\r\n\r\n")) == ("HTTP/1.0 200 OK", b"")
        assert (await http(host, int(port), b"GET / HTTP/1.0\r\n\r\n"))[0] == "HTTP/1.0 404 Not Found"
        assert (await http(host, int(port), b"\x00\x00\x00\x10{}\r\n\r\n"))[0] == "HTTP/1.0 404 Not Found"
        assert svc.door.pending == 0
        assert "refused" not in caplog.text  # a check is never a wrong hello
        # A head too long, or never ended, is answered 404 at its limit, and idle checks are capped.
        assert (await http(host, int(port), b"GET /healthz" + b"x" * 5000))[0] == "HTTP/1.0 404 Not Found"
        from runner import service

        idle = [await asyncio.open_connection(host, int(port)) for _ in range(service.HEALTH_PENDING + 3)]
        try:
            await asyncio.sleep(0.2)
            assert svc._health_pending == service.HEALTH_PENDING
        finally:
            for _r, w in idle:
                w.close()
    finally:
        await svc.close()


async def test_the_health_endpoint_is_tcp_only():
    from runner.errors import RunnerConfigError

    svc = Service(Backend(), token=TOKEN)  # type: ignore[arg-type]
    with pytest.raises(RunnerConfigError, match="--health must be tcp://HOST:PORT"):
        await svc.listen_health("unix:///tmp/x.sock")


def test_serve_refuses_a_health_address_that_is_not_tcp_before_importing_torch(tmp_path):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "runner", "serve", "--socket", str(tmp_path / "r.sock"), "--health", "unix:///x.sock"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout.startswith("ERROR RunnerConfigError: --health must be tcp://")
