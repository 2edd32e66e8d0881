"""The service and the client over real sockets (a fake backend: protocol only)."""

import asyncio
import json
import logging
import os
import struct

import pytest

from runner import protocol
from runner.client import RunnerClient
from runner.errors import InvalidRequest, ProtocolError, RunnerBusy, RunnerClosed, RunnerConfigError, Unauthorized
from runner.grading import Check, ExerciseChecks
from runner.result import CheckOutcome, RunResult
from runner.service import SECRET_ENV, Service, scrub_environment


class FakeBackend:
    def __init__(self):
        self.calls = []

    async def run(self, code, limits=None, checks=None, seed=None):
        self.calls.append((code, limits, checks, seed))
        if code == "busy":
            raise RunnerBusy("full")
        if code.startswith("sleep"):
            await asyncio.sleep(float(code.split()[1]))
        outcomes = tuple(CheckOutcome(c.id, True, "checks.passed") for c in checks.checks) if checks else ()
        return RunResult("ok", code.upper(), "", 0, None, 1.0, False, outcomes, bool(outcomes))

    def stats(self):
        return {"backend": "fake"}

    async def close(self):
        pass


TOKEN = "s3cret-token-for-the-tests-0123456789"


@pytest.fixture
async def served(tmp_path):
    backend = FakeBackend()
    svc = Service(backend, token=TOKEN)
    path = str(tmp_path / "r.sock")
    await svc.listen(f"unix://{path}")
    await svc.listen("tcp://127.0.0.1:0")
    yield svc, backend, path
    await svc.close()


def tcp_address(svc):
    return next(a for a in svc.addresses() if a.startswith("tcp://"))


async def test_run_over_unix_and_tcp(served):
    svc, backend, path = served
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    tcp = tcp_address(svc)
    for addr, token in ((f"unix://{path}", None), (path, TOKEN), (tcp, TOKEN)):
        async with RunnerClient.connect(addr, token=token) as c:
            r = await c.run("hello", limits={"cpu_time_s": 1}, seed=5)
            assert r.stdout == "HELLO" and r.status == "ok"
            assert await c.ping()
            assert c.info["protocol"] == 1 and c.info["backend"] == "fake"
    assert backend.calls[0][1:] == ({"cpu_time_s": 1}, None, 5)


async def test_many_requests_in_flight_answered_by_id(served):
    _, _, path = served
    async with RunnerClient.connect(path) as c:
        rs = await asyncio.gather(c.run("sleep 0.2"), c.run("a"), c.run("sleep 0.1"))
        assert [r.stdout for r in rs] == ["SLEEP 0.2", "A", "SLEEP 0.1"]


async def test_errors_are_reraised_as_their_class(served):
    _, _, path = served
    async with RunnerClient.connect(path) as c:
        with pytest.raises(RunnerBusy):
            await c.run("busy")
        with pytest.raises(InvalidRequest):
            await c.request({"op": "nope"})
        with pytest.raises(InvalidRequest):
            await c.request({"op": "run", "code": 3})


async def test_checks_travel(served):
    _, backend, path = served
    checks = ExerciseChecks(checks=(Check("g", "x.grad", expect=[1.0, 2.0]),))
    async with RunnerClient.connect(path) as c:
        r = await c.run("x", checks=checks)
    assert backend.calls[-1][2] == checks
    assert r.passed and r.checks[0].id == "g"


async def raw_exchange(path, payload: bytes):
    r, w = await asyncio.open_unix_connection(path)
    w.write(payload)
    await w.drain()
    header = await r.readexactly(4)
    body = await r.readexactly(struct.unpack(">I", header)[0])
    w.close()
    return json.loads(body)


async def test_other_protocol_versions_rejected_clearly(served):
    _, backend, path = served
    body = json.dumps({"v": 2, "id": 9, "op": "run", "code": "x"}).encode()
    reply = await raw_exchange(path, struct.pack(">I", len(body)) + body)
    assert reply["id"] == 9 and reply["ok"] is False
    assert reply["error"]["type"] == "ProtocolError" and "version" in reply["error"]["message"]
    assert backend.calls == []  # never acted on


async def test_garbage_frames(served):
    _, _, path = served
    reply = await raw_exchange(path, struct.pack(">I", 3) + b"{{{")
    assert reply["error"]["type"] == "ProtocolError"
    reply = await raw_exchange(path, struct.pack(">I", protocol.MAX_FRAME + 1))
    assert reply["error"]["type"] == "ProtocolError"


async def test_connect_failures(tmp_path):
    with pytest.raises(RunnerClosed):
        await RunnerClient.connect(str(tmp_path / "nothing.sock"), timeout=1)
    with pytest.raises(RunnerConfigError, match="tcp://host:port"):
        await RunnerClient.connect("http://x")


async def test_server_going_away_fails_pending(served):
    _svc, _, path = served
    c = await RunnerClient.connect(path)
    task = asyncio.ensure_future(c.run("sleep 5"))
    await asyncio.sleep(0.1)
    c._writer.close()
    with pytest.raises((RunnerClosed, ProtocolError)):
        await task
    await c.close()


def test_scrub_environment(monkeypatch):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "x")
    monkeypatch.setenv("DB_PASSWORD", "x")
    monkeypatch.setenv("LANG", "C.UTF-8")
    scrub_environment()
    assert "TELEGRAM_BOT_TOKEN" not in os.environ and "DB_PASSWORD" not in os.environ
    assert os.environ["LANG"] == "C.UTF-8"
    assert SECRET_ENV.search("AWS_SECRET_ACCESS_KEY")


def frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


async def test_a_deeply_nested_frame_gets_a_protocol_error_and_the_connection_keeps_serving(served):
    _, backend, path = served
    errors = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    deep = b'{"v": 1, "id": 3, "op": "run", "code": "x", "limits": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    r, w = await asyncio.open_unix_connection(path)
    try:
        w.write(frame(deep) + frame(b'{"v": 1, "id": 4, "op": "ping"}'))
        await w.drain()
        replies = []
        for _ in range(2):
            header = await asyncio.wait_for(r.readexactly(4), 5)
            replies.append(json.loads(await r.readexactly(struct.unpack(">I", header)[0])))
    finally:
        w.close()
    assert replies[0]["ok"] is False and replies[0]["error"]["type"] == "ProtocolError"
    assert "nested" in replies[0]["error"]["message"]
    assert replies[1] == {"v": 1, "id": 4, "ok": True, "result": {"pong": True}}
    assert backend.calls == [] and errors == []


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
async def test_non_finite_json_numbers_are_a_protocol_error(served, constant):
    _, backend, path = served
    body = b'{"v": 1, "id": 5, "op": "run", "code": "x", "limits": {"output_bytes": ' + constant + b"}}"
    reply = await raw_exchange(path, frame(body))
    assert reply["ok"] is False and reply["error"]["type"] == "ProtocolError"
    assert backend.calls == []


def test_nesting_within_the_bound_decodes():
    body = json.dumps({"v": 1, "a": [[[[1.0]]]], "b": {"c": {"d": [1, 2, {"e": None}]}}}).encode()
    assert protocol.decode(body)["a"] == [[[[1.0]]]]
    too_deep = json.dumps({"v": 1, "a": json.loads("[" * protocol.MAX_DEPTH + "]" * protocol.MAX_DEPTH)})
    with pytest.raises(ProtocolError, match="nested"):
        protocol.decode(too_deep.encode())


# --- authentication of the TCP listener ------------------------------------------------------------------


async def test_a_tcp_listener_needs_a_token():
    with pytest.raises(RunnerConfigError, match="RUNNER_TOKEN"):
        await Service(FakeBackend()).listen("tcp://127.0.0.1:0")


@pytest.mark.parametrize("token", [None, "wrong-token-of-the-right-length-0000"], ids=["none", "wrong"])
async def test_a_tcp_client_without_the_token_is_refused_and_logged(served, caplog, token):
    svc, backend, _ = served
    caplog.set_level(logging.WARNING, logger="runner.service")
    with pytest.raises(Unauthorized):
        async with RunnerClient.connect(tcp_address(svc), token=token) as c:
            await c.run("hello")
    assert backend.calls == []
    refused = [r.getMessage() for r in caplog.records if "refused a connection" in r.getMessage()]
    assert len(refused) == 1 and "127.0.0.1" in refused[0], caplog.text
    assert TOKEN not in caplog.text and (token is None or token not in caplog.text)


async def test_a_raw_request_over_tcp_without_a_hello_is_never_acted_on(served, caplog):
    svc, backend, _ = served
    host, port = tcp_address(svc)[len("tcp://") :].rsplit(":", 1)
    caplog.set_level(logging.WARNING, logger="runner.service")
    r, w = await asyncio.open_connection(host, int(port))
    try:
        body = json.dumps({"v": 1, "id": 1, "op": "run", "code": "x"}).encode()
        w.write(frame(body))
        await w.drain()
        header = await asyncio.wait_for(r.readexactly(4), 5)
        reply = json.loads(await r.readexactly(struct.unpack(">I", header)[0]))
        assert reply["ok"] is False and reply["error"]["type"] == "Unauthorized" and reply["id"] == 1
        assert await asyncio.wait_for(r.read(), 5) == b""  # and the connection is closed
    finally:
        w.close()
    assert backend.calls == [] and "refused a connection" in caplog.text


async def test_an_oversized_first_frame_over_tcp_is_refused_unread(served):
    svc, backend, _ = served
    host, port = tcp_address(svc)[len("tcp://") :].rsplit(":", 1)
    r, w = await asyncio.open_connection(host, int(port))
    try:
        w.write(struct.pack(">I", protocol.MAX_FRAME))  # 8 MiB announced, never sent: not waited for
        await w.drain()
        header = await asyncio.wait_for(r.readexactly(4), 5)
        reply = json.loads(await r.readexactly(struct.unpack(">I", header)[0]))
        assert reply["error"]["type"] == "Unauthorized"
    finally:
        w.close()
    assert backend.calls == []


async def test_the_bot_presents_runner_token_to_a_tcp_runner(served):
    from bot.app import connect_runner
    from bot.config import Config

    svc, backend, _ = served
    env = {"TELEGRAM_BOT_TOKEN": "1:x", "COURSEBOT_RUNNER_URL": tcp_address(svc), "RUNNER_TOKEN": TOKEN}
    async with connect_runner(Config.from_env(env)) as runner:
        assert (await runner.run("hi")).stdout == "HI"
    assert [c[0] for c in backend.calls] == ["hi"]
