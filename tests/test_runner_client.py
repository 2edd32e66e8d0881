"""The embedded runner, end to end: a real `python -m runner serve` child."""

import asyncio
import os

import pytest

from runner.client import RunnerClient, RunnerConfig, worker_env
from runner.errors import RunnerBusy
from runner.grading import Check, ExerciseChecks
from tests.runner_cases.helpers import require_sandbox


def test_worker_env_never_carries_secrets(monkeypatch):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:abc")
    env = worker_env(RunnerConfig(env={"RUNNER_BWRAP": "/usr/bin/bwrap"}))
    assert set(env) <= {"PATH", "LANG", "PYTHONPATH", "RUNNER_BWRAP"}


def test_client_module_never_imports_torch():
    import subprocess
    import sys

    code = (
        "import sys; import runner.client, runner.service, runner.pool, runner.grading; print('torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    assert out.stdout.strip() == "False", out.stderr


async def test_embedded_end_to_end(monkeypatch):
    require_sandbox()
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:embedded-secret")
    async with RunnerClient.embedded(RunnerConfig(pool_size=1, queue=0)) as runner:
        environ = open(f"/proc/{runner._proc.pid}/environ", "rb").read()
        assert b"embedded-secret" not in environ and b"TELEGRAM" not in environ
        assert runner.info["pids_limit_proven"] is True
        r = await runner.run("print(sum(range(10)))")
        assert (r.status, r.stdout) == ("ok", "45\n")
        r = await runner.run("import os\nprint('TELEGRAM_BOT_TOKEN' in os.environ)")
        assert r.stdout == "False\n"
        checks = ExerciseChecks(checks=(Check("g", "x.grad", expect=4.0),))
        r = await runner.run(
            "import torch\nx = torch.tensor(2.0, requires_grad=True)\n(x * x).backward()", checks=checks
        )
        assert r.passed and r.checks[0].passed
        slow = asyncio.ensure_future(runner.run("import time; time.sleep(1)"))
        await asyncio.sleep(0.3)
        with pytest.raises(RunnerBusy):
            await runner.run("print(1)")
        assert (await slow).status == "ok"
        proc = runner._proc
    assert proc.returncode is not None  # the worker went away with the client
