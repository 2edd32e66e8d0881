"""The service and the client over real sockets (a fake backend: protocol only)."""

import asyncio
import json
import logging
import os
import struct

import pytest

from runner import protocol
from runner.client import RunnerClient
from runner.config import UnixAddress
from runner.errors import (
    InvalidRequest,
    JobLost,
    ProtocolError,
    RunnerBusy,
    RunnerClosed,
    RunnerConfigError,
    Unauthorized,
)
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
        return {"backend": "fake", "size": 1, "queue": 0, "fingerprint": "f1", "running": 0, "waiting": 0}

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
            assert (c.info.protocol, c.info.backend, c.info.fingerprint) == (1, "fake", "f1")
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


async def test_a_runner_going_away_with_a_job_costs_that_job_a_job_lost(tmp_path):
    # A runner that reads the request, then dies (its end of the connection closes) without answering.
    path = str(tmp_path / "dying.sock")
    got = asyncio.Event()

    async def die(reader, writer):
        await protocol.read_frame(reader)
        got.set()
        writer.close()

    server = await asyncio.start_unix_server(die, path=path)
    client = RunnerClient(UnixAddress(path), request_timeout_s=30)
    try:
        with pytest.raises(JobLost, match="went away before it answered"):
            await client.run("print(1)")
        assert got.is_set()
    finally:
        server.close()
        await server.wait_closed()


async def test_every_request_has_a_connection_of_its_own_so_a_restarted_runner_is_reached_again(tmp_path):
    path = str(tmp_path / "r.sock")
    first = Service(FakeBackend())
    await first.listen(path)
    client = await RunnerClient.connect(path)
    assert (await client.run("one")).stdout == "ONE"
    await first.close()  # the runner stops: its socket is gone
    with pytest.raises(RunnerClosed, match="cannot reach the runner"):
        await client.ping()  # a ping does not wait: a health check wants the truth now
    job = asyncio.ensure_future(client.run("two"))  # a job waits for the runner to be back
    await asyncio.sleep(0.3)
    assert not job.done()
    second = Service(FakeBackend())
    await second.listen(path)
    try:
        assert (await asyncio.wait_for(job, 10)).stdout == "TWO"
        assert await client.ping()
    finally:
        await second.close()


async def test_over_tcp_each_connection_presents_the_token_first(served):
    svc, backend, _ = served
    async with RunnerClient.connect(tcp_address(svc), token=TOKEN) as c:
        results = await asyncio.gather(*(c.run(f"job {i}") for i in range(5)))
    assert [r.stdout for r in results] == [f"JOB {i}" for i in range(5)]
    assert len(backend.calls) == 5


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


# --- issue 21: a request is measured before it is read, and an error never echoes what was sent ------------------

ECHO = "ECHO-ME-" * 1000


def check(**fields):
    return {"checks": [{"id": "g", "expr": "x", **fields}], "reference": None}


@pytest.mark.parametrize(
    "request_",
    [
        pytest.param({"op": "run", "code": "x", "checks": check(expr="x." + ECHO)}, id="a long expression"),
        pytest.param({"op": "run", "code": "x", "checks": check(expr="x +", kind=ECHO)}, id="a kind"),
        pytest.param({"op": "run", "code": "x", "checks": check(id=ECHO)}, id="a check id"),
        pytest.param({"op": "run", "code": "x", "checks": check(expect=[[[[[[[[[[ECHO]]]]]]]]]])}, id="an expect"),
        pytest.param({"op": "run", "code": "x", "checks": check(message_key=ECHO)}, id="a message key"),
        pytest.param({"op": "run", "code": "x", "checks": {"checks": ECHO}}, id="malformed checks"),
        pytest.param({"op": ECHO}, id="an op"),
        pytest.param({"op": "run", "code": "x", "v": ECHO}, id="a protocol version"),
    ],
)
async def test_an_error_names_the_rule_and_never_echoes_the_request(served, request_):
    _, backend, path = served
    body = json.dumps({"v": 1, "id": 5, **request_}).encode()
    reply = await raw_exchange(path, struct.pack(">I", len(body)) + body)
    assert reply["ok"] is False and backend.calls == []
    message = reply["error"]["message"]
    assert "ECHO" not in message and len(message) < 300, message


@pytest.mark.parametrize(
    "limits", [{ECHO: 1}, {"wall_time_s": ECHO}, {"open_files": 1.5}], ids=["name", "value", "whole"]
)
def test_a_limit_refused_is_named_without_its_value(limits):
    # The backends read a request's limits (backend.Request.of): the service hands them on as sent.
    from runner.limits import Limits

    with pytest.raises(InvalidRequest) as refused:
        Limits.from_dict(limits)
    assert "ECHO" not in str(refused.value) and "1.5" not in str(refused.value)


# --- issue 21: the TCP door: capped before the hello, one deadline, back-off on wrong tokens, a bounded log ------


def tcp_host_port(svc):
    host, port = tcp_address(svc)[len("tcp://") :].rsplit(":", 1)
    return host, int(port)


async def hello_reply(svc, hello: bytes):
    r, w = await asyncio.open_connection(*tcp_host_port(svc))
    try:
        w.write(frame(hello))
        await w.drain()
        header = await asyncio.wait_for(r.readexactly(4), 10)
        return json.loads(await r.readexactly(struct.unpack(">I", header)[0]))
    finally:
        w.close()


async def test_a_token_that_is_not_text_utf8_can_carry_is_refused_cleanly_and_the_runner_serves_on(served, caplog):
    svc, _backend, _ = served
    caplog.set_level(logging.WARNING)
    # A lone surrogate is valid JSON but no UTF-8: it once crashed the hello handler.
    for hello in (
        b'{"v": 1, "id": 1, "op": "hello", "token": "\\ud800' + b"x" * 40 + b'"}',
        b'{"v": 1, "id": 1, "op": "hello", "token": ["a list"]}',
        json.dumps({"v": 1, "id": 1, "op": "hello", "token": "y" * 5000}).encode()[:4000],
    ):
        reply = await hello_reply(svc, hello)
        assert reply["ok"] is False and reply["error"]["type"] == "Unauthorized"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text  # no traceback anywhere
    async with RunnerClient.connect(tcp_address(svc), token=TOKEN) as c:
        assert (await c.run("still")).stdout == "STILL"


async def test_connections_waiting_for_their_hello_are_capped_and_the_rest_closed_unread(served, monkeypatch):
    from runner import service

    svc, _backend, _ = served
    host, port = tcp_host_port(svc)
    fds_before = len(os.listdir("/proc/self/fd"))
    idle = [await asyncio.open_connection(host, port) for _ in range(service.HELLO_PENDING_PER_HOST + 20)]
    try:
        await asyncio.sleep(0.2)
        assert svc.door.pending == service.HELLO_PENDING_PER_HOST  # the rest were closed at once
        closed = 0
        for r, _w in idle:
            try:
                if await asyncio.wait_for(r.read(), 0.05) == b"":
                    closed += 1
            except TimeoutError:
                pass
        assert closed == 20
        # Our side holds two descriptors per idle connection (the test's end and the runner's): the runner's
        # ends of the refused ones are closed.
        assert len(os.listdir("/proc/self/fd")) - fds_before <= len(idle) + service.HELLO_PENDING_PER_HOST + 5
    finally:
        for _r, w in idle:
            w.close()
    await asyncio.sleep(0.2)
    assert svc.door.pending == 0
    async with RunnerClient.connect(tcp_address(svc), token=TOKEN) as c:  # and the door is open again
        assert (await c.run("in")).stdout == "IN"


async def test_a_hello_that_comes_in_pieces_is_cut_at_one_deadline(served, monkeypatch):
    from runner import service

    svc, _, _ = served
    monkeypatch.setattr(service, "HELLO_TIMEOUT_S", 0.5)
    r, w = await asyncio.open_connection(*tcp_host_port(svc))
    try:
        body = json.dumps({"v": 1, "id": 3, "op": "hello", "token": TOKEN}).encode()
        # Each piece comes within the deadline of the one before (a deadline per read once let it through), the
        # whole hello after it: refused, though the token is right.
        await asyncio.sleep(0.4)
        w.write(struct.pack(">I", len(body)))
        await asyncio.sleep(0.4)
        w.write(body)
        await w.drain()
        header = await asyncio.wait_for(r.readexactly(4), 5)
        reply = json.loads(await r.readexactly(struct.unpack(">I", header)[0]))
        assert reply["error"]["type"] == "Unauthorized"
    finally:
        w.close()


def test_wrong_tokens_back_off_doubling_per_host_and_are_forgiven_later():
    from runner.service import BACKOFF_BASE_S, BACKOFF_FORGET_S, BACKOFF_MAX_S, TcpDoor

    now = [1000.0]
    door = TcpDoor(clock=lambda: now[0])
    delays = [door.failed("10.0.0.9") for _ in range(12)]
    assert delays[:4] == [BACKOFF_BASE_S, 2 * BACKOFF_BASE_S, 4 * BACKOFF_BASE_S, 8 * BACKOFF_BASE_S]
    assert delays[-1] == BACKOFF_MAX_S
    assert door.failed("10.0.0.10") == BACKOFF_BASE_S  # another host starts afresh
    now[0] += BACKOFF_FORGET_S + 1
    assert door.failed("10.0.0.9") == BACKOFF_BASE_S
    door.failed("10.0.0.9")
    door.passed("10.0.0.9")  # the right token forgives
    assert door.failed("10.0.0.9") == BACKOFF_BASE_S


def test_refusals_are_logged_at_most_once_per_period_per_host_with_a_count_of_the_rest():
    from runner.service import LOG_EVERY_S, TcpDoor

    now = [0.0]
    door = TcpDoor(clock=lambda: now[0])
    lines = [door.log_line("10.0.0.9", "refused: a wrong token") for _ in range(3500)]
    assert [line for line in lines if line] == ["refused: a wrong token"]
    now[0] += LOG_EVERY_S
    assert door.log_line("10.0.0.9", "refused: a wrong token") == (
        "refused: a wrong token (3499 more refused from 10.0.0.9 since the last line)"
    )


async def test_wrong_tokens_over_tcp_are_answered_more_slowly_each_time(served, monkeypatch):
    from runner import service

    svc, _, _ = served
    slept: list[float] = []

    async def wait(delay):
        slept.append(delay)

    monkeypatch.setattr(svc, "wait", wait)
    for _ in range(4):
        with pytest.raises(Unauthorized):
            await RunnerClient.connect(tcp_address(svc), token="wrong-token-of-the-right-length-0000")
    assert slept == [service.BACKOFF_BASE_S * 2**n for n in range(4)]
