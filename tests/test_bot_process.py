"""`coursebot run` as an operator starts it: a real process, its environment, its signals, its output."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import sys
from pathlib import Path

from tests.conftest import LESSONS, ROOT
from tests.journey import tap_and_wait_edit


def _env(standin, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELEGRAM_", "COURSEBOT_"))}
    env.update(
        TELEGRAM_BOT_TOKEN=standin.token,
        TELEGRAM_API_BASE_URL=standin.api_base_url,
        COURSEBOT_DB=str(tmp_path / "db" / "coursebot.sqlite3"),
        COURSEBOT_LOG_LEVEL="DEBUG",
        COURSEBOT_RUNNER="off",
    )
    env.update(extra)
    return env


async def _start(env: dict[str, str], *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *args,
        cwd=ROOT,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _finish(process: asyncio.subprocess.Process, timeout: float = 30) -> tuple[int, str]:
    _, stderr = await asyncio.wait_for(process.communicate(), timeout)
    return process.returncode, stderr.decode()


async def test_sigterm_stops_the_bot_and_closes_the_database_cleanly(standin, tmp_path):
    env = _env(standin, tmp_path)
    process = await _start(env, "run")
    ada = standin.learner(user_id=3001)
    try:
        since = ada.cursor()
        await ada.send("/start")
        menu = await ada.wait_message(since=since, timeout=30)
        await tap_and_wait_edit(ada, menu, "Start the course")
    finally:
        process.send_signal(signal.SIGTERM)
    code, log = await _finish(process)
    assert code == 0, log
    db = Path(env["COURSEBOT_DB"])
    assert db.is_file()
    # SQLite removes the WAL file when the last connection closes cleanly.
    assert not Path(f"{db}-wal").exists()
    assert "database is closed" in log
    assert standin.token not in log
    assert standin.token.split(":")[1] not in log
    assert "Traceback" not in log


async def test_python_dash_m_bot_starts_polling_like_coursebot_run(standin, tmp_path):
    process = await _start(_env(standin, tmp_path))
    try:
        await standin.wait_call("getUpdates", timeout=30)
    finally:
        process.send_signal(signal.SIGTERM)
    code, log = await _finish(process)
    assert code == 0, log


async def test_a_wrong_token_gives_one_line_and_never_shows_the_token(standin, tmp_path):
    wrong = "999999:WRONG-TOKEN-VALUE"
    env = _env(standin, tmp_path, TELEGRAM_BOT_TOKEN=wrong, COURSEBOT_LOG_LEVEL="WARNING")
    code, log = await _finish(await _start(env, "run"))
    assert code != 0
    lines = log.strip().splitlines()
    assert len(lines) == 1, log
    assert "refused TELEGRAM_BOT_TOKEN" in lines[0]
    assert "WRONG-TOKEN-VALUE" not in log


async def test_an_unreachable_bot_api_gives_one_line(tmp_path, standin):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = _env(standin, tmp_path, TELEGRAM_API_BASE_URL=f"http://127.0.0.1:{port}", COURSEBOT_LOG_LEVEL="WARNING")
    code, log = await _finish(await _start(env, "run"))
    assert code != 0
    lines = log.strip().splitlines()
    assert len(lines) == 1, log
    assert f"Cannot reach the Bot API at http://127.0.0.1:{port}" in lines[0]


async def test_invalid_lessons_refuse_the_start_with_lints_messages(standin, tmp_path):
    broken = tmp_path / "lessons"
    shutil.copytree(LESSONS, broken)
    path = broken / "en" / "01-requires-grad.yaml"
    path.write_text(path.read_text().replace("  - id: ", "  - id: Bad_Id ", 1))
    env = _env(standin, tmp_path, COURSEBOT_LESSONS=str(broken))
    code, log = await _finish(await _start(env, "run"))
    lint = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "lint", str(broken), cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE
    )
    lint_out, _ = await lint.communicate()
    assert code == 2
    assert lint.returncode == 2
    problems = lint_out.decode().strip().splitlines()
    assert problems and all(line.startswith(f"{path}:") for line in problems)
    for line in problems:
        assert line in log
    assert "Traceback" not in log
    assert standin.calls_to("getUpdates") == []


async def test_a_bad_setting_names_the_variable(standin, tmp_path):
    env = _env(standin, tmp_path, COURSEBOT_MAX_RETRIES="lots")
    code, log = await _finish(await _start(env, "run"))
    assert code == 2
    assert log.strip() == "coursebot: COURSEBOT_MAX_RETRIES must be a number, got 'lots'."
