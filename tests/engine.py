"""A real Docker engine for the image and compose tests: started when none answers, or a skip saying why.

The images are built once per test session from this checkout (layers are cached, so a rebuild with
nothing changed takes seconds). Containers that must reach the Bot API stand-in share the host's
network, so test traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import secrets
import shlex
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import cache

import pytest

from tests.conftest import ROOT

IMAGE = "coursebot:test"
JOB_IMAGE = "coursebot-job:test"
BUILD_TIMEOUT_S = 1800


def _script(name: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ROOT / "container" / name), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


@cache
def _engine_problem() -> str | None:
    try:
        done = _script("ensure-engine", timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"no Docker engine: {e}"
    return None if done.returncode == 0 else done.stderr.strip() or "no Docker engine answers"


def require_engine() -> None:
    """Skip, saying why, where no Docker engine answers and none can be started."""
    problem = _engine_problem()
    if problem is not None:
        pytest.skip(problem)


@cache
def _build(tag: str, target: str | None) -> tuple[bool, str]:
    base = _script("base-image", timeout=BUILD_TIMEOUT_S)
    if base.returncode != 0:
        return False, base.stderr
    args = ["-t", tag, *(["--target", target] if target else []), "."]
    started = time.monotonic()
    done = _script("build", *args, timeout=BUILD_TIMEOUT_S)
    print(f"built {tag} in {time.monotonic() - started:.0f} s")
    return done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def image(target: str | None = None) -> str:
    """The tag of this checkout's image (the default target, or ``target``), built once per session."""
    require_engine()
    tag = IMAGE if target is None else JOB_IMAGE
    ok, log = _build(tag, target)
    if not ok:
        pytest.fail(f"docker build of {tag} failed:\n{log}")
    return tag


async def docker(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> tuple[int, str, str]:
    """Run the docker CLI (or docker-compose) from the checkout; (exit code, stdout, stderr)."""
    process = await asyncio.create_subprocess_exec(
        *args, cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    return process.returncode or 0, out.decode(), err.decode()


async def run_once(*args: str, timeout: float = 120, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """docker run ``args`` (options, image, command) in a named container, removed afterwards even on a timeout."""
    name = unique("coursebot-test")
    try:
        return await docker("docker", "run", "--name", name, *args, timeout=timeout, env=env)
    finally:
        await docker("docker", "rm", "-f", "-v", name)


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


def readme_docker_run() -> list[str]:
    """The README's `docker run` command for one container, as arguments (its flags are what we test)."""
    text = (ROOT / "README.md").read_text()
    for block in text.split("```sh\n")[1:]:
        command = block.split("```", 1)[0]
        if command.startswith("docker run"):
            return shlex.split(command.replace("\\\n", " "))
    raise AssertionError("the README has no ```sh block starting with docker run")


@dataclass
class Container:
    name: str

    async def logs(self) -> str:
        _, out, err = await docker("docker", "logs", self.name)
        return out + err

    async def stop(self) -> tuple[int, float]:
        """docker stop with its default 10 s grace; (exit code, seconds it took)."""
        started = time.monotonic()
        await docker("docker", "stop", self.name)
        took = time.monotonic() - started
        _, code, _ = await docker("docker", "inspect", "--format", "{{.State.ExitCode}}", self.name)
        return int(code.strip()), took

    async def exec(self, *command: str) -> tuple[int, str, str]:
        return await docker("docker", "exec", self.name, *command)


def as_in_readme(name: str, volume: str, api_base_url: str, *extra: str) -> list[str]:
    """The README's docker run, aimed at the stand-in: our name, volume, image and the host's network."""
    args = readme_docker_run()
    assert args[:2] == ["docker", "run"] and args[-1] == "coursebot", args
    flags, skip = [], False
    for arg in args[2:-1]:
        if skip:
            skip = False
            continue
        if arg in ("--name", "--restart"):
            skip = True
            continue
        flags.append(volume + ":/data" if arg == "coursebot-data:/data" else arg)
    return [
        "docker", "run", "--name", name, *flags, "--network", "host",
        "-e", f"TELEGRAM_API_BASE_URL={api_base_url}", *extra, image(),
    ]  # fmt: skip


@asynccontextmanager
async def running(command: list[str], env: dict[str, str]) -> AsyncIterator[Container]:
    """Start a container (``command`` is a docker run line with --name); remove it and its anonymous volumes after."""
    name = command[command.index("--name") + 1]
    code, out, err = await docker(*command, env=env)
    assert code == 0, out + err
    try:
        yield Container(name)
    finally:
        await docker("docker", "rm", "-f", "-v", name)
