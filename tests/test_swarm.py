"""deploy/swarm/stack.yaml on a real engine in swarm mode (`docker stack deploy`): HAProxy, PostgreSQL 15, 3 bot
replicas in webhook mode and 2 runner hosts, from the project's own images, deploy to `docker stack rm`.

The engine is put in swarm mode only when it is in none, listening on loopback only (127.0.0.1:2377), and leaves it
when the test ends, whatever happened: other tests share the engine. The Bot API stand-in plays Telegram on this
machine, outside the swarm as Telegram is: it listens on the gateway of the node's docker_gwbridge (the way out of
every overlay network, where the bots reach it) and delivers webhooks to HAProxy's port, published on the node. The
webhook is set once, as the README says, by a command run in one bot task. A learner starts, reads a slide and runs
code; HAProxy's stats show its requests spread over the replicas; one bot task is killed (`docker kill`), swarm
starts another in its place and the learner's next taps are each answered once.
"""

from __future__ import annotations

import asyncio
import csv
import io
import os
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio

from tests import engine
from tests.conftest import ROOT
from tests.journey import tap_and_wait_edit
from tests.pg import free_port
from tests.standin import BotApiStandin

pytestmark = pytest.mark.asyncio(loop_scope="module")
TOKEN = "123456:SWARM-TEST-TOKEN"
STACK_FILE = "deploy/swarm/stack.yaml"
START_S = 240
REPLICAS = 3
# Overlay networks from a pool of their own, apart from the private /24s the compose tests pick (10.20-10.219).
ADDRESS_POOL = "10.240.0.0/16"
MARK = "coursebot-swarm-test"  # a label on the node: this test put the engine in swarm mode


@dataclass
class Swarm:
    name: str
    env: dict[str, str]
    api: BotApiStandin
    webhook_port: int

    def service(self, role: str) -> str:
        return f"{self.name}_{role}"

    async def containers(self, role: str) -> dict[str, str]:
        """The running containers of a service's tasks: {id: docker ps's status, e.g. "Up 9 seconds (healthy)"}."""
        code, out, err = await engine.docker(
            "docker", "ps", "--no-trunc", "--filter", f"label=com.docker.swarm.service.name={self.service(role)}",
            "--format", "{{.ID}} {{.Status}}",
        )  # fmt: skip
        assert code == 0, err
        return dict(line.split(" ", 1) for line in out.splitlines() if line.strip())

    async def healthy(self, role: str) -> list[str]:
        return [cid for cid, status in (await self.containers(role)).items() if "(healthy)" in status]

    async def logs(self, role: str) -> str:
        _, out, err = await engine.docker("docker", "service", "logs", "--raw", self.service(role))
        return out + err


def _readme(starting: str) -> str:
    """The README's swarm command (or commands, one a line) that starts with ``starting``, in its section's blocks."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("### Many machines: Docker's swarm mode\n")
    section = text[start : text.index("\n## ", start)]
    lines = [line.strip() for line in section.splitlines()]
    found = [line for line in lines if line.startswith(starting)]
    assert found, f"README, swarm mode: no command starting {starting!r}"
    return "\n".join(found)


async def _sh(script: str, env: dict[str, str], timeout: float = 300) -> str:
    code, out, err = await engine.docker("sh", "-c", script, env=env, timeout=timeout)
    assert code == 0, f"{script}: {err.strip() or out.strip()}"
    return out


async def _docker(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    code, out, err = await engine.docker("docker", *args, env=env, timeout=timeout)
    assert code == 0, f"docker {' '.join(args)}: {err.strip() or out.strip()}"
    return out


async def _swarm_state() -> tuple[str, bool]:
    out = await _docker("info", "--format", "{{.Swarm.LocalNodeState}} {{.Swarm.ControlAvailable}}")
    state, manager = out.split()
    return state, manager == "true"


async def _network_exists(name: str) -> bool:
    code, _, _ = await engine.docker("docker", "network", "inspect", name)
    return code == 0


async def _gwbridge_gateway() -> str:
    """This node's address on docker_gwbridge, which swarm makes with its first overlay network or at init."""
    deadline = time.monotonic() + 30
    while True:
        code, out, _ = await engine.docker(
            "docker", "network", "inspect", "--format", "{{range .IPAM.Config}}{{.Gateway}}{{end}}", "docker_gwbridge"
        )
        if code == 0 and out.strip():
            return out.strip()
        assert time.monotonic() < deadline, "swarm made no docker_gwbridge network"
        await asyncio.sleep(0.5)


async def _wait(what: str, check, timeout: float = START_S) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(1)


def _image_id(tag: str) -> str:
    """The image's id (sha256:...): a service given an id never asks a registry for it (a tag makes each node try to
    pull it first), and runs this image even if the tag moves meanwhile."""
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.startswith("sha256:"), done.stderr
    return done.stdout.strip()


def _stack_env(name: str, gateway: str, api_port: int, webhook_port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELEGRAM_", "COURSEBOT_", "RUNNER_"))}
    postgres = engine.image_from("deploy/scale/postgres.Dockerfile", "coursebot-scale-postgres:test")
    haproxy = engine.image_from("deploy/scale/haproxy.Dockerfile", "coursebot-scale-haproxy:test")
    env.update(
        COURSEBOT_IMAGE=_image_id(engine.image()),
        COURSEBOT_JOB_IMAGE=engine.image("job"),
        COURSEBOT_POSTGRES_IMAGE=_image_id(postgres),
        COURSEBOT_HAPROXY_IMAGE=_image_id(haproxy),
        COURSEBOT_SWARM_SECRETS=name,
        TELEGRAM_API_BASE_URL=f"http://{gateway}:{api_port}",
        SWARM_WEBHOOK_PORT=str(webhook_port),
        COURSEBOT_LOG_LEVEL="INFO",
    )
    return env


SECRETS = ("telegram-bot-token", "webhook-secret", "runner-token", "postgres-password")


async def _leave(initialised: bool, gwbridge_before: bool) -> list[str]:
    """Leave swarm mode if this test entered it, and remove the docker_gwbridge it made; what failed, if anything."""
    problems = []
    if initialised:
        code, _, err = await engine.docker("docker", "swarm", "leave", "--force", timeout=120)
        if code != 0:
            problems.append(f"docker swarm leave --force: {err.strip()}")
        if not gwbridge_before and await _network_exists("docker_gwbridge"):
            code, _, err = await engine.docker("docker", "network", "rm", "docker_gwbridge")
            if code != 0:
                problems.append(f"docker network rm docker_gwbridge: {err.strip()}")
    return problems


async def _remove_stack(swarm: Swarm) -> list[str]:
    problems = []
    code, _, err = await engine.docker("docker", "stack", "rm", swarm.name, timeout=120)
    if code != 0:
        problems.append(f"docker stack rm: {err.strip()}")
    # `stack rm` returns before the tasks' containers are gone; the volume and secrets can go only after them.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        _, out, _ = await engine.docker(
            "docker", "ps", "-aq", "--filter", f"label=com.docker.stack.namespace={swarm.name}"
        )
        if not out.strip():
            break
        await asyncio.sleep(1)
    for secret in SECRETS:
        await engine.docker("docker", "secret", "rm", f"{swarm.name}-{secret}")
    for _ in range(10):
        code, _, err = await engine.docker("docker", "volume", "rm", f"{swarm.name}_postgres-data")
        if code == 0 or "no such volume" in err.lower():
            break
        await asyncio.sleep(1)
    else:
        problems.append(f"docker volume rm: {err.strip()}")
    return problems


async def _left_behind() -> bool:
    """Undo the swarm mode a killed run of this test left (its mark on the node): its stacks, the swarm, and the
    docker_gwbridge it made. False when the engine is in a swarm of someone else's."""
    _, mark, _ = await engine.docker(
        "docker", "node", "inspect", "self", "--format", f'{{{{index .Spec.Labels "{MARK}"}}}}'
    )
    if not mark.strip().startswith("gwbridge-"):
        return False
    _, stacks, _ = await engine.docker("docker", "stack", "ls", "--format", "{{.Name}}")
    for stack in stacks.split():
        if stack.startswith("coursebot-swarm-"):
            await _remove_stack(Swarm(stack, {}, None, 0))  # type: ignore[arg-type]
    problems = await _leave(True, gwbridge_before=mark.strip() == "gwbridge-kept")
    assert not problems, problems
    return True


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def swarm() -> AsyncIterator[Swarm]:
    engine.require_engine()
    state, manager = await _swarm_state()
    if state not in ("inactive", "active"):
        pytest.skip(f"the engine's swarm state is {state!r}: neither in a swarm nor out of one")
    if state == "active" and not manager:
        pytest.skip("the engine is a worker of a swarm: a stack is deployed from a manager")
    if state == "active" and await _left_behind():
        state = "inactive"
    name = engine.unique("coursebot-swarm")
    api_port, webhook_port = free_port(), free_port()
    gwbridge_before = await _network_exists("docker_gwbridge")
    initialised = False
    swarm_: Swarm | None = None
    try:
        if state == "inactive":
            # The README's, only on loopback (nothing of the swarm listens beyond this machine), with a pool apart.
            init = _readme("docker swarm init").split("#")[0].split()
            assert init == [
                "docker",
                "swarm",
                "init",
                "--listen-addr",
                "127.0.0.1:2377",
                "--advertise-addr",
                "127.0.0.1",
            ]
            await _docker(*init[1:], "--default-addr-pool", ADDRESS_POOL)
            initialised = True
            # Marked, so that a run killed before it could leave (no finally runs on SIGKILL) is undone by the next.
            made = "gwbridge-made" if not gwbridge_before else "gwbridge-kept"
            node = (await _docker("info", "--format", "{{.Swarm.NodeID}}")).strip()
            await _docker("node", "update", "--label-add", f"{MARK}={made}", node)
        gateway = await _gwbridge_gateway()
        env = _stack_env(name, gateway, api_port, webhook_port)
        swarm_ = Swarm(name, env, None, webhook_port)  # type: ignore[arg-type]
        # The README's commands as written, under the test's names: the secrets, then the deploy.
        made = _readme("printf %s") + "\n" + _readme("openssl rand")
        assert made.count("docker secret create coursebot-swarm-") == len(SECRETS), made
        await _sh(made.replace("coursebot-swarm-", f"{name}-"), {**env, "TELEGRAM_BOT_TOKEN": TOKEN})
        deploy = _readme("DOCKER_GID=")
        assert deploy.endswith(f" -c {STACK_FILE} coursebot-swarm"), deploy
        async with BotApiStandin(token=TOKEN, host=gateway, port=api_port) as api:
            swarm_.api = api
            await _sh(deploy.removesuffix("coursebot-swarm") + name, env)
            yield swarm_
    finally:
        problems = await _remove_stack(swarm_) if swarm_ is not None else []
        problems += await _leave(initialised, gwbridge_before)
        if initialised:
            assert (await _swarm_state())[0] == "inactive", "the engine is still in swarm mode"
        assert not problems, problems


async def _haproxy_stats(swarm: Swarm) -> dict[str, dict[str, str]]:
    """HAProxy's stats (its CSV at :8404/stats;csv, asked from inside its task): {"backend/server": row}."""
    (container,) = await swarm.containers("haproxy")
    request = "GET /stats;csv HTTP/1.0\\r\\n\\r\\n"
    out = await _docker(
        "exec", container, "bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/8404 && printf '{request}' >&3 && cat <&3"
    )
    header = out.find("# pxname,")
    assert header >= 0, out
    body = out[header + 2 :]
    return {f"{row['pxname']}/{row['svname']}": row for row in csv.DictReader(io.StringIO(body))}


async def test_a_learner_is_served_by_the_swarm_stack_and_a_killed_replica_is_replaced(swarm):
    api = swarm.api
    started = time.monotonic()
    for role, count in (("postgres", 1), ("runner", 2), ("bot", REPLICAS), ("haproxy", 1)):

        async def ready(role=role, count=count) -> bool:
            return len(await swarm.healthy(role)) == count

        await _wait(f"{count} healthy {role} task(s)", ready)
    print(f"stack healthy {time.monotonic() - started:.0f} s after the deploy")
    logs = await swarm.logs("bot")
    assert logs.count("receiving updates by webhook") >= REPLICAS, logs
    assert "Traceback" not in logs, logs
    # Every slot of HAProxy's templates holds a task found through Docker's DNS, and each passes its checks.
    await _wait("HAProxy to see 3 replicas and 2 runner hosts up", lambda: _all_up(swarm), timeout=30)

    # The deploy step, once, as the README writes it: in one bot task, with its settings (the secrets made variables
    # by secrets-env).
    url = f"http://127.0.0.1:{swarm.webhook_port}/"
    step = _readme("docker exec").replace("coursebot-swarm_", f"{swarm.name}_")
    assert step.count("https://bot.example.org/telegram") == 1, step
    out = await _sh(step.replace("https://bot.example.org/telegram", url), swarm.env)
    assert "webhook set" in out, out
    assert len(api.calls_to("setWebhook")) == 1  # never by the replicas

    ada = api.learner(user_id=9201)
    since = ada.cursor()
    await ada.send("/start")
    menu = await ada.wait_message(since=since, timeout=60)
    slide = await tap_and_wait_edit(ada, menu, "Start the course")
    slide = await tap_and_wait_edit(ada, slide, "Next")
    since = ada.cursor()
    await ada.send("/run print(2+2)")
    assert (await ada.wait_message(since=since, timeout=120))["text"].strip() == "4"

    # HAProxy spread the webhook's POSTs over the replicas: each slot's sessions, from its stats.
    stats = await _haproxy_stats(swarm)
    per_replica = {f"bot{n}": int(stats[f"bots/bot{n}"]["stot"]) for n in (1, 2, 3)}
    print(f"webhook requests per replica: {per_replica}")
    assert sum(per_replica.values()) >= 4, stats
    assert sum(1 for count in per_replica.values() if count) >= 2, per_replica
    assert int(stats["runners/BACKEND"]["stot"]) >= 1, stats  # the code run went through HAProxy's runner pool

    # One replica dies at once: the learner's next tap is answered by another, and swarm starts a task in its place.
    before = set(await swarm.containers("bot"))
    killed = sorted(before)[0]
    await _docker("kill", killed)
    slide = await asyncio.wait_for(tap_and_wait_edit(ada, slide, "Next"), 60)

    async def replaced() -> bool:
        healthy = set(await swarm.healthy("bot"))
        return len(healthy) == REPLICAS and killed not in healthy and bool(healthy - before)

    await _wait("swarm to replace the killed bot task", replaced, timeout=120)
    # The new task is in HAProxy's slots (found through DNS) and the learner's next taps are answered.
    await _wait("HAProxy to see 3 replicas up", lambda: _all_up(swarm), timeout=30)
    slide = await asyncio.wait_for(tap_and_wait_edit(ada, slide, "Next"), 60)
    since = ada.cursor()
    await ada.send("/run print(3+3)")
    assert (await ada.wait_message(since=since, timeout=120))["text"].strip() == "6"
    await api.settle(quiet=3, timeout=30)  # nothing more comes: no update was answered twice
    texts = [m.get("text", "").strip() for m in ada.messages]
    assert texts[-1] == "6" and texts.count("4") == 1 and texts.count("6") == 1, texts
    assert api.answered_again == []
    assert api.errors() == []
    info = await _docker("exec", next(iter(await swarm.healthy("bot"))), "secrets-env", "coursebot", "webhook", "info")
    assert "pending updates: 0" in info, info
    print(f"deploy to the last answer: {time.monotonic() - started:.0f} s")


async def _all_up(swarm: Swarm) -> bool:
    stats = await _haproxy_stats(swarm)
    servers = [*(f"bots/bot{n}" for n in range(1, REPLICAS + 1)), "runners/runner1", "runners/runner2"]
    return [stats[server]["status"] for server in servers] == ["UP"] * len(servers)
