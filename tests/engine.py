"""A real Docker engine for the image and compose tests: started when none answers, or a skip saying why.

The images are built once per test session from this checkout (layers are cached, so a rebuild with
nothing changed takes seconds). Containers that must reach the Bot API stand-in are on a network of the
test's own (``network``), where the stand-in listens on the gateway's address: test traffic stays on this
machine, and the containers keep a network of their own, as deployed.
"""

from __future__ import annotations

import asyncio
import os
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

# The tags this session builds (.ci/run builds the defaults first). Another checkout sharing the engine
# sets its own (COURSEBOT_TEST_IMAGE=me-coursebot:test ...), so it never rebuilds someone else's image.
IMAGE = os.environ.get("COURSEBOT_TEST_IMAGE", "coursebot:test")
JOB_IMAGE = os.environ.get("COURSEBOT_TEST_JOB_IMAGE", "coursebot-job:test")
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


@cache
def _build_file(tag: str, dockerfile: str) -> tuple[bool, str]:
    base = _script("base-image", timeout=BUILD_TIMEOUT_S)
    if base.returncode != 0:
        return False, base.stderr
    context = os.path.dirname(dockerfile)
    done = _script("build", "-t", tag, "-f", dockerfile, context, timeout=BUILD_TIMEOUT_S)
    return done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def image_from(dockerfile: str, tag: str) -> str:
    """Build ``tag`` from ``dockerfile`` (a path in the checkout; its folder is the context) with the project's own
    scripts, on the Debian base they make, once per session; return the tag."""
    require_engine()
    ok, log = _build_file(tag, dockerfile)
    if not ok:
        pytest.fail(f"docker build of {tag} failed:\n{log}")
    return tag


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


# Put before every name a test gives a container, volume, network or compose project: a checkout sharing the
# engine with others names its own (COURSEBOT_TEST_OWNER=me-).
OWNER = os.environ.get("COURSEBOT_TEST_OWNER", "")


def unique(prefix: str) -> str:
    return f"{OWNER}{prefix}-{secrets.token_hex(4)}"


VOLUME = "coursebot-data:/data"


def sandbox_flags() -> list[str]:
    """The README's `docker run` flags for the sandbox (user, capabilities, security options, limits): its one
    container's command without the name, restart policy, token, volume and image."""
    from tests import readme

    args = shlex.split(readme.command("run").replace("\\\n", " "))
    assert args[:2] == ["docker", "run"] and args[-1] == "coursebot", args
    flags, skip = [], False
    for i, arg in enumerate(args[2:-1], start=2):
        if skip:
            skip = False
        elif arg in ("--name", "--restart") or args[i : i + 2] in (
            ["-e", "TELEGRAM_BOT_TOKEN"],
            ["-v", "coursebot-data:/data"],
        ):
            skip = True
        elif arg != "-d":
            flags.append(arg)
    return flags


@dataclass(frozen=True)
class Network:
    name: str
    gateway: str  # this machine's address on it: where a server for its containers listens


@asynccontextmanager
async def network(prefix: str = "coursebot-test-net") -> AsyncIterator[Network]:
    """A bridge network of the test's own, on a free private /24; removed afterwards.

    A server the containers must reach (the Bot API stand-in) listens on its gateway address: test traffic stays
    on this machine, and containers keep their own network, so published ports and compose work as deployed.
    """
    require_engine()
    name = unique(prefix)
    for _ in range(20):
        subnet = f"10.{secrets.randbelow(200) + 20}.{secrets.randbelow(250)}"
        code, _, err = await docker("docker", "network", "create", "--subnet", f"{subnet}.0/24", name)
        if code == 0:
            break
        if "overlap" not in err:
            raise AssertionError(f"docker network create: {err.strip()}")
    else:
        raise AssertionError("no free private /24 for a test network")
    try:
        yield Network(name, f"{subnet}.1")
    finally:
        await docker("docker", "network", "rm", name)


async def container_ip(container: str, network_name: str) -> str:
    code, out, err = await docker(
        "docker", "inspect", "--format", f'{{{{(index .NetworkSettings.Networks "{network_name}").IPAddress}}}}',
        container,
    )  # fmt: skip
    assert code == 0 and out.strip(), err
    return out.strip()


async def host_pid(container: str) -> int:
    """The host's pid of a container's pid 1."""
    _, pid, _ = await docker("docker", "inspect", "--format", "{{.State.Pid}}", container)
    return int(pid.strip())


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, as the host numbers them."""
    out: list[int] = []
    try:
        children = open(f"/proc/{pid}/task/{pid}/children").read().split()
    except OSError:
        return out
    for child in map(int, children):
        out += [child, *descendants(child)]
    return out


def process_status(pids: list[int]) -> dict[int, dict[str, str]]:
    """Each process's /proc status fields, and its user namespace (``userns``), read from the host."""
    status = {}
    for task in pids:
        try:
            text = open(f"/proc/{task}/status").read()
            userns = os.readlink(f"/proc/{task}/ns/user")
        except OSError:
            continue
        fields = {k: v.strip() for k, v in (line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)}
        status[task] = {**fields, "userns": userns}
    return status


def command_line(pid: int) -> list[str]:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace").split("\0")
    except OSError:
        return []


async def http_get(host: str, port: int, path: str) -> tuple[int, str]:
    """GET ``path`` over plain HTTP/1.1; (status, body)."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    response = await reader.read()
    writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode(errors="replace")


def metric(text: str, name: str) -> float:
    """The sum of a Prometheus exposition's samples of ``name`` (a name, or a name and its labels)."""
    return sum(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith(name + " ") or line.startswith(name + "{")
    )
