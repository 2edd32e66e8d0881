"""`python -m runner exec` through one warm pool."""

import json
import os
import subprocess
import sys

from tests.runner_cases.helpers import repo_root, require_sandbox

CASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner_cases")


def run_cli(*args, timeout=180):
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        capture_output=True,
        text=True,
        cwd=repo_root(),
        timeout=timeout,
        env={"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"},
    )


def test_exec_json_one_line_per_file_in_order():
    require_sandbox()
    files = [os.path.join(CASES, n) for n in ("hello.py", "autograd.py", "boom.py", "hello.py")]
    p = run_cli("exec", "--json", *files)
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    assert [x["status"] for x in lines] == ["ok", "ok", "error", "ok"]
    assert lines[0]["stdout"] == "hello\n" and lines[1]["stdout"] == "tensor([2., 4., 6.])\n"
    assert "ValueError: boom" in lines[2]["stderr"] and lines[2]["exit_code"] == 1
    for x in lines:
        assert list(x) == ["status", "stdout", "stderr", "exit_code", "signal", "duration_ms", "truncated"]
    assert p.returncode == 1  # one job was not ok


def test_exec_human_output():
    require_sandbox()
    p = run_cli("exec", os.path.join(CASES, "hello.py"))
    assert p.returncode == 0
    assert "hello.py: ok (exit 0" in p.stdout and "\nhello\n" in p.stdout


def test_serve_refuses_without_address():
    p = run_cli("serve", timeout=30)
    assert p.returncode == 2 and p.stdout.startswith("ERROR InvalidRequest")


def test_missing_bwrap_refuses_to_start():
    p = subprocess.run(
        [sys.executable, "-m", "runner", "exec", os.path.join(CASES, "hello.py")],
        capture_output=True,
        text=True,
        cwd=repo_root(),
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "RUNNER_BWRAP": "/nonexistent/bwrap"},
    )
    assert p.returncode == 2
    assert "apt-get install -y bubblewrap" in p.stderr
