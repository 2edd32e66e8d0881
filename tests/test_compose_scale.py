"""compose.scale.yaml on a real engine (docker-compose, as Debian ships it): HAProxy, PostgreSQL 15, 3 bot replicas
in webhook mode and 2 runner hosts, from the project's own images, start to `down`.

The Bot API stand-in plays Telegram on this machine, on the gateway of the stack's own network (the bots reach it
there) and delivers webhooks to HAProxy's published port on loopback. The webhook is set once, as the README says,
by a one-off container. A learner reads a slide and runs code; one bot replica is killed (`docker kill`) and the
learner's next updates are still each answered once.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import shutil
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio

from tests import engine
from tests.journey import tap_and_wait_edit
from tests.pg import free_port
from tests.standin import BotApiStandin

pytestmark = [
    pytest.mark.skipif(
        shutil.which("docker-compose") is None, reason="needs docker-compose (apt-get install -y docker-compose)"
    ),
    pytest.mark.asyncio(loop_scope="module"),
]
TOKEN = "123456:SCALE-TEST-TOKEN"
START_S = 300
REPLICAS = ("bot1", "bot2", "bot3")
RUNNERS = ("runner1", "runner2")


@dataclass
class Stack:
    project: str
    env: dict[str, str]
    api: BotApiStandin
    webhook_port: int

    async def compose(self, *args: str, timeout: float = 600) -> tuple[int, str]:
        code, out, err = await engine.docker(
            "docker-compose", "-f", "compose.scale.yaml", "-p", self.project, *args, env=self.env, timeout=timeout
        )
        return code, out + err

    async def container(self, service: str) -> str:
        code, out = await self.compose("ps", "-q", service)
        assert code == 0 and out.strip(), out
        return out.strip().splitlines()[-1]

    async def logs(self, *services: str) -> str:
        return (await self.compose("logs", "--no-color", *services))[1]


async def _compose_env(project: str, subnet: str, api_port: int, webhook_port: int) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELEGRAM_", "COURSEBOT_", "RUNNER_"))}
    env.update(
        COURSEBOT_IMAGE=engine.image(),
        COURSEBOT_POSTGRES_IMAGE=engine.image_from("deploy/scale/postgres.Dockerfile", "coursebot-scale-postgres:test"),
        COURSEBOT_HAPROXY_IMAGE=engine.image_from("deploy/scale/haproxy.Dockerfile", "coursebot-scale-haproxy:test"),
        POSTGRES_PASSWORD=secrets.token_urlsafe(16),
        RUNNER_TOKEN=secrets.token_urlsafe(24),
        TELEGRAM_BOT_TOKEN=TOKEN,
        TELEGRAM_API_BASE_URL=f"http://{subnet}.1:{api_port}",
        COURSEBOT_WEBHOOK_SECRET=secrets.token_urlsafe(24),
        COURSEBOT_LOG_LEVEL="INFO",
        SCALE_SUBNET=f"{subnet}.0/24",
        SCALE_WEBHOOK_PUBLISH=f"127.0.0.1:{webhook_port}",
    )
    return env


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack() -> AsyncIterator[Stack]:
    engine.require_engine()
    project = engine.unique("coursebot-scale")
    api_port, webhook_port = free_port(), free_port()
    # The stack's front network on a free private /24: created (with every container, none started) first, so that
    # the stand-in can listen on its gateway before a bot starts.
    for _ in range(20):
        subnet = f"10.{secrets.randbelow(200) + 20}.{secrets.randbelow(250)}"
        env = await _compose_env(project, subnet, api_port, webhook_port)
        stack_ = Stack(project, env, None, webhook_port)  # type: ignore[arg-type]
        code, out = await stack_.compose("up", "--no-start")
        if code == 0:
            break
        await stack_.compose("down", "--volumes")
        assert "overlap" in out, out
    else:
        raise AssertionError("no free private /24 for the stack's network")
    try:
        async with BotApiStandin(token=TOKEN, host=f"{subnet}.1", port=api_port) as api:
            stack_.api = api
            code, out = await stack_.compose("up", "-d", timeout=900)
            assert code == 0, out
            yield stack_
    finally:
        code, out = await stack_.compose("down", "--volumes", "--timeout", "5")
        assert code == 0, out


async def _wait(what: str, check, timeout: float = START_S) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(1)


async def _healthy(stack: Stack, service: str) -> bool:
    _, out, _ = await engine.docker(
        "docker", "inspect", "--format", "{{.State.Health.Status}}", await stack.container(service)
    )
    return out.strip() == "healthy"


async def test_a_learner_reads_and_runs_code_through_haproxy_and_a_killed_replica_loses_nothing(stack):
    api = stack.api
    for service in (*REPLICAS, *RUNNERS, "postgres"):
        await _wait(f"{service} healthy", lambda s=service: _healthy(stack, s))
    # The replicas migrated one database once, under the advisory lock, whoever came first.
    logs = await stack.logs(*REPLICAS)
    assert logs.count("receiving updates by webhook") == 3, logs
    assert "Traceback" not in logs, logs
    # The deploy step, once: a one-off container of the image, with the replicas' settings.
    url = f"http://127.0.0.1:{stack.webhook_port}/"
    code, out = await stack.compose("run", "--rm", "--no-deps", "bot1", "coursebot", "webhook", "set", url)
    assert code == 0 and "webhook set" in out, out
    assert len(api.calls_to("setWebhook")) == 1  # never by the replicas

    ada = api.learner(user_id=9101)
    since = ada.cursor()
    await ada.send("/start")
    menu = await ada.wait_message(since=since, timeout=60)
    slide = await tap_and_wait_edit(ada, menu, "Start the course")
    assert slide["message_id"] == menu["message_id"]
    since = ada.cursor()
    await ada.send("/run print(2+2)")
    assert (await ada.wait_message(since=since, timeout=120))["text"].strip() == "4"

    # One replica dies at once; HAProxy sends the next updates elsewhere (a connection refused or timed out is sent
    # again to another replica; the health checks take the dead one out within two seconds).
    killed = await stack.container("bot2")
    code, out, err = await engine.docker("docker", "kill", killed)
    assert code == 0, err
    answers = []
    for n in (3, 4, 5):
        since = ada.cursor()
        await ada.send(f"/run print({n}+{n})")
        answers.append((await ada.wait_message(since=since, timeout=120))["text"].strip())
    assert answers == ["6", "8", "10"]
    await api.settle(quiet=3, timeout=30)  # nothing more comes: no update was answered twice
    texts = [m.get("text", "").strip() for m in ada.messages]
    assert texts[1:] == ["4", "6", "8", "10"], texts
    assert api.answered_again == []
    assert api.errors() == []
    # HAProxy spread the webhook's POSTs over the replicas (its log: one line per request, with the server).
    served = re.findall(r" bots/(bot\d) \S+ (\d{3}) ", await stack.logs("haproxy"))
    per_replica = {replica: sum(1 for name, _ in served if name == replica) for replica in REPLICAS}
    print(f"webhook requests per replica: {per_replica}")
    assert sum(1 for count in per_replica.values() if count) >= 2, served
    assert all(status == "200" for _, status in served), served
    # The README's backup: pg_dump in the PostgreSQL container while the bots run (as text here, to read it).
    code, out, err = await engine.docker(
        "docker", "exec", await stack.container("postgres"),
        "pg_dump", "--format=plain", "-h", "/tmp", "-U", "coursebot", "coursebot",
    )  # fmt: skip
    assert code == 0 and "CREATE TABLE public.inbox" in out and "9101" in out, err
    # Every update reached a replica: HAProxy answered Telegram 2xx for each (the stand-in holds none back).
    code, out = await stack.compose("run", "--rm", "--no-deps", "bot1", "coursebot", "webhook", "info")
    assert code == 0 and "pending updates: 0" in out, out
