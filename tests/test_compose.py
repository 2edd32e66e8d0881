"""compose.yaml on a real engine (docker-compose, as Debian ships it): a network-less runner, an
unprivileged bot reaching the stand-in on the host's network, a socket only they share."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.engine import docker, image, unique
from tests.journey import send_and_wait

pytestmark = pytest.mark.skipif(
    shutil.which("docker-compose") is None, reason="needs docker-compose (apt-get install -y docker-compose)"
)


def _compose(project: str) -> list[str]:
    return ["docker-compose", "-p", project, "-f", "compose.yaml", "-f", "tests/fixtures/compose.test.yaml"]


def _env(api_base_url: str, token: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TELEGRAM_BOT_TOKEN"}
    env.update(COURSEBOT_TEST_IMAGE=image(), COURSEBOT_TEST_API=api_base_url)
    if token is not None:
        env["TELEGRAM_BOT_TOKEN"] = token
    return env


async def test_compose_up_runs_code_in_a_network_less_runner_and_logs_and_down_need_no_token(standin):
    project = unique("coursebottest")
    compose = _compose(project)
    code, out, err = await docker(*compose, "up", "-d", "--no-build", env=_env(standin.api_base_url, standin.token))
    try:
        assert code == 0, out + err
        # The bot starts only once the runner is healthy: it polls, and its first /run works.
        await standin.wait_call("getUpdates", timeout=240)
        ada = standin.learner(user_id=8001)
        assert (await send_and_wait(ada, "/run print(2+2)", timeout=60))["text"].strip() == "4"

        runner, bot = f"{project}_runner_1", f"{project}_bot_1"
        _, network, _ = await docker("docker", "inspect", "--format", "{{.HostConfig.NetworkMode}}", runner)
        assert network.strip() == "none"
        _, health, _ = await docker("docker", "inspect", "--format", "{{.State.Health.Status}}", runner)
        assert health.strip() == "healthy"
        # The socket: the image's user owns it and its folder, nobody else may use either.
        _, listing, _ = await docker(
            "docker", "exec", bot, "stat", "-c", "%U %a %F", "/run/coursebot", "/run/coursebot/runner.sock"
        )
        assert listing.split("\n")[:2] == ["coursebot 700 directory", "coursebot 600 socket"], listing
        _, env, _ = await docker("docker", "exec", runner, "cat", "/proc/1/environ")
        assert standin.token not in env and "TELEGRAM_BOT_TOKEN" not in env

        no_token = _env(standin.api_base_url, None)
        code, out, err = await docker(*compose, "logs", "--no-color", env=no_token)
        assert code == 0 and "READY" in out and "coursebot is polling" in out, out + err
        assert standin.token not in out
    finally:
        code, out, err = await docker(*compose, "down", "--volumes", env=_env(standin.api_base_url, None))
    assert code == 0, out + err
    _, left, _ = await docker("docker", "ps", "-a", "--filter", f"label=com.docker.compose.project={project}", "-q")
    assert left.strip() == ""
