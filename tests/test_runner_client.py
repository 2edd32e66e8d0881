"""The runner's public surface, and the embedded runner end to end: a real `python -m runner serve` child."""

import asyncio
import dataclasses
import os
import subprocess
import sys
import tempfile

import pytest
import pytest_asyncio

import runner.client
from runner.client import Check, ExerciseChecks, RunnerBusy, RunnerClient, RunnerConfig, worker_env
from tests.runner_cases.helpers import host_config, repo_root, require_sandbox

TOKEN = "a-runner-token-the-embedded-runner-never-needs"

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
    config = RunnerConfig.from_env({"RUNNER_POOL": "3", "RUNNER_BWRAP": "/opt/bwrap", "RUNNER_TOKEN": TOKEN})
    env = worker_env(config)
    assert set(env) == {"PATH", "LANG", "PYTHONPATH"} | set(config.to_env()) - {"RUNNER_TOKEN"}
    assert "123:abc" not in env.values() and "x" not in env.values() and TOKEN not in env.values()
    # The worker reads back exactly these settings, but for the token it never uses (it serves a Unix socket).
    assert RunnerConfig.from_env(env) == dataclasses.replace(config, token=None)


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
        # Its READY line then comes as a JSON object, which the client reads as well as the text one.
        "COURSEBOT_LOG_FORMAT": "json",
    }
    os.environ["TELEGRAM_BOT_TOKEN"] = SECRET
    try:
        # The bot's RUNNER_TOKEN (it reaches a tcp:// runner with it) is one of the settings, as in the bot.
        client = await RunnerClient.embedded(RunnerConfig.from_env({**env, "RUNNER_TOKEN": TOKEN}))
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
    assert (info.backend, info.size, info.queue, info.details["startup_timeout_s"]) == ("sandbox", 3, 0, 150.0)
    assert (info.details["bwrap"], info.details["sandbox_uid"]) == (link, 63334)
    assert info.details["pids_limit_proven"] is True
    # The sandbox really runs through that bwrap: the launcher exec'd it in place, so its pid shows the path.
    argv = open(f"/proc/{info.details['zygote_pid']}/cmdline", "rb").read().split(b"\0")
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
async def test_jobs_run_as_uids_after_the_configured_sandbox_uid(embedded):
    client, _ = embedded
    r = await client.run("import os\nprint(os.getuid())")
    assert r.status == "ok"
    if os.geteuid() != 0:  # the uid setting applies when run as root
        assert r.stdout == f"{os.getuid()}\n"
        return
    # One uid per cgroup cell (4 per slot), in the first block after 63334 no other runner holds (uids.py).
    first, count = client.info.details["job_uids"]
    assert count == 4 * 3 and first > 63334 and (first - 63335) % count == 0
    assert first <= int(r.stdout) < first + count


@module_loop
async def test_no_secret_of_the_bot_reaches_the_embedded_runner(embedded):
    client, _ = embedded
    environ = open(f"/proc/{client._proc.pid}/environ", "rb").read()
    assert SECRET.encode() not in environ and b"TELEGRAM" not in environ
    # Nor its own secret: it serves a Unix socket, and RUNNER_TOKEN would stay in its environ while it runs.
    assert TOKEN.encode() not in environ and b"RUNNER_TOKEN" not in environ
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


def test_the_back_off_doubles_to_its_longest_pause_and_starts_over_when_reset():
    from runner.client import _Backoff

    backoff = _Backoff(1.0, 8.0, at_once=True)
    pauses = [backoff.pause() for _ in range(6)]
    assert pauses[0] == 0.0  # the first restart is at once
    for pause, ceiling in zip(pauses[1:], (1.0, 2.0, 4.0, 8.0, 8.0), strict=True):
        assert ceiling / 2 <= pause <= ceiling  # up to half shorter at random: clients spread out
    backoff.reset()
    assert backoff.pause() == 0.0
