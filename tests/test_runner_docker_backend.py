"""The Docker backend: the container it asks for (no engine needed) and, when an
engine is reachable, a real job."""

import asyncio
import dataclasses
import subprocess
import sys
import tempfile

import pytest

from runner import docker_backend as D
from runner import grading
from runner.backend import classify
from runner.config import RunnerConfig
from runner.errors import InvalidRequest, SandboxUnavailable
from runner.limits import Limits

DOCKER = D.DockerConfig.from_config(RunnerConfig(backend="docker"))


def cfg(**kw):
    return D.container_config("print(1)", Limits(**kw) if kw else Limits(), DOCKER, seed=7)


def test_container_is_locked_down():
    c = cfg()
    assert c["network_mode"] == "none" and c["network_disabled"] is True
    assert c["read_only"] is True
    assert c["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in c["security_opt"]
    assert c["user"] not in ("root", "0", "0:0") and not c["user"].startswith("0:")
    assert set(c["tmpfs"]) == {"/sandbox", "/tmp", "/dev/shm"}
    assert c["working_dir"] == "/sandbox"
    assert c["ipc_mode"] == "none"
    assert "TELEGRAM_BOT_TOKEN" not in c["environment"]


def test_limits_are_mapped():
    c = cfg(
        memory_bytes=100 * 2**20,
        max_processes=9,
        cpu_time_s=2.5,
        file_size_bytes=1000,
        open_files=50,
        tmpfs_bytes=4096 * 16,
    )
    assert c["mem_limit"] == c["memswap_limit"] == 100 * 2**20
    assert c["pids_limit"] == 9
    ul = {u["name"]: (u["soft"], u["hard"]) for u in c["ulimits"]}
    assert ul["cpu"] == (3, 4) and ul["fsize"] == (1000, 1000) and ul["nofile"] == (50, 50)
    assert ul["core"] == (0, 0)
    assert "size=65536" in c["tmpfs"]["/tmp"]


def test_code_and_seed_travel_in_argv():
    c = cfg()
    assert c["command"][-2:] == ["print(1)", "7"]
    assert c["command"][:2] == ["python3", "-I"]


@pytest.mark.parametrize(
    "args,status",
    [
        ((0, False, False, False, ""), "ok"),
        ((1, False, False, False, "Traceback\nValueError: x"), "error"),
        ((1, False, False, False, "MemoryError"), "memory_limit"),
        ((137, True, False, False, ""), "memory_limit"),
        ((137, False, False, False, ""), "killed"),
        ((152, False, False, False, ""), "timeout"),
        ((None, False, True, False, ""), "timeout"),
        ((0, False, False, True, ""), "output_limit"),
    ],
)
def test_what_docker_reports_gets_the_sandbox_backends_status(args, status):
    assert classify(D.job_end(*args), Limits()) == status


def test_a_signal_shows_as_a_signal_not_an_exit_code():
    end = D.job_end(137, False, False, False, "")
    assert (end.exit_code, end.signal) == (None, 9)
    end = D.job_end(3, False, False, False, "")
    assert (end.exit_code, end.signal) == (3, None)


def test_its_config_comes_from_the_runner_config():
    runner = RunnerConfig.from_env(
        {"RUNNER_DOCKER_IMAGE": "img:1", "DOCKER_HOST": "unix:///x", "RUNNER_POOL": "3", "RUNNER_QUEUE": "5"}
    )
    c = D.DockerConfig.from_config(runner)
    assert (c.image, c.base_url, c.pool_size, c.queue) == ("img:1", "unix:///x", 3, 5)
    b = D.DockerBackend(c)
    assert {k: b.stats()[k] for k in ("size", "queue", "image", "docker_host")} == {
        "size": 3,
        "queue": 5,
        "image": "img:1",
        "docker_host": "unix:///x",
    }


async def test_checks_of_the_wrong_type_are_refused():
    b = D.DockerBackend(DOCKER)
    b.client = object()
    with pytest.raises(InvalidRequest):
        await b.run("x", checks=object())


# Graded jobs. The program the container runs is run here directly (no engine needed): what is
# under test is the report it leaves after the learner's stderr and the verdict made outside.

CHECKS = grading.ExerciseChecks(
    (
        grading.Check(id="grad-value", expr="x.grad", kind="close", expect=4.0),
        grading.Check(id="grads", expr="grads", kind="close", expect=[4.0, 4.0]),
    )
)
SOLUTION = """import torch
x = torch.tensor(2.0, requires_grad=True)
grads = []
for step in range(2):
    x.grad = None
    (x ** 2).backward()
    grads.append(x.grad.item())
import sys; print("some stderr", file=sys.stderr)
"""


def _container_program(code: str) -> tuple[bytes, bytes | None, str]:
    nonce = grading.new_nonce()
    command = D.container_config(
        code, Limits(), dataclasses.replace(DOCKER, python=sys.executable), 1, grading.job_spec(CHECKS, nonce)
    )["command"]
    done = subprocess.run(command, capture_output=True, timeout=120, cwd=tempfile.gettempdir())
    assert D.BOOT in command and done.returncode in (0, 1)
    stderr, report = D.split_report(done.stderr)
    return stderr, report, nonce


def test_split_report_needs_exactly_one_marker():
    marker = D.REPORT_MARKER.encode()
    assert D.split_report(b"oops\n" + marker + b"{}") == (b"oops", b"{}")
    assert D.split_report(b"no report") == (b"no report", None)
    assert D.split_report(marker + b"{}" + b"\n" + marker + b"{}")[1] is None


def test_a_graded_container_job_reports_values_the_runner_grades_outside():
    stderr, report, nonce = _container_program(SOLUTION)
    assert stderr == b"some stderr\n"  # exactly what the learner wrote
    outcomes, passed = grading.verify(CHECKS, "ok", report, nonce)
    assert passed and [o.passed for o in outcomes] == [True, True]
    assert b"4.0" in report and b"expect" not in report  # values travel out, expectations never in


def test_a_wrong_answer_in_a_container_fails_its_check():
    _stderr, report, nonce = _container_program(SOLUTION.replace("    x.grad = None\n", ""))
    outcomes, passed = grading.verify(CHECKS, "ok", report, nonce)
    assert not passed and [o.passed for o in outcomes] == [False, False]


@pytest.mark.parametrize(
    "cheat",
    [
        'import sys; print("PASSED")',
        'import sys; sys.stderr.write("\\n" + sys.argv[4]); sys.stderr.flush()\n' + SOLUTION,
        "import os\nos._exit(0)",
    ],
)
def test_cheating_in_a_container_never_passes(cheat):
    _stderr, report, nonce = _container_program(cheat)
    assert not grading.verify(CHECKS, "ok", report, nonce)[1]


async def test_real_engine():
    b = D.DockerBackend(DOCKER)
    try:
        await asyncio.wait_for(b.start(), 10)
    except (TimeoutError, SandboxUnavailable):
        pytest.skip("no Docker engine reachable")
    try:
        r = await b.run("print(6 * 7)")
        assert r.status == "ok" and r.stdout == "42\n"
        r = await b.run("import socket; socket.create_connection(('127.0.0.1', 9), timeout=1)")
        assert r.status == "error"
        r = await b.run(SOLUTION, checks=CHECKS)  # needs an image with the runner: the project's own
        assert r.passed and r.stderr == "some stderr\n"
        r = await b.run('print("PASSED")', checks=CHECKS)
        assert not r.passed
    finally:
        await b.close()
