"""The README's "Docker" and "Operating it" commands for one container, run as written on a real engine.

One story, in the order an operator lives it: build both images (at the sizes the README states), start the bot
as the README does, a learner takes a lesson and runs code (a fork bomb and a memory hog stay in their job; every
process is uid 10001 with no capabilities), the runner inside is killed with `kill -9` while code runs (that
learner is told to send it again, and code runs again, no restart), a backup as `docker exec` runs it, the logs,
an upgrade that keeps the progress, a move to a fresh volume, `docker stop`. Then the Docker backend's command and
the web chat's. The bot reaches the Bot API stand-in on a network of the test's own (tests/readme.py, tests/shims).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import sqlite3

import pytest
import pytest_asyncio

from tests import engine, readme
from tests.conftest import course_content
from tests.journey import answer_quiz, button_texts, read_slides, send_and_wait, tap_and_wait_edit
from tests.standin import BotApiStandin

COURSE = course_content().english
# The first start imports torch and proves the sandbox's isolation inside the container.
START_S = 180
MONITORING_PORT = 9464  # the image's COURSEBOT_MONITORING
module = pytest.mark.asyncio(loop_scope="module")
pytestmark = module


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def net():
    async with engine.network() as network:
        yield network


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(net):
    async with BotApiStandin(token=readme.TOKEN, host=net.gateway) as standin:
        yield standin


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sh(net, api):
    names = readme.Names(
        containers={"coursebot": engine.unique("coursebot-test"), "coursebot-preview": engine.unique("coursebot-test")},
        volumes={"coursebot-data": engine.unique("coursebot-test-data"), "coursebot-preview": engine.unique("cbt")},
        images={"coursebot": engine.image(), "coursebot-job": engine.image("job")},
        ports={"127.0.0.1:8080": f"127.0.0.1:{_free_port()}"},
    )
    flags = ["--network", net.name, "-e", f"TELEGRAM_API_BASE_URL={api.api_base_url}"]
    async with readme.shell(names, flags, engine.unique("coursebottest")) as shell:
        shell.env["TELEGRAM_BOT_TOKEN"] = readme.TOKEN  # export TELEGRAM_BOT_TOKEN=..., as the README says
        yield shell
        for container in names.containers.values():
            await engine.docker("docker", "rm", "-f", "-v", container)
        for volume in {*names.volumes.values(), *_moved}:
            await engine.docker("docker", "volume", "rm", "-f", volume)


_moved: list[str] = []  # volumes the move to "another host" made


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _bot(sh) -> str:
    return sh.names.containers["coursebot"]


async def _start(sh, api, block: str = "run") -> None:
    api.clear_calls()
    code, out = await sh.run(block)
    assert code == 0, out
    await api.wait_call("getUpdates", timeout=START_S)


async def _metrics(sh, net) -> str:
    status, text = await engine.http_get(await engine.container_ip(_bot(sh), net.name), MONITORING_PORT, "/metrics")
    assert status == 200
    return text


def _verdict(message: dict) -> bool:
    return "Not yet" in message.get("text", "") or "checks passed" in message.get("text", "")


# --- building ----------------------------------------------------------------------------------------------------


async def test_the_build_commands_make_the_images_the_readme_runs_at_the_sizes_it_states(sh):
    code, out = await sh.run("build")
    assert code == 0, out
    build = readme.command("build")
    built = dict(re.findall(r"^docker build -t (\S+) .*?: ([\d.]+) GB", build, re.MULTILINE))
    # The names the README's other commands use are the ones these commands build.
    assert set(built) == {"coursebot", "coursebot-job"}
    assert re.findall(r" (coursebot\S*)\n", readme.command("run")) == ["coursebot"]
    assert "RUNNER_DOCKER_IMAGE=coursebot-job" in readme.command("docker backend")
    from runner.client import RunnerConfig

    assert RunnerConfig().docker_image == "coursebot-job"
    for name, stated in built.items():
        _, size, _ = await engine.docker("docker", "image", "inspect", "--format", "{{.Size}}", sh.names.images[name])
        gigabytes = int(size) / 1e9
        assert f"{gigabytes:.2f}" == stated, f"README says {name} is {stated} GB; it is {gigabytes:.3f} GB"
    torch = re.search(r"torch ([\d.]+) GB of it", build)
    assert torch is not None
    assert f"{await _bytes(sh.names.images['coursebot'], 'torch') / 1e9:.2f}" == torch.group(1)
    # "all but under 1 MB shared": one layer of the job image is its own, the runner package, under 1 MB.
    layers = {}
    for name in ("coursebot", "coursebot-job"):
        _, out, _ = await engine.docker(
            "docker", "image", "inspect", "--format", "{{json .RootFS.Layers}}", sh.names.images[name]
        )
        layers[name] = json.loads(out)
    own = [layer for layer in layers["coursebot-job"] if layer not in layers["coursebot"]]
    assert len(own) == 1 and "under 1 MB shared" in build, own
    assert await _bytes(sh.names.images["coursebot-job"], "runner") < 1e6


async def _bytes(image: str, package: str) -> int:
    """The size of a package in an image's venv, in bytes."""
    code, out, err = await engine.run_once(
        "--entrypoint", "du", image, "-sb", f"/opt/venv/lib/python3.11/site-packages/{package}"
    )
    assert code == 0, err
    return int(out.split()[0])


# --- one container, as the README runs it ------------------------------------------------------------------------


async def test_the_readme_container_serves_a_learner_who_reads_answers_runs_code_and_is_graded(sh, api, net):
    await _start(sh, api)
    ada = api.learner(user_id=7001)
    lesson = COURSE.lessons[0]
    menu = await send_and_wait(ada, "/start")
    slide = await tap_and_wait_edit(ada, menu, "Start the course")
    last = await read_slides(ada, slide, lesson)
    result = await answer_quiz(ada, last, lesson)
    assert f"{len(lesson.quiz)} of {len(lesson.quiz)} correct" in result["text"]
    assert (await send_and_wait(ada, "/run print(2+2)", timeout=60))["text"].strip() == "4"
    since = ada.cursor()
    await ada.tap(result, callback_data=f"p:{lesson.id}")
    await ada.wait_message(lambda m: "Practice" in m.get("text", ""), since=since, timeout=30)
    failed = await send_and_wait(ada, lesson.exercise.starter, _verdict, timeout=60)
    assert "Not yet" in failed["text"]
    passed = await send_and_wait(ada, lesson.exercise.solution, _verdict, timeout=60)
    assert "All checks passed" in passed["text"]
    assert any(t.startswith("Next") for t in button_texts(passed)) or passed["text"]

    # What the session left in /metrics and /healthz, asked from outside the container.
    metrics = await _metrics(sh, net)
    assert engine.metric(metrics, 'coursebot_runner_jobs_total{outcome="ok"}') == 3  # /run, the failing try, the pass
    assert engine.metric(metrics, 'coursebot_updates_total{kind="poll_answer"}') == len(lesson.quiz)
    assert engine.metric(metrics, "coursebot_update_errors_total") == 0
    assert engine.metric(metrics, "coursebot_runner_busy_slots") == 0
    status, health = await engine.http_get(await engine.container_ip(_bot(sh), net.name), MONITORING_PORT, "/healthz")
    assert status == 200 and json.loads(health)["checks"] == {"database": "ok", "runner": "ok", "telegram": "ok"}
    # The image's healthcheck, as Docker runs it: it finds the container's role (the bot) by itself.
    assert (await engine.docker("docker", "exec", _bot(sh), "/usr/local/bin/coursebot-healthcheck"))[0] == 0


async def test_a_fork_bomb_and_a_memory_hog_stay_inside_their_job_in_the_container(sh, api):
    ada = api.learner(user_id=7002)
    # A bounded fork loop (never a real bomb): 200 tries, each child waits; the job's limit is 32 tasks.
    forks = await send_and_wait(
        ada,
        "/run import os, time\nkids = 0\nfor _ in range(200):\n    try:\n        pid = os.fork()\n"
        "    except OSError:\n        continue\n    if pid == 0:\n        time.sleep(2)\n        os._exit(0)\n"
        "    kids += 1\nprint(kids)",
        timeout=60,
    )
    assert 0 < int(forks["text"].split()[0]) < 32, forks["text"]
    hog = await send_and_wait(ada, "/run x = bytearray(2 * 1024**3)\nprint(len(x))", timeout=60)
    assert "more than 512 MB of memory" in hog["text"], hog["text"]
    after = await send_and_wait(ada, "/run print('still here')", timeout=60)
    assert after["text"].strip() == "still here"


async def test_the_bot_and_runner_run_as_uid_10001_with_no_capabilities_left(sh):
    root = await engine.host_pid(_bot(sh))
    status = engine.process_status([root, *engine.descendants(root)])
    # tini, the bot and the runner service: uid 10001, no capabilities, no way to gain any. The sandbox's own
    # processes hold two capabilities, but only inside their own user namespace.
    container_userns = status[root]["userns"]
    outside = {pid: fields for pid, fields in status.items() if fields["userns"] == container_userns}
    assert len(outside) >= 3 and len(status) > len(outside)
    for pid, fields in status.items():
        assert fields["Uid"].split()[:2] == ["10001", "10001"], (pid, fields)
        assert fields["NoNewPrivs"] == "1", (pid, fields)
    for pid, fields in outside.items():
        assert int(fields["CapEff"], 16) == 0 and int(fields["CapBnd"], 16) == 0, (pid, fields)


async def _runner_pid(container: str) -> int:
    root = await engine.host_pid(container)
    found = [
        pid
        for pid in engine.descendants(root)
        if engine.command_line(pid)[1:5] == ["-m", "runner", "serve", "--socket"]
    ]
    assert len(found) == 1, found
    return found[0]


async def test_kill_9_of_the_runner_in_the_container_costs_the_running_job_a_try_again_and_code_runs_again(
    sh, api, net
):
    ada = api.learner(user_id=7003)
    killed = await _runner_pid(_bot(sh))
    since = ada.cursor()
    await ada.send("/run import time\ntime.sleep(30)\nprint('never printed')")
    for _ in range(600):  # until the runner holds the job (the bot asks it when /metrics is read)
        if engine.metric(await _metrics(sh, net), "coursebot_runner_busy_slots") >= 1:
            break
        await asyncio.sleep(0.1)
    os.kill(killed, signal.SIGKILL)
    lost = await ada.wait_message(lambda m: "send it again" in m.get("text", ""), since=since, timeout=30)
    assert "restarted" in lost["text"]
    out = await send_and_wait(ada, "/run print(6 * 7)", timeout=120)
    assert out["text"].strip() == "42"
    assert await _runner_pid(_bot(sh)) != killed
    # The bot itself never restarted: the same container, started once.
    _, restarts, _ = await engine.docker("docker", "inspect", "--format", "{{.RestartCount}}", _bot(sh))
    assert restarts.strip() == "0"


async def test_a_backup_as_docker_exec_runs_it_comes_out_with_the_learners_and_stays_the_bots(sh):
    code, out = await sh.run("backup")
    assert code == 0, out
    assert out.count("\n") <= 2 and "Traceback" not in out, out
    copies = list(sh.folder.glob("coursebot-*.sqlite3"))
    assert len(copies) == 1
    with sqlite3.connect(copies[0]) as db:
        assert db.execute("SELECT count(*) FROM learners WHERE user_id = 7001").fetchone() == (1,)
    db.close()
    _, owner, _ = await engine.docker(
        "docker", "exec", "--user", "10001", _bot(sh), "stat", "-c", "%u", "/data/backup.sqlite3"
    )
    assert owner.strip() == "10001"  # root ran the command; the file is the bot's


async def test_the_logs_hold_no_token_and_no_traceback(sh):
    code, logs = await sh.run("logs")
    assert code == 0 and "coursebot is polling" in logs
    assert readme.TOKEN not in logs and "Traceback" not in logs, logs


async def test_an_upgrade_as_the_readme_does_it_keeps_the_learners_progress(sh, api):
    code, out = await sh.run("upgrade")
    assert code == 0, out
    await _start(sh, api)
    ada = api.learner(user_id=7001)
    progress = await send_and_wait(ada, "/progress")
    assert "1 of 4 exercises passed" in progress["text"], progress["text"]


async def test_a_move_to_a_fresh_volume_as_the_readme_does_it_keeps_the_learners_progress(sh, api):
    backup = next(sh.folder.glob("coursebot-2*.sqlite3"))
    shutil.copy(backup, sh.folder / "coursebot-2026-12-01.sqlite3")  # the file the README's command restores
    assert (await engine.docker("docker", "rm", "-f", _bot(sh)))[0] == 0
    # Another host: its own volume by the same name.
    sh.names.volumes["coursebot-data"] = engine.unique("coursebot-test-moved")
    _moved.append(sh.names.volumes["coursebot-data"])
    code, out = await sh.run("move")
    assert code == 0, out
    await _start(sh, api)
    progress = await send_and_wait(api.learner(user_id=7001), "/progress")
    assert "1 of 4 exercises passed" in progress["text"], progress["text"]


async def test_docker_stop_exits_0_within_10_s(sh):
    started = asyncio.get_running_loop().time()
    code, out = await sh.run("stop")
    took = asyncio.get_running_loop().time() - started
    assert code == 0, out
    _, exit_code, _ = await engine.docker("docker", "inspect", "--format", "{{.State.ExitCode}}", _bot(sh))
    assert exit_code.strip() == "0" and took < 10, (exit_code, took)
    _, logs = await sh.run("logs")
    assert "database is closed" in logs


# --- the Docker backend's command, and the web chat's ------------------------------------------------------------


async def test_the_docker_backends_command_runs_code_in_the_job_image(sh, api):
    await engine.docker("docker", "rm", "-f", _bot(sh))
    await _start(sh, api, "docker backend")
    ada = api.learner(user_id=7010)
    out = await send_and_wait(ada, "/run import os\nprint(2 + 2, os.getuid(), os.path.exists('/app'))", timeout=120)
    # A job runs as its slot's host uid (README: the first RUNNER_POOL uids after RUNNER_SANDBOX_UID, 63333 by
    # default; the pool is 2), no host process's and not nobody's, which any other container may run as.
    two_plus_two, uid, app = out["text"].split()
    assert (two_plus_two, app) == ("4", "False") and uid in ("63334", "63335"), out["text"]
    await engine.docker("docker", "rm", "-f", _bot(sh))


async def test_the_web_chat_runs_only_when_asked_for_and_answers_on_its_published_port(sh):
    code, out = await sh.run("web chat")
    assert code == 0, out
    host, port = sh.names.ports["127.0.0.1:8080"].split(":")
    for _ in range(int(START_S / 0.5)):
        try:
            status, page = await engine.http_get(host, int(port), "/")
            break
        except (OSError, IndexError, ValueError):
            await asyncio.sleep(0.5)
    else:
        raise AssertionError(await engine.docker("docker", "logs", sh.names.containers["coursebot-preview"]))
    assert status == 200 and "<html" in page.lower()
    preview = sh.names.containers["coursebot-preview"]
    assert (await engine.docker("docker", "exec", preview, "/usr/local/bin/coursebot-healthcheck"))[0] == 0
