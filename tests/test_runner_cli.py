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


def test_a_bad_setting_stops_serve_with_one_line_naming_it():
    p = subprocess.run(
        [sys.executable, "-m", "runner", "serve", "--socket", "/tmp/never.sock"],
        capture_output=True,
        text=True,
        cwd=repo_root(),
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "RUNNER_POOL": "two"},
    )
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stdout.splitlines() == [
        "ERROR RunnerConfigError: RUNNER_POOL (jobs run at once) must be a whole number of at least 1, got 'two'; "
        "unset it for the default (2)"
    ]


def test_a_bad_flag_is_refused_by_name():
    p = run_cli("exec", "--startup-timeout", "nan", os.path.join(CASES, "hello.py"), timeout=60)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "--startup-timeout" in p.stderr and "finite number of seconds" in p.stderr


def test_a_flag_overrides_its_variable():
    p = subprocess.run(
        [sys.executable, "-m", "runner", "exec", "--bwrap", "/nonexistent/bwrap", os.path.join(CASES, "hello.py")],
        capture_output=True,
        text=True,
        cwd=repo_root(),
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "RUNNER_BWRAP": "/usr/bin/bwrap"},
    )
    assert p.returncode == 2 and "apt-get install -y bubblewrap" in p.stderr


def test_a_missing_file_is_one_line_not_a_traceback():
    missing = os.path.join(CASES, "no-such-file.py")
    p = run_cli("exec", missing, timeout=60)
    assert p.returncode == 2
    assert p.stderr.strip() == f"runner: RunnerConfigError: cannot read {missing}: No such file or directory"


def test_serve_refuses_a_malformed_listen_address():
    p = run_cli("serve", "--listen", "http://127.0.0.1:80", timeout=30)
    assert p.returncode == 2 and p.stdout.startswith("ERROR RunnerConfigError: --listen must be")


def test_the_backend_serve_builds_has_every_setting():
    from runner.__main__ import make_backend
    from runner.config import RunnerConfig

    docker = make_backend(RunnerConfig.from_env({"RUNNER_BACKEND": "docker", "RUNNER_POOL": "3", "RUNNER_QUEUE": "5"}))
    assert (docker.stats()["size"], docker.stats()["queue"]) == (3, 5)
    pool = make_backend(RunnerConfig.from_env({"RUNNER_POOL": "4", "RUNNER_QUEUE": "6", "RUNNER_BWRAP": "/opt/bwrap"}))
    assert {k: pool.stats()[k] for k in ("backend", "size", "queue", "bwrap")} == {
        "backend": "sandbox",
        "size": 4,
        "queue": 6,
        "bwrap": "/opt/bwrap",
    }


def test_exec_with_more_files_than_slots_and_queue_queues_them_and_answers_each_in_order(tmp_path):
    require_sandbox()
    files = []
    for i in range(45):  # the default pool (2) and queue (32) hold 34 at once
        path = tmp_path / f"job{i:02}.py"
        path.write_text(f"print({i} * 3)\n")
        files.append(str(path))
    p = run_cli("exec", "--json", *files)
    assert "Traceback" not in p.stderr and p.stderr == "", p.stderr
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    assert [(x["status"], x["stdout"]) for x in lines] == [("ok", f"{i * 3}\n") for i in range(45)]
    assert p.returncode == 0


def test_serve_on_tcp_without_a_token_refuses_to_start_before_importing_torch():
    p = run_cli("serve", "--listen", "tcp://127.0.0.1:0", timeout=30)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stdout.startswith("ERROR RunnerConfigError: --listen needs RUNNER_TOKEN")
