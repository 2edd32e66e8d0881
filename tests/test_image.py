"""The image on a real Docker engine, run as the README says: a learner through the stand-in (the
container on the host's network, so traffic stays on 127.0.0.1), stopping, data, privileges."""

from __future__ import annotations

import asyncio
import json
import os
import socket

import pytest

from bot.content.load import load_valid
from tests.conftest import LESSONS, LOCALES, ROOT
from tests.engine import Container, as_in_readme, docker, image, readme_docker_run, run_once, running, unique
from tests.journey import answer_quiz, button_texts, read_slides, send_and_wait, tap_and_wait_edit

COURSE = load_valid(LESSONS, LOCALES).english
# The first start imports torch and proves the sandbox's isolation inside the container.
START_S = 180


def _env(standin) -> dict[str, str]:
    # The README passes the token as `-e TELEGRAM_BOT_TOKEN`: docker takes it from its own environment.
    return {**os.environ, "TELEGRAM_BOT_TOKEN": standin.token}


async def _volume():
    name = unique("coursebot-test-data")
    await docker("docker", "volume", "create", name)
    return name


async def _remove_volume(name: str) -> None:
    await docker("docker", "volume", "rm", "-f", name)


@pytest.fixture
async def volume():
    name = await _volume()
    yield name
    await _remove_volume(name)


def _verdict(message: dict) -> bool:
    return "Not yet" in message.get("text", "") or "checks passed" in message.get("text", "")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def _http(port: int, path: str) -> tuple[int, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    await writer.drain()
    response = await reader.read()
    writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode()


def _metric(text: str, name: str) -> float:
    return sum(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith(name + " ") or line.startswith(name + "{")
    )


async def test_a_learner_reads_answers_runs_code_and_is_graded_in_the_container_the_readme_runs(standin, volume):
    port = _free_port()
    command = as_in_readme(
        unique("coursebot-test"), volume, standin.api_base_url, "-e", f"COURSEBOT_MONITORING=127.0.0.1:{port}"
    )
    async with running(command, _env(standin)) as bot:
        await standin.wait_call("getUpdates", timeout=START_S)
        ada = standin.learner(user_id=7001)
        lesson = COURSE.lessons[0]
        menu = await send_and_wait(ada, "/start")
        slide = await tap_and_wait_edit(ada, menu, "Start the course")
        last = await read_slides(ada, slide, lesson)
        result = await answer_quiz(ada, last, lesson)
        assert f"{len(lesson.quiz)} of {len(lesson.quiz)} correct" in result["text"]

        out = await send_and_wait(ada, "/run print(2+2)", timeout=60)
        assert out["text"].strip() == "4"

        since = ada.cursor()
        await ada.tap(result, callback_data=f"p:{lesson.id}")
        await ada.wait_message(lambda m: "Practice" in m.get("text", ""), since=since, timeout=30)
        failed = await send_and_wait(ada, lesson.exercise.starter, _verdict, timeout=60)
        assert "Not yet" in failed["text"]
        passed = await send_and_wait(ada, lesson.exercise.solution, _verdict, timeout=60)
        assert "All checks passed" in passed["text"]
        assert any(t.startswith("Next") for t in button_texts(passed)) or passed["text"]

        # What the session left in /metrics, scraped from outside the container.
        status, metrics = await _http(port, "/metrics")
        assert status == 200
        assert _metric(metrics, 'coursebot_runner_jobs_total{outcome="ok"}') == 3  # /run, the failing try, the pass
        assert _metric(metrics, 'coursebot_updates_total{kind="poll_answer"}') == len(lesson.quiz)
        assert _metric(metrics, 'coursebot_updates_total{kind="message"}') == 4  # /start, /run, two tries
        assert _metric(metrics, "coursebot_runner_job_seconds_count") == 3
        assert _metric(metrics, "coursebot_update_errors_total") == 0
        assert _metric(metrics, "coursebot_runner_busy_slots") == 0
        status, health = await _http(port, "/healthz")
        assert status == 200 and json.loads(health)["checks"] == {"database": "ok", "runner": "ok", "telegram": "ok"}
        assert (await bot.exec("/usr/local/bin/coursebot-healthcheck", "bot"))[0] == 0
        logs = await bot.logs()
    assert standin.token not in logs and "Traceback" not in logs, logs


async def test_a_fork_bomb_and_a_memory_hog_stay_inside_their_job_in_the_container(standin, volume):
    command = as_in_readme(unique("coursebot-test"), volume, standin.api_base_url)
    async with running(command, _env(standin)):
        await standin.wait_call("getUpdates", timeout=START_S)
        ada = standin.learner(user_id=7002)
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


async def test_docker_stop_exits_0_within_10_s_with_the_runner_running(standin, volume):
    command = as_in_readme(unique("coursebot-test"), volume, standin.api_base_url)
    async with running(command, _env(standin)) as bot:
        await standin.wait_call("getUpdates", timeout=START_S)
        ada = standin.learner(user_id=7003)
        assert (await send_and_wait(ada, "/run print(1)", timeout=60))["text"].strip() == "1"
        code, took = await bot.stop()
        assert code == 0 and took < 10, (code, took, await bot.logs())
        assert "database is closed" in await bot.logs()


async def test_progress_survives_a_new_container_on_the_same_volume(standin, volume):
    # The runner is not what this is about: off, so each container starts in a moment.
    first = as_in_readme(unique("coursebot-test"), volume, standin.api_base_url, "-e", "COURSEBOT_RUNNER_URL=off")
    ada = standin.learner(user_id=7004)
    async with running(first, _env(standin)) as bot:
        await standin.wait_call("getUpdates", timeout=START_S)
        menu = await send_and_wait(ada, "/start")
        slide = await tap_and_wait_edit(ada, menu, "Start the course")
        await tap_and_wait_edit(ada, slide, "Next")
        assert (await bot.stop())[0] == 0
    standin.clear_calls()
    second = as_in_readme(unique("coursebot-test"), volume, standin.api_base_url, "-e", "COURSEBOT_RUNNER_URL=off")
    async with running(second, _env(standin)):
        await standin.wait_call("getUpdates", timeout=START_S)
        menu = await send_and_wait(ada, "/lessons")
        assert "not started" in menu["text"] and menu["text"].count("not started") == len(COURSE.lessons) - 1
        resumed = await tap_and_wait_edit(ada, menu, "Continue")
        assert f"2 / {len(COURSE.lessons[0].slides)}" in resumed["text"]


async def test_a_data_folder_the_bot_cannot_write_refuses_the_start_naming_the_uid(tmp_path):
    # Started as the image's user (as compose starts the bot), nothing can fix the folder's owner: one line.
    data = tmp_path / "data"
    data.mkdir(mode=0o755)  # root's, as a bind mount made by hand would be
    env = {**os.environ, "TELEGRAM_BOT_TOKEN": "123:never-used"}
    code, out, err = await run_once("-e", "TELEGRAM_BOT_TOKEN", "-v", f"{data}:/data", image(), timeout=120, env=env)
    lines = (out + err).strip().splitlines()
    assert code != 0 and len(lines) == 1, out + err
    assert "uid 0" in lines[0] and "uid 10001" in lines[0] and "chown -R 10001:10001 /data" in lines[0], lines[0]


async def test_a_volume_left_to_root_is_handed_back_when_started_as_the_readme_says(standin, volume):
    # What a run of an older image as root left behind: a database and its folder owned by root.
    code, _, err = await run_once(
        "--user", "0", "--entrypoint", "sh", "-v", f"{volume}:/data", image(), "-c",
        "chown -R 0:0 /data && touch /data/coursebot.sqlite3",
    )  # fmt: skip
    assert code == 0, err
    command = as_in_readme(unique("coursebot-test"), volume, standin.api_base_url, "-e", "COURSEBOT_RUNNER_URL=off")
    async with running(command, _env(standin)) as bot:
        await standin.wait_call("getUpdates", timeout=START_S)
        ada = standin.learner(user_id=7005)
        assert "Start the course" in str((await send_and_wait(ada, "/start"))["reply_markup"])
        logs = await bot.logs()
    assert "coursebot: /data belonged to uid 0; it now belongs to uid 10001" in logs


@pytest.mark.parametrize(
    "missing, named",
    [
        (["--cap-add", "SYS_ADMIN"], "--cap-add SYS_ADMIN"),
        (["--cap-add", "CHOWN"], "--cap-add CHOWN"),
        (["--cap-add", "SETUID"], "--cap-add SETUID"),
        (["--security-opt", "seccomp=container/seccomp.json"], "seccomp=container/seccomp.json"),
    ],
)
async def test_a_missing_flag_stops_the_container_with_one_line_naming_it(missing, named, volume):
    args = readme_docker_run()[2:-1]
    at = next(i for i in range(len(args) - 1) if args[i : i + 2] == missing)
    flags = [a for a in args[:at] + args[at + 2 :] if a != "-d"]
    flags = [volume + ":/data" if a == "coursebot-data:/data" else a for a in flags]
    name = unique("coursebot-test")
    code, out, err = await docker(
        "docker", "run", "--name", name, *flags[flags.index("--user") :], image(),
        env={**os.environ, "TELEGRAM_BOT_TOKEN": "123:never-used"},
    )  # fmt: skip
    await docker("docker", "rm", "-f", "-v", name)
    lines = (out + err).strip().splitlines()
    assert code != 0 and len(lines) == 1, out + err
    assert lines[0].startswith("coursebot: ") and named in lines[0], lines[0]


async def test_the_bot_and_runner_run_as_uid_10001_with_no_capabilities_left(standin, volume):
    command = as_in_readme(unique("coursebot-test"), volume, standin.api_base_url)
    async with running(command, _env(standin)) as bot:
        await standin.wait_call("getUpdates", timeout=START_S)
        status = await _process_status(bot)
        # tini, the bot and the runner service: uid 10001, no capabilities, no way to gain any. The
        # sandbox's own processes hold two capabilities, but only inside their own user namespace.
        container_userns = status[min(status, key=int)]["userns"]
        outside = {pid: fields for pid, fields in status.items() if fields["userns"] == container_userns}
        assert len(outside) >= 3 and len(status) > len(outside)
        for pid, fields in status.items():
            assert fields["Uid"].split()[:2] == ["10001", "10001"], (pid, fields)
            assert fields["NoNewPrivs"] == "1", (pid, fields)
        for pid, fields in outside.items():
            assert int(fields["CapEff"], 16) == 0 and int(fields["CapBnd"], 16) == 0, (pid, fields)


async def _process_status(container: Container) -> dict[str, dict[str, str]]:
    # The container's own processes as the kernel reports them (read through docker's pid, from the host).
    _, pid, _ = await docker("docker", "inspect", "--format", "{{.State.Pid}}", container.name)
    status = {}
    for task in [pid.strip(), *_descendants(int(pid))]:
        try:
            text = open(f"/proc/{task}/status").read()
        except OSError:
            continue
        status[task] = dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)
        status[task] = {k: v.strip() for k, v in status[task].items()}
        status[task]["userns"] = os.readlink(f"/proc/{task}/ns/user")
    return status


def _descendants(pid: int) -> list[str]:
    out = []
    try:
        children = open(f"/proc/{pid}/task/{pid}/children").read().split()
    except OSError:
        return out
    for child in children:
        out += [child, *_descendants(int(child))]
    return out


async def test_the_image_holds_each_package_once_and_the_job_image_no_lessons_and_no_bot():
    code, out, err = await run_once(
        "--entrypoint", "python", image(), "-c",
        "import runner, bot, glob; print(runner.__file__); print(bot.__file__);"
        "print(sum(len(glob.glob(f'{top}/**/runner/client.py', recursive=True)) for top in ('/app', '/opt', '/usr')))",
    )  # fmt: skip
    assert code == 0, err
    runner_file, bot_file, copies = out.split()
    assert runner_file.startswith("/app/python/") and bot_file.startswith("/app/python/") and copies == "1"
    code, out, err = await run_once(
        "--network", "none", image("job"), "python3", "-c",
        "import os, importlib.util as u; print(os.path.exists('/app'), u.find_spec('bot'), u.find_spec('telegram'),"
        " u.find_spec('runner') is not None, os.getuid())",
    )  # fmt: skip
    assert code == 0, err
    assert out.split() == ["False", "None", "None", "True", "65534"], out


async def test_the_build_context_holds_only_what_the_images_copy():
    image()  # the base image exists
    # A throwaway build of this checkout's context that lists what reached the engine.
    process = await asyncio.create_subprocess_exec(
        "docker", "build", "--no-cache", "-f-", ".", cwd=ROOT,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    dockerfile = "FROM debian:bookworm-slim\nCOPY . /context\nRUN ls -A /context | sed 's/^/in-context: /'\n"
    out, _ = await process.communicate(dockerfile.encode())
    assert process.returncode == 0, out.decode()
    listed = {line.split(": ", 1)[1] for line in out.decode().splitlines() if line.startswith("in-context: ")}
    assert {"bot", "runner", "lessons", "locales", "pyproject.toml", "README.md", "container"} <= listed, listed
    assert not listed & {".venv", ".git", "tests", "bench", "data", "Makefile", ".ci"}, listed
    built = [line.split()[-1] for line in out.decode().splitlines() if line.startswith("Successfully built")]
    await docker("docker", "rmi", *built)
