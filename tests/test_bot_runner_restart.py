"""The bot heals when its runner restarts: ``kill -9`` of the embedded runner, or of a ``tcp://`` runner, while a
learner's code runs. The job lost in the break gets "send it again", and code runs again without a bot restart.

(The same in the container and in the compose deploy: tests/test_readme_docker.py, tests/test_compose.py.)
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import signal
import socket
import sys
import time
from dataclasses import replace

import pytest

from runner.client import RunnerConfig
from tests.conftest import ROOT, running
from tests.journey import send_and_wait

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="the runner's sandbox needs bubblewrap (apt-get install -y bubblewrap)"
)

# A job that is still running when the runner is killed.
SLOW = "/run import time\ntime.sleep(30)\nprint('never printed')"
LOST = "send it again"


async def until_running(runner) -> None:
    """Return once the runner holds a job (its own count, asked over the protocol)."""
    for _ in range(600):
        if (await runner.request({"op": "info"}, 10.0))["running"]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the runner never started the learner's job")


async def test_kill_9_of_the_embedded_runner_costs_the_running_job_a_try_again_and_code_runs_again(config, standin):
    async with running(replace(config, runner="embedded")) as bot:
        assert bot.app is not None
        runner = bot.app.bot_data.services.runner
        ada = standin.learner(user_id=9101)
        assert (await send_and_wait(ada, "/run print(1)", timeout=60))["text"].strip() == "1"
        since = ada.cursor()
        await ada.send(SLOW)
        await until_running(runner)
        killed = runner._proc.pid
        os.kill(killed, signal.SIGKILL)
        started = time.monotonic()
        lost = await ada.wait_message(lambda m: LOST in m.get("text", ""), since=since, timeout=30)
        assert "restarted" in lost["text"]
        # Sent at once: it waits for the runner to be back, then runs.
        out = await send_and_wait(ada, "/run print(6 * 7)", timeout=120)
        print(f"code ran again {time.monotonic() - started:.1f} s after the kill")
        assert out["text"].strip() == "42"
        assert runner._proc.pid != killed
        # Healthy again, as /healthz sees it.
        assert await runner.ping()


async def _tcp_runner(port: int, token: str) -> asyncio.subprocess.Process:
    """`python -m runner serve --listen tcp://...`, as an operator starts a runner on another host; once READY."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "runner", "serve", "--listen", f"tcp://127.0.0.1:{port}",
        cwd=ROOT, env={**os.environ, "RUNNER_TOKEN": token}, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 240)
    assert line.startswith(b"READY "), line
    return process


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_kill_9_of_a_tcp_runner_costs_the_running_job_a_try_again_and_the_next_job_waits_for_its_return(
    config, standin
):
    port, token = _free_port(), secrets.token_hex(16)
    first = await _tcp_runner(port, token)
    second = None
    try:
        tcp = replace(config, runner=f"tcp://127.0.0.1:{port}", runner_config=RunnerConfig(token=token))
        async with running(tcp) as bot:
            assert bot.app is not None
            runner = bot.app.bot_data.services.runner
            ada = standin.learner(user_id=9102)
            since = ada.cursor()
            await ada.send(SLOW)
            await until_running(runner)
            first.kill()
            await first.wait()
            await ada.wait_message(lambda m: LOST in m.get("text", ""), since=since, timeout=30)
            # The next job finds no runner, and waits for one: the operator's supervisor starts it again.
            since = ada.cursor()
            await ada.send("/run print(6 * 7)")
            second = await _tcp_runner(port, token)
            out = await ada.wait_message(since=since, timeout=60)
            assert out["text"].strip() == "42"
            assert await runner.ping()
    finally:
        for process in (first, second):
            if process is not None and process.returncode is None:
                process.terminate()
                await process.wait()
