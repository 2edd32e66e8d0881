"""The runner's side of the zygote's control socket, over a real socketpair (no sandbox needed)."""

import asyncio
import socket

import pytest

from runner.config import RunnerConfig
from runner.errors import JobFailed
from runner.sandbox import SandboxConfig
from runner.zygote import recv_msg
from runner.zygote_control import ZygoteControl


@pytest.fixture
def control():
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.setblocking(False)
    z = ZygoteControl(SandboxConfig.from_config(RunnerConfig()))
    z.ctl, z.alive = ours, True  # as start() leaves it, with `theirs` playing the zygote
    yield z, theirs
    if z.ctl is not None:
        z.ctl.close()
    theirs.close()


def fill(sock: socket.socket) -> int:
    sent = 0
    while True:
        try:
            sock.send(b'{"op": "ping"}')
            sent += 1
        except BlockingIOError:
            return sent


async def test_a_full_control_socket_waits_without_blocking_the_loop(control):
    z, theirs = control
    queued = fill(z.ctl)
    sending = asyncio.ensure_future(z.send({"op": "spawn", "job": "j1"}))
    ticks = 0
    for _ in range(5):  # the loop keeps running while the request waits for room
        await asyncio.sleep(0.01)
        ticks += 1
    assert ticks == 5 and not sending.done()
    for _ in range(queued):
        recv_msg(theirs)  # the zygote reads its requests: room again
    await asyncio.wait_for(sending, 5)
    assert recv_msg(theirs) == ({"op": "spawn", "job": "j1"}, [])


async def test_a_request_waiting_for_room_fails_at_once_when_the_zygote_dies(control):
    z, _ = control
    fill(z.ctl)
    sending = asyncio.ensure_future(z.send({"op": "spawn", "job": "j1"}))
    await asyncio.sleep(0.05)
    z._died()
    with pytest.raises(JobFailed, match="not running"):
        await asyncio.wait_for(sending, 1)


async def test_waiters_fail_when_the_zygote_dies(control):
    z, _ = control
    spawned = z.expect("spawn", "j1")
    z._died()
    with pytest.raises(JobFailed, match="died"):
        await spawned
    with pytest.raises(JobFailed, match="not running"):
        await z.expect("exit", "j2")


async def test_answers_reach_the_request_they_belong_to(control):
    z, _ = control
    spawn, exit_ = z.expect("spawn", "j1"), z.expect("exit", "j1")
    z._dispatch({"op": "exit", "job": "j1", "status": 0})
    z._dispatch({"op": "spawn_failed", "job": "j1", "error": "x"})
    assert (await exit_)["status"] == 0 and (await spawn)["op"] == "spawn_failed"
