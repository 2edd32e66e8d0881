"""The image on a real Docker engine when something is wrong or particular: each missing flag, a missing token,
bad data folders, a runner-only container, JSON logs, the Docker backend without the socket's group, and what the
image holds. (The README's own story, start to stop, is tests/test_readme_docker.py.)

Each start here ends at once, in one line, or needs no Bot API: none waits for the runner's torch but one.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat

import pytest

from tests.conftest import ROOT
from tests.engine import docker, image, run_once, sandbox_flags, unique

TOKEN = {**os.environ, "TELEGRAM_BOT_TOKEN": "123:never-used"}
NO_TOKEN = {k: v for k, v in os.environ.items() if k != "TELEGRAM_BOT_TOKEN"}


def _one_line(code: int, out: str, err: str) -> str:
    lines = (out + err).strip().splitlines()
    assert code != 0 and len(lines) == 1, (code, out + err)
    return lines[0]


def _json_lines(text: str) -> list[dict]:
    lines = [json.loads(line) for line in text.strip().splitlines()]
    for line in lines:
        assert {"time", "level", "logger", "message"} <= set(line), line
    return lines


@pytest.fixture
async def volume():
    name = unique("coursebot-test-data")
    await docker("docker", "volume", "create", name)
    yield name
    await docker("docker", "volume", "rm", "-f", name)


# --- the flags, and the token ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "missing, named",
    [
        (["--cap-add", "SYS_ADMIN"], "--cap-add SYS_ADMIN"),
        (["--cap-add", "CHOWN"], "--cap-add CHOWN"),
        (["--cap-add", "SETUID"], "--cap-add SETUID"),
        (["--cap-add", "SETPCAP"], "--cap-add SETPCAP"),
        (["--security-opt", "seccomp=container/seccomp.json"], "seccomp=container/seccomp.json"),
    ],
)
async def test_a_missing_flag_stops_the_container_with_one_line_naming_it(missing, named, volume):
    flags = sandbox_flags()
    at = next(i for i in range(len(flags) - 1) if flags[i : i + 2] == missing)
    flags = flags[:at] + flags[at + 2 :]
    line = _one_line(*await run_once(*flags, "-e", "TELEGRAM_BOT_TOKEN", "-v", f"{volume}:/data", image(), env=TOKEN))
    assert line.startswith("coursebot: ") and named in line, line


async def test_without_a_token_the_image_stops_in_one_line_and_writes_nothing(volume):
    line = _one_line(*await run_once(*sandbox_flags(), "-v", f"{volume}:/data", image(), env=NO_TOKEN))
    assert "TELEGRAM_BOT_TOKEN is not set" in line and "coursebot web" in line, line
    # Nothing was served, and nothing written: no web chat's history in the learners' volume.
    code, out, err = await run_once(
        "--entrypoint", "ls", "-v", f"{volume}:/data", "--user", "10001", image(), "-A", "/data"
    )
    assert code == 0 and out.strip() == "", out + err


async def test_in_json_logs_the_entrypoints_and_the_failed_starts_lines_are_json(volume):
    json_logs = {**NO_TOKEN, "COURSEBOT_LOG_FORMAT": "json"}
    code, out, err = await run_once(
        *sandbox_flags(), "-e", "COURSEBOT_LOG_FORMAT", "-v", f"{volume}:/data", image(), env=json_logs
    )
    (said,) = _json_lines(out + err)
    assert code != 0 and said["level"] == "ERROR" and "TELEGRAM_BOT_TOKEN is not set" in said["message"]
    at = sandbox_flags().index("SETPCAP")
    flags = sandbox_flags()[: at - 1] + sandbox_flags()[at + 1 :]  # without --cap-add SETPCAP
    code, out, err = await run_once(
        *flags, "-e", "COURSEBOT_LOG_FORMAT", "-v", f"{volume}:/data", image(), env=json_logs
    )
    (said,) = _json_lines(out + err)
    assert code != 0 and said["logger"] == "coursebot.entrypoint" and "--cap-add SETPCAP" in said["message"]


# --- data folders --------------------------------------------------------------------------------------------------


async def test_a_data_folder_the_bot_cannot_write_refuses_the_start_naming_the_uid(tmp_path):
    # Started as the image's user (as compose starts the bot), nothing can fix the folder's owner: one line.
    data = tmp_path / "data"
    data.mkdir(mode=0o755)  # root's, as a bind mount made by hand would be
    line = _one_line(*await run_once("-e", "TELEGRAM_BOT_TOKEN", "-v", f"{data}:/data", image(), env=TOKEN))
    assert "uid 0" in line and "uid 10001" in line and "chown -R 10001:10001 /data" in line, line


async def test_a_read_only_volume_is_named_read_only_whoever_owns_it(volume, tmp_path):
    # The image's user owns the volume: started as the README says, and as compose starts the bot.
    for flags in (sandbox_flags(), []):
        line = _one_line(
            *await run_once(*flags, "-e", "TELEGRAM_BOT_TOKEN", "-v", f"{volume}:/data:ro", image(), env=TOKEN)
        )
        assert "read-only" in line and "make uid" not in line, line
    # A folder of root's, read-only: one line, no chown tried, no other capability asked for.
    data = tmp_path / "data"
    data.mkdir()
    line = _one_line(
        *await run_once(*sandbox_flags(), "-e", "TELEGRAM_BOT_TOKEN", "-v", f"{data}:/data:ro", image(), env=TOKEN)
    )
    assert "read-only" in line and "--cap-add" not in line, line


async def test_a_folder_holding_what_coursebot_did_not_make_is_refused_and_left_as_it_was(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "coursebot.sqlite3").write_bytes(b"")
    (data / "notes.txt").write_text("the operator's own")
    (data / "elsewhere").symlink_to("/etc/hostname")
    line = _one_line(
        *await run_once(*sandbox_flags(), "-e", "TELEGRAM_BOT_TOKEN", "-v", f"{data}:/data", image(), env=TOKEN)
    )
    assert "notes.txt" in line and "elsewhere" in line and "left as it is" in line, line
    for path in (data, data / "coursebot.sqlite3", data / "notes.txt"):
        assert path.stat().st_uid == 0, path
    # A link by a name coursebot uses is not coursebot's file either: the link's target keeps its owner.
    target = tmp_path / "target"
    target.write_text("x")
    os.unlink(data / "notes.txt")
    os.unlink(data / "elsewhere")
    os.unlink(data / "coursebot.sqlite3")
    (data / "coursebot.sqlite3").symlink_to(target)
    line = _one_line(
        *await run_once(*sandbox_flags(), "-e", "TELEGRAM_BOT_TOKEN", "-v", f"{data}:/data", image(), env=TOKEN)
    )
    assert "coursebot.sqlite3" in line and target.stat().st_uid == 0, line


async def test_what_a_run_as_root_left_is_handed_back_files_inside_too_and_said_in_one_line(tmp_path):
    # What a run of an older image as root leaves: the folder and the database root's, and a backup beside them.
    data = tmp_path / "data"
    data.mkdir()
    for name in ("coursebot.sqlite3", "coursebot.sqlite3-wal", "backup.sqlite3"):
        (data / name).write_bytes(b"")
    env = {**TOKEN, "COURSEBOT_RUNNER_URL": "off", "TELEGRAM_API_BASE_URL": "http://127.0.0.1:9"}
    _, out, err = await run_once(
        *sandbox_flags(), "-e", "TELEGRAM_BOT_TOKEN", "-e", "COURSEBOT_RUNNER_URL", "-e", "TELEGRAM_API_BASE_URL",
        "-v", f"{data}:/data", image(), env=env,
    )  # fmt: skip
    assert "coursebot: /data belonged to uid 0; it now belongs to uid 10001" in out + err, out + err
    for path in (data, *data.iterdir()):
        assert path.stat().st_uid == 10001, path
    # The folder is the bot's now; a file of its own that root made since (a backup run as root) is handed back.
    (data / "backup-2.sqlite3").write_bytes(b"")
    os.chown(data / "backup-2.sqlite3", 0, 0)
    _, out, err = await run_once(
        *sandbox_flags(), "-e", "TELEGRAM_BOT_TOKEN", "-e", "COURSEBOT_RUNNER_URL", "-e", "TELEGRAM_API_BASE_URL",
        "-v", f"{data}:/data", image(), env=env,
    )  # fmt: skip
    assert "backup-2.sqlite3" in out + err and (data / "backup-2.sqlite3").stat().st_uid == 10001, out + err


# --- roles: a runner alone, the Docker backend --------------------------------------------------------------------


async def test_a_runner_only_container_is_healthy_by_the_images_own_check_and_logs_json(volume):
    name = unique("coursebot-test-runner")
    code, out, err = await docker(
        "docker", "run", "-d", "--name", name, "--network", "none", "--health-interval", "1s",
        *sandbox_flags(), "-e", "COURSEBOT_LOG_FORMAT=json", image(),
        "python", "-m", "runner", "serve", "--socket", "/run/coursebot/runner.sock",
    )  # fmt: skip
    try:
        assert code == 0, out + err
        for _ in range(360):
            _, health, _ = await docker("docker", "inspect", "--format", "{{.State.Health.Status}}", name)
            if health.strip() != "starting":
                break
            await asyncio.sleep(0.5)
        _, logs, errors = await docker("docker", "logs", name)
        assert health.strip() == "healthy", logs + errors
        said = _json_lines(logs + errors)
        assert [line["message"] for line in said] == ["READY"], said
        assert said[0]["ready"]["addresses"] == ["unix:///run/coursebot/runner.sock"]
        # Per-slot uids (runner/uids.py): the runner stayed root, with four capabilities and no others.
        assert said[0]["ready"]["job_uids"][0] > said[0]["ready"]["sandbox_uid"], said
        _, status, _ = await docker("docker", "exec", name, "grep", "-E", "^(Uid|CapBnd|NoNewPrivs):", "/proc/1/status")
        fields = {line.split(":")[0]: line.split()[1] for line in status.splitlines()}
        # CAP_KILL (5), CAP_SETGID (6), CAP_SETUID (7), CAP_SYS_ADMIN (21)
        assert fields == {"Uid": "0", "CapBnd": f"{1 << 5 | 1 << 6 | 1 << 7 | 1 << 21:016x}", "NoNewPrivs": "1"}, status
        # The bot's health check, as the image's user, reaches the socket: it is that user's alone.
        _, listing, _ = await docker(
            "docker", "exec", "--user", "coursebot", name, "stat", "-c", "%U %a %F", "/run/coursebot/runner.sock"
        )  # fmt: skip
        assert listing.strip() == "coursebot 600 socket", listing
    finally:
        await docker("docker", "rm", "-f", "-v", name)


async def test_a_runner_only_container_without_kill_stops_in_one_line_naming_it(volume):
    flags = sandbox_flags()
    at = flags.index("KILL")
    line = _one_line(
        *await run_once(*flags[: at - 1], *flags[at + 1 :], image(), "python", "-m", "runner", "serve")
    )  # fmt: skip
    assert line.startswith("coursebot: ") and "--cap-add KILL" in line, line


async def test_the_docker_backend_without_the_sockets_group_stops_in_one_line_naming_it(volume):
    socket = "/var/run/docker.sock"
    line = _one_line(
        *await run_once(
            "--cap-drop", "ALL", "-v", f"{socket}:{socket}", "-e", "RUNNER_BACKEND=docker", "-e", "TELEGRAM_BOT_TOKEN",
            "-v", f"{volume}:/data", image(), env=TOKEN,
        )
    )  # fmt: skip
    assert f"--group-add {os.stat(socket).st_gid}" in line and "Traceback" not in line, line


# --- what the images hold --------------------------------------------------------------------------------------------


async def test_the_image_declares_no_volume_so_none_is_left_behind():
    _, volumes, _ = await docker("docker", "image", "inspect", "--format", "{{json .Config.Volumes}}", image())
    assert volumes.strip() == "null"


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
    assert not listed & {".venv", ".git", "tests", "bench", "data", "Makefile", ".ci", ".env"}, listed
    built = [line.split()[-1] for line in out.decode().splitlines() if line.startswith("Successfully built")]
    await docker("docker", "rmi", *built)


def test_the_entrypoints_helpers_are_in_the_build_context():
    ignored = (ROOT / ".dockerignore").read_text()
    copied = [
        line.split()[1] for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("COPY container/")
    ]
    for path in copied:
        assert f"!{path}" in ignored, path
        assert os.stat(ROOT / path).st_mode & stat.S_IXUSR, path
