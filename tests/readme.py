"""The README's container commands, run as written: its ```sh blocks in "Docker" and "Operating it".

Each block is found by the words in COMMANDS (one block each, and every block has a name: see
tests/test_readme_commands.py) and run by ``sh`` in a folder that looks like the checkout, with tests/shims first
on PATH: the shims give the commands the test's names for containers, volumes, images and ports, and send builds
through container/build. The commands themselves, flags and all, are the README's own text, so they cannot
drift from what the tests prove.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import tempfile
import textwrap
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import ROOT

SECTIONS = ("### Docker\n", "### Operating it\n")
SHIMS = ROOT / "tests" / "shims"
# The token the README shows; the tests' Bot API stand-in answers to it.
TOKEN = "123456789:ABC..."

# Every ```sh block of those sections, named by words only it holds.
COMMANDS: dict[str, tuple[str, ...]] = {
    "build": ("docker build -t coursebot .", "docker build -t coursebot-job --target job ."),
    "run": ("docker run -d --name coursebot ", "--cap-add SYS_ADMIN", "-v coursebot-data:/data coursebot\n"),
    "compose up": ("cat > .env", "docker-compose up -d --build"),
    "docker backend": ("RUNNER_BACKEND=docker", "--group-add"),
    "web chat": ("coursebot coursebot web",),
    "backup": ("docker exec coursebot coursebot db backup", "docker cp coursebot:/data/backup.sqlite3"),
    "compose backup": ("docker-compose exec -T bot coursebot db backup",),
    "upgrade": ("docker build -t coursebot .\ndocker rm -f coursebot",),
    "move": ("docker volume create coursebot-data", "cat > /data/coursebot.sqlite3"),
    "monitoring": ("compose.monitoring.yaml", "docker-compose up -d\n"),
    "logs": ("docker logs coursebot",),
    "compose logs": ("docker-compose logs",),
    "stop": ("docker stop coursebot",),
    "compose down": ("docker-compose down",),
}


def sections() -> str:
    """The README's "Docker" and "Operating it" sections, as they stand."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    parts = []
    for heading in SECTIONS:
        start = text.index(heading)
        end = min((i for i in (text.find("\n## ", start), text.find("\n### ", start + 1)) if i != -1), default=None)
        parts.append(text[start:end])
    return "".join(parts)


def blocks() -> list[str]:
    """Each ```sh block of those sections (a list item's block unindented), in order."""
    found = re.findall(r"^( *)```sh\n(.*?)^\1```", sections(), re.MULTILINE | re.DOTALL)
    return [textwrap.dedent(body) for _, body in found]


def command(name: str) -> str:
    """The one block COMMANDS[name] names."""
    matches = [b for b in blocks() if all(word in b for word in COMMANDS[name])]
    assert len(matches) == 1, f"README: {len(matches)} ```sh blocks hold {COMMANDS[name]} (one expected)"
    return matches[0]


@dataclass
class Names:
    """The test's names for what the README names: containers, volumes, images, published host addresses."""

    containers: dict[str, str] = field(default_factory=dict)
    volumes: dict[str, str] = field(default_factory=dict)
    images: dict[str, str] = field(default_factory=dict)
    ports: dict[str, str] = field(default_factory=dict)


@dataclass
class Shell:
    """A folder that looks like the checkout, where README blocks run with the test's names."""

    folder: Path
    names: Names
    run_flags: list[str]  # the test's own flags for every docker run (a network, the stand-in's address)
    project: str  # compose's project name
    env: dict[str, str] = field(default_factory=dict)

    async def run(self, name: str, env: Mapping[str, str] | None = None, timeout: float = 600) -> tuple[int, str]:
        """Run README block ``name`` with sh; (exit status, stdout and stderr together)."""
        return await self.sh(command(name), env, timeout)

    async def sh(self, script: str, env: Mapping[str, str] | None = None, timeout: float = 600) -> tuple[int, str]:
        process = await asyncio.create_subprocess_exec(
            "sh", "-e", "-c", script, cwd=self.folder, env=self._environment(env),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        try:
            out, _ = await asyncio.wait_for(process.communicate(), timeout)
        except TimeoutError:
            process.kill()
            out, _ = await process.communicate()
            return -1, out.decode(errors="replace") + f"\n(timed out after {timeout:.0f} s)"
        return process.returncode or 0, out.decode(errors="replace")

    def _environment(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        settings = {
            "checkout": str(ROOT),
            "docker": shutil.which("docker") or "/usr/bin/docker",
            "containers": self.names.containers,
            "volumes": self.names.volumes,
            "images": self.names.images,
            "ports": self.names.ports,
            "run": self.run_flags,
            "compose": {
                "command": shutil.which("docker-compose") or "docker-compose",
                "project": self.project,
                "override": str(ROOT / "tests" / "fixtures" / "compose.test.yaml"),
            },
        }
        return {
            **{k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "TELEGRAM_", "COURSEBOT_"))},
            "PATH": f"{SHIMS}{os.pathsep}{os.environ['PATH']}",
            "COURSEBOT_README": json.dumps(settings),
            "COURSEBOT_TEST_IMAGE": self.names.images["coursebot"],
            **self.env,
            **(extra or {}),
        }


# What of the checkout the README's commands read: compose's files, the seccomp profile (builds go through
# container/build in the real checkout).
CHECKOUT_FILES = ("compose.yaml", "compose.monitoring.yaml", "container", "Dockerfile")


@asynccontextmanager
async def shell(names: Names, run_flags: list[str], project: str) -> AsyncIterator[Shell]:
    """A Shell in a fresh folder, removed afterwards (what its blocks started is the caller's to remove)."""
    folder = Path(tempfile.mkdtemp(prefix="coursebot-readme-"))
    try:
        for name in CHECKOUT_FILES:
            (folder / name).symlink_to(ROOT / name)
        yield Shell(folder, names, run_flags, project)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
