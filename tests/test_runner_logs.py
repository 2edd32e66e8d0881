"""The runner's lines as text or JSON (COURSEBOT_LOG_FORMAT): its log, and its one READY or ERROR line."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from runner import logs
from tests.runner_cases.helpers import repo_root

FACTS = {"addresses": ["unix:///run/coursebot/runner.sock"], "backend": "sandbox", "size": 2}


@pytest.mark.parametrize("json_lines", [False, True], ids=["text", "json"])
def test_the_ready_and_error_lines_read_back_in_either_format(json_lines):
    assert logs.read(logs.ready(FACTS, json_lines)) == logs.Announcement(facts=FACTS)
    why = "no user namespaces: sysctl kernel.unprivileged_userns_clone=1"
    assert logs.read(logs.failed("SandboxUnavailable", why, json_lines)) == logs.Announcement(
        error=("SandboxUnavailable", why)
    )
    assert logs.read("some other line") is None and logs.read("{not json") is None


def test_in_json_the_ready_line_is_an_object_like_every_log_line():
    line = json.loads(logs.ready(FACTS, True))
    assert {"time", "level", "logger", "message"} <= set(line) and line["message"] == "READY"
    assert line["ready"] == FACTS
    record = logging.LogRecord("runner.pool", logging.WARNING, __file__, 1, "a slot %s", ("died",), None)
    assert json.loads(logs.JsonLines().format(record))["message"] == "a slot died"


def test_a_runner_that_cannot_start_says_so_in_one_json_line_when_asked_for_json():
    done = subprocess.run(
        [sys.executable, "-m", "runner", "serve", "--socket", "/tmp/never.sock"],
        env={**os.environ, "COURSEBOT_LOG_FORMAT": "json", "RUNNER_POOL": "none"},
        cwd=repo_root(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = (done.stdout + done.stderr).splitlines()
    assert len(lines) == 1, lines
    said = json.loads(lines[0])
    assert said["level"] == "ERROR" and said["error"]["type"] == "RunnerConfigError"
    assert "RUNNER_POOL" in said["message"]
