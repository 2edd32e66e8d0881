"""The runner's public surface, and the embedded runner end to end: a real `python -m runner serve` child."""

import asyncio
import os
import subprocess
import sys
import tempfile

import pytest
import pytest_asyncio

import runner.client
from runner.client import Check, ExerciseChecks, RunnerBusy, RunnerClient, RunnerConfig, worker_env
from tests.runner_cases.helpers import host_config, repo_root, require_sandbox

# What the bot codes against (issue 8): these names, importable from runner.client.
CONTRACT = {
    "Check",
    "CheckOutcome",
    "ExerciseChecks",
    "Limits",
    "RunResult",
    "RunnerBusy",
    "RunnerClient",
    "RunnerClosed",
    "RunnerConfig",
    "RunnerConfigError",
    "RunnerError",
    "SandboxUnavailable",
    "parse_address",
}


def test_the_public_surface_offers_what_the_bot_uses():
    assert CONTRACT <= set(runner.client.__all__)
    for name in runner.client.__all__:
        assert getattr(runner.client, name) is not None, name


def modules_loaded_by(statement: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"import sys; {statement}; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        cwd=repo_root(),
        check=True,
    )
    return set(out.stdout.split())


def test_importing_the_public_surface_never_imports_torch():
    assert "torch" not in modules_loaded_by("import runner.client")


def test_no_module_of_the_runners_host_side_imports_torch():
    host_side = (
        "runner.client, runner.config, runner.service, runner.pool, runner.backend, runner.docker_backend, "
        "runner.self_check, runner.zygote_control, runner.grading, runner.__main__"
    )
    assert "torch" not in modules_loaded_by(f"import {host_side}")


def test_the_worker_gets_its_settings_and_nothing_of_the_bots_environment(monkeypatch):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:abc")
    monkeypatch.setenv("DB_PASSWORD", "x")
    config = RunnerConfig.from_env({"RUNNER_POOL": "3", "RUNNER_BWRAP": "/opt/bwrap"})
    env = worker_env(config)
    assert set(env) == {"PATH", "LANG", "PYTHONPATH"} | set(config.to_env())
    assert "123:abc" not in env.values() and "x" not in env.values()
    assert RunnerConfig.from_env(env) == config  # the worker reads back exactly these settings


# --- one real embedded runner, started from the environment's settings ------------------------------------------

module_loop = pytest.mark.asyncio(loop_scope="module")  # the tests below share one embedded runner
SECRET = "123456:embedded-test-secret"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def embedded():
    require_sandbox()
    # A bwrap reached through a link of our own: where the sandbox runs, this path shows whether the setting arrived.
    link_dir = tempfile.mkdtemp(prefix="coursebot-bwrap-")
    os.chmod(link_dir, 0o755)  # the launcher runs bwrap as the sandbox uid
    link = os.path.join(link_dir, "bwrap")
    os.symlink(host_config().bwrap, link)
    env = {
        "RUNNER_POOL": "3",
        "RUNNER_QUEUE": "0",
        "RUNNER_BWRAP": link,
        "RUNNER_SANDBOX_UID": "63334",
        "RUNNER_STARTUP_TIMEOUT": "150",
    }
    os.environ["TELEGRAM_BOT_TOKEN"] = SECRET
    try:
        client = await RunnerClient.embedded(RunnerConfig.from_env(env))
    finally:
        del os.environ["TELEGRAM_BOT_TOKEN"]
    yield client, link
    await client.close()
    os.unlink(link)
    os.rmdir(link_dir)


@module_loop
async def test_every_setting_reaches_the_embedded_runner(embedded):
    client, link = embedded
    info = client.info
    assert (info["backend"], info["size"], info["queue"], info["startup_timeout_s"]) == ("sandbox", 3, 0, 150.0)
    assert (info["bwrap"], info["sandbox_uid"]) == (link, 63334)
    assert info["pids_limit_proven"] is True
    # The sandbox really runs through that bwrap: the launcher exec'd it in place, so its pid shows the path.
    argv = open(f"/proc/{info['zygote_pid']}/cmdline", "rb").read().split(b"\0")
    assert argv[0] == link.encode()


@module_loop
async def test_the_embedded_pool_runs_exactly_its_size_at_once(embedded):
    client, _ = embedded
    slow = [asyncio.ensure_future(client.run("import time; time.sleep(1.5)")) for _ in range(3)]
    await asyncio.sleep(0.5)
    with pytest.raises(RunnerBusy):  # three running, none may wait (RUNNER_QUEUE=0)
        await client.run("print(1)")
    assert [(await s).status for s in slow] == ["ok", "ok", "ok"]


@module_loop
async def test_jobs_run_as_the_configured_sandbox_uid(embedded):
    client, _ = embedded
    r = await client.run("import os\nprint(os.getuid())")
    expected = "63334" if os.geteuid() == 0 else str(os.getuid())  # the uid setting applies when run as root
    assert (r.status, r.stdout) == ("ok", expected + "\n")


@module_loop
async def test_no_secret_of_the_bot_reaches_the_embedded_runner(embedded):
    client, _ = embedded
    environ = open(f"/proc/{client._proc.pid}/environ", "rb").read()
    assert SECRET.encode() not in environ and b"TELEGRAM" not in environ
    assert b"RUNNER_POOL=3" in environ.split(b"\0")
    r = await client.run("import os\nprint('TELEGRAM_BOT_TOKEN' in os.environ)")
    assert r.stdout == "False\n"


@module_loop
async def test_the_embedded_runner_runs_and_grades(embedded):
    client, _ = embedded
    r = await client.run("print(sum(range(10)))")
    assert (r.status, r.stdout) == ("ok", "45\n")
    checks = ExerciseChecks(checks=(Check("g", "x.grad", expect=4.0),))
    r = await client.run("import torch\nx = torch.tensor(2.0, requires_grad=True)\n(x * x).backward()", checks=checks)
    assert r.passed and r.checks[0].passed


@module_loop
async def test_closing_the_client_stops_the_worker(embedded):
    client, _ = embedded
    proc = client._proc
    await client.close()
    assert proc.returncode is not None
