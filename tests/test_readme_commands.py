"""The README's container commands and compose.yaml agree with each other and with the code, and every command
is run by an engine test (tests/test_readme_docker.py, tests/test_compose.py, by the names in tests/readme.py).

No engine here: compose's own reading of its files (`docker-compose config`) is enough. The "For operators"
section's host command (the backup) runs here too, as written.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sqlite3
import subprocess
import sys

import pytest
import yaml

from bot.config import SETTINGS
from bot.storage.db import Database
from runner.config import SETTINGS as RUNNER_SETTINGS
from tests import readme
from tests.conftest import ROOT

ENGINE_TESTS = ("test_readme_docker.py", "test_compose.py")
needs_compose = pytest.mark.skipif(
    shutil.which("docker-compose") is None, reason="needs docker-compose (apt-get install -y docker-compose)"
)


def test_every_command_block_has_one_name_and_an_engine_test_runs_each():
    named = {name: readme.command(name) for name in readme.COMMANDS}  # each name finds exactly one block
    assert sorted(named.values()) == sorted(readme.blocks()), "a ```sh block no name in tests/readme.py finds"
    run = "".join((ROOT / "tests" / test).read_text() for test in ENGINE_TESTS)
    for name in readme.COMMANDS:
        assert f'"{name}"' in run, f"no engine test runs the README's {name!r} command"


def test_the_compose_commands_work_with_both_compose_versions_as_the_readme_says():
    text = readme.sections()
    assert "docker compose " not in text.replace("`docker compose` (v2) takes the same arguments", "")
    assert "`docker compose` (v2) takes the same arguments" in text
    for block in readme.blocks():
        for line in block.splitlines():
            if line.startswith("docker-compose "):
                # Options both versions share; exec without a terminal (-T) runs from a script as well.
                assert not re.search(r"--(compatibility|no-ansi|project-directory)", line), line


def _config(env: dict[str, str], *files: str) -> dict:
    args = [arg for f in files or ("compose.yaml",) for arg in ("-f", f)]
    done = subprocess.run(
        ["docker-compose", *args, "config"], cwd=ROOT, env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return yaml.safe_load(done.stdout)


@needs_compose
def test_every_documented_variable_reaches_the_container_that_reads_it():
    # Each variable of the README's table set to a value of its own, as in .env or the shell.
    documented = {s.variable for s in SETTINGS} | {s.variable for s in RUNNER_SETTINGS}
    values = {variable: f"value-of-{variable}" for variable in documented}
    services = _config(values)["services"]
    bot, runner = services["bot"]["environment"], services["runner"]["environment"]
    fixed = {"COURSEBOT_RUNNER_URL": "unix:///run/coursebot/runner.sock"}  # the socket the two share
    secrets = {"RUNNER_TOKEN"}  # a socket needs no token: none is handed to either container
    for variable in documented - set(fixed) - secrets:
        reader = runner if variable.startswith(("RUNNER_", "DOCKER_")) else bot
        assert reader.get(variable) == values[variable], variable
    assert {v: bot[v] for v in fixed} == fixed
    assert not secrets & (set(bot) | set(runner))
    assert "TELEGRAM_BOT_TOKEN" not in runner and runner["COURSEBOT_LOG_FORMAT"] == values["COURSEBOT_LOG_FORMAT"]


@needs_compose
def test_unset_the_image_keeps_its_own_values_and_the_rest_their_defaults():
    bot = _config({})["services"]["bot"]["environment"]
    image_env = dict(re.findall(r"^\s+(COURSEBOT_\w+)=(\S+?)(?: \\)?$", (ROOT / "Dockerfile").read_text(), re.M))
    assert image_env, "the Dockerfile sets the image's COURSEBOT_* in one ENV"
    for variable, value in image_env.items():
        assert bot[variable] == value, variable
    assert all(bot[v] in ("", None) for v in bot if v not in image_env and v != "COURSEBOT_RUNNER_URL"), bot


@needs_compose
def test_docker_run_and_compose_keep_the_learners_in_one_volume_by_one_name():
    volumes = _config({})["volumes"]
    assert volumes["coursebot-data"]["name"] == "coursebot-data"
    assert "-v coursebot-data:/data coursebot" in readme.command("run")
    assert "coursebot-data:/data" in _config({})["services"]["bot"]["volumes"][0]


@needs_compose
def test_the_monitoring_switch_publishes_the_port_on_loopback_unless_told_otherwise():
    assert "ports" not in _config({})["services"]["bot"]
    switched = _config({}, "compose.yaml", "compose.monitoring.yaml")["services"]["bot"]
    assert switched["ports"] == ["127.0.0.1:9464:9464/tcp"]
    elsewhere = _config({"COURSEBOT_MONITORING_PUBLISH": "10.0.0.5:9500"}, "compose.yaml", "compose.monitoring.yaml")
    assert elsewhere["services"]["bot"]["ports"] == ["10.0.0.5:9500:9464/tcp"]
    assert "COMPOSE_FILE=compose.yaml:compose.monitoring.yaml" in readme.command("monitoring")


async def test_the_operators_backup_command_runs_as_written_on_a_live_database(tmp_path):
    """The "For operators" section's backup command, in a folder with a database (COURSEBOT_DB, as configured)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    operators = text[text.index("## For operators") : text.index("### Running learners' code")]
    (block,) = [b for b in re.findall(r"```sh\n(.*?)```", operators, re.S) if "db backup" in b]
    db = await Database.open(tmp_path / "data" / "coursebot.sqlite3")
    try:
        env = {**os.environ, "COURSEBOT_DB": str(tmp_path / "data" / "coursebot.sqlite3")}
        env["PATH"] = f"{os.path.dirname(sys.executable)}{os.pathsep}{env['PATH']}"  # the venv's coursebot
        process = await asyncio.create_subprocess_exec(
            "sh", "-e", "-c", block.strip(), cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await process.communicate()
    finally:
        await db.close()
    assert process.returncode == 0, out.decode()
    (copy,) = (tmp_path / "backups").glob("coursebot-*.sqlite3")
    with sqlite3.connect(copy) as backup:
        assert backup.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    backup.close()
