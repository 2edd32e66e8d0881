"""The bot's own environment selects the runner's Docker backend: learners' code then runs in the job image,
on this machine's engine (built from this checkout), and a missing image stops the start in one line."""

from __future__ import annotations

import asyncio
import os
import sys

from bot.config import Config
from tests import engine
from tests.conftest import LESSONS, LOCALES, ROOT, running
from tests.journey import send_and_wait


def _env(standin, tmp_path, image: str) -> dict[str, str]:
    return {
        "TELEGRAM_BOT_TOKEN": standin.token,
        "TELEGRAM_API_BASE_URL": standin.api_base_url,
        "COURSEBOT_DB": str(tmp_path / "coursebot.sqlite3"),
        "COURSEBOT_LESSONS": str(LESSONS),
        "COURSEBOT_LOCALES": str(LOCALES),
        "RUNNER_BACKEND": "docker",
        "RUNNER_DOCKER_IMAGE": image,
    }


async def test_runner_backend_docker_in_the_bots_environment_runs_code_in_the_job_image(standin, tmp_path):
    config = Config.from_env(_env(standin, tmp_path, engine.image("job")))
    async with running(config):
        ada = standin.learner(user_id=9301)
        out = await send_and_wait(ada, "/run import os\nprint(2 + 2, os.getuid(), os.path.exists('/app'))", timeout=90)
        four, uid, app = out["text"].split()
        # Its slot's uid after RUNNER_SANDBOX_UID (runner/uids.py), never the host's nobody (65534) any more.
        assert (four, app) == ("4", "False") and 63333 < int(uid) < 63333 + 64 * 2, out["text"]


async def test_a_missing_job_image_stops_the_start_in_one_line(standin, tmp_path):
    engine.require_engine()
    env = {**os.environ, **_env(standin, tmp_path, "coursebot-job:no-such-tag"), "COURSEBOT_LOG_LEVEL": "WARNING"}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "run",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 120)
    lines = err.decode().strip().splitlines()
    assert process.returncode != 0 and len(lines) == 1, err.decode()
    assert "coursebot-job:no-such-tag is missing" in lines[0] and "--target job" in lines[0]
