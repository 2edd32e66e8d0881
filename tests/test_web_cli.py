"""Starting the course without a token: the web chat, as real processes; and `coursebot reload` from outside."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.test_cli import ROOT, clean_env

URL_LINE = "coursebot: the course is open in the web chat at "
START_TIMEOUT = 90  # seconds: the embedded runner imports torch before the bot starts


class Started:
    """A coursebot process and the lines it prints on stdout."""

    def __init__(self, process: subprocess.Popen[str]):
        self.process = process
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def line(self, timeout: float = START_TIMEOUT) -> str:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            # Say what the process was doing: stop it, then show its log (read only once it has ended).
            self.process.kill()
            self.process.wait(timeout=30)
            log = self.process.stderr.read()  # type: ignore[union-attr]
            raise AssertionError(f"no line on stdout in {timeout} s; its log:\n{log[-3000:]}") from None
        assert line is not None, f"the process ended (code {self.process.wait()}): {self.process.stderr.read()}"  # type: ignore[union-attr]
        return line


@contextmanager
def started(command: list[str], cwd: Path, **env: str) -> Iterator[Started]:
    process = subprocess.Popen(
        command, cwd=cwd, env=clean_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        yield Started(process)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            raise


def page(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        return response.read().decode()


def web_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "COURSEBOT_DB": str(tmp_path / "data" / "coursebot.sqlite3"),
        "COURSEBOT_WEB_PORT": "0",  # any free port: the test reads it from the printed line
        "COURSEBOT_RUNNER_URL": "off",
        **extra,
    }


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "bot"],
        [sys.executable, "-m", "bot", "run"],
        [str(Path(sys.executable).parent / "coursebot"), "run"],
    ],
    ids=["python -m bot", "python -m bot run", "coursebot run"],
)
def test_starting_without_a_token_opens_the_web_chat_and_says_how_to_use_telegram_instead(command, tmp_path):
    with started(command, ROOT, **web_env(tmp_path)) as bot:
        first, second = bot.line(), bot.line()
        assert first.startswith(URL_LINE + "http://127.0.0.1:")
        assert "@BotFather" in second and "TELEGRAM_BOT_TOKEN" in second
        assert '<div id="app">' in page(first.removeprefix(URL_LINE))
        bot.process.send_signal(signal.SIGTERM)
        assert bot.process.wait(timeout=30) == 0
        assert "Traceback" not in bot.process.stderr.read()  # type: ignore[union-attr]


def test_coursebot_web_opens_the_web_chat_even_with_a_token_and_sighup_reloads(tmp_path):
    env = web_env(tmp_path)
    with started([sys.executable, "-m", "bot", "web"], ROOT, TELEGRAM_BOT_TOKEN="123:NOT-USED", **env) as bot:
        first = bot.line()
        url = first.removeprefix(URL_LINE)
        assert '<div id="app">' in page(url)
        bot.process.send_signal(signal.SIGHUP)
        # A second reload over the control socket: reloads take turns, so both are done when it answers.
        asked = subprocess.run(
            [sys.executable, "-m", "bot", "reload"], cwd=ROOT, env=clean_env(**env), capture_output=True, text=True
        )
        assert asked.returncode == 0, asked.stderr
        assert '<div id="app">' in page(url)
        bot.process.send_signal(signal.SIGTERM)
        assert bot.process.wait(timeout=30) == 0
        log = bot.process.stderr.read()  # type: ignore[union-attr]
    assert bot.lines.get(timeout=5) is None  # with a token, no line about Telegram
    assert "content reloaded: edition 2" in log and "content reloaded: edition 3" in log


def test_reload_against_the_running_bot_and_with_none_running(tmp_path):
    env = web_env(tmp_path)
    refused = subprocess.run(
        [sys.executable, "-m", "bot", "reload"], cwd=ROOT, env=clean_env(**env), capture_output=True, text=True
    )
    assert refused.returncode == 1
    assert refused.stderr.strip().count("\n") == 0
    assert "no running coursebot answers at" in refused.stderr
    with started([sys.executable, "-m", "bot", "web"], ROOT, **env) as bot:
        bot.line()
        done = subprocess.run(
            [sys.executable, "-m", "bot", "reload"], cwd=ROOT, env=clean_env(**env), capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("edition 2: 4 lessons in 8 languages")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to clone the project")
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="make run starts the runner, whose sandbox needs bubblewrap")
def test_a_fresh_clone_make_run_without_a_token_serves_the_page_at_the_printed_address(tmp_path):
    clone = tmp_path / "coursebot"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    # Reuse this virtual environment instead of installing a second one: it is older than nothing the clone
    # changed, so make only compiles the catalogs and starts the bot from the clone's files.
    os.utime(clone / "pyproject.toml", (0, 0))
    with started(["make", "--no-print-directory", "run", f"VENV={sys.prefix}"], clone, COURSEBOT_WEB_PORT="0") as bot:
        line = bot.line()
        while not line.startswith(URL_LINE):  # make echoes its commands first
            line = bot.line()
        assert "@BotFather" in bot.line()
        assert '<div id="app">' in page(line.removeprefix(URL_LINE))


def test_a_port_in_use_is_one_line_naming_the_setting(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "bot", "web"],
            cwd=ROOT,
            env=clean_env(**web_env(tmp_path, COURSEBOT_WEB_PORT=str(port))),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert f"127.0.0.1:{port}" in line and "in use" in line and "COURSEBOT_WEB_PORT" in line
