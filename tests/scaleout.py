"""Scale-out under faults: learners take a lesson through HAProxy, three webhook replicas on one PostgreSQL and two
runner hosts, while replicas are killed and frozen, a runner host dies and PostgreSQL restarts.

Shared by tests/test_scaleout.py (200 learners, in ``make test``) and bench/scaleout.py (the long form, JSON).

The parts are real and run as an operator runs them, each a process of its own on loopback ports (the runner hosts
in network namespaces where this process may make them, tests/runnerpool.py):

* the Bot API stand-in (bot/localapi) plays Telegram, in this process: it delivers webhooks as Telegram's server
  does (a queue per chat, per user's button presses, per poll; only each head in flight; retries with back-off),
  with Telegram's 60 s wait for an answer compressed to ``Plan.reply_wait_s``, so a replica frozen "longer than the
  Bot API's wait" is frozen a few seconds;
* HAProxy (Debian's 2.6) in HTTP mode balances each webhook request over the replicas (round robin, ``/healthz``
  checks on each replica's monitoring port: the backend of deploy/scale/haproxy.cfg, with loopback addresses);
* 3 ``python -m bot run`` replicas in webhook mode on one PostgreSQL database (tests/pg.py's throwaway cluster);
* 2 runner hosts behind HAProxy ``leastconn`` (deploy/haproxy/runners.cfg), reached by the replicas over TCP.

The learners (tests/chaos.py's CourseTaker: they read the chat and tap what it offers, tap again when nothing
comes) each take the first lesson: /start, every slide, the Quick Check, the drills (the Parsons drill is tried in
the runner), and one code run. A share of them, at their first poll, tap "Back to the slides", send /progress and
answer the poll at the same instant: three updates in three of Telegram's queues, which may reach three replicas
at once and must be serialised by the learner's lock.

Afterwards everything is checked from the database and from the stand-in's record of every update and call:

* lost updates: every update the stand-in made is in the inbox, handled, and none was dropped by the stand-in;
  every learner finished (the effects arrived: stranded learners are listed);
* state changes applied twice: learning events unique per (update, kind, item), exercise attempts unique per
  update, each question of the Quick Check answered once per learner;
* per-learner ordering violations: Telegram orders each queue (a learner's messages, their taps, a poll's
  answers), not one queue against another; so within each queue of each learner, the events its updates wrote,
  in the order they were written (events.id), must come from updates in the order they were made (update_id);
  and each learner's slide events go forward through the lesson (never a later slide before an earlier one);
* duplicate replies: a message the bot sent into a chat with the same content as one it sent there before (in this
  script no reply repeats); at most one per kill is expected. Second answers to one button press are counted apart
  (``callbacks_answered_twice``): Telegram refuses them, and the learner sees nothing;
* recovery after a kill: for every update made but not yet answered when a replica died, the seconds from the kill
  to the answer;
* reply latency with no fault near (the first visible reaction: a message sent or edited in the chat), and the
  code run's time to its verdict;
* requests per replica (HAProxy's count per server) and updates handled per replica (the inbox's owner).

Speed figures are reported here; bench/scaleout.py asserts the latency targets (the project's rule: no timing
asserted in timed tests). Two cores run everything (learners and stand-in, HAProxy, 3 replicas, PostgreSQL, 2 runner
hosts): the figures are bound by that.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import itertools
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bot.localapi import WebhookTiming
from bot.localapi.webhooks import queue_key
from bot.storage.db import Database
from tests import pg
from tests.botprocess import BotProcess, bot_env
from tests.chaos import COURSE, ChaosPlan, CourseTaker, Stranded
from tests.conftest import peek
from tests.runnerpool import TOKEN, Haproxy, haproxy_binary, make_hosts, remove_hosts
from tests.standin import BotApiStandin

LESSON = COURSE.lessons[0]
SECRET = "scaleout_SECRET"
WEBHOOK_SAYS = b"receiving updates by webhook"
# The calls that show the learner a reaction (an answer to a button press alone shows nothing).
REACTIONS = frozenset({"sendmessage", "editmessagetext", "sendpoll", "sendphoto", "editmessagereplymarkup"})
SENDS = frozenset({"sendmessage", "sendpoll", "sendphoto"})
THINK_S = 0.03  # a learner looks at the screen up to this long before acting
KILL_REPEAT_S = 5.0  # a reply a kill or freeze repeats comes within a lease and this long of the replica's return
RESTARTS = 3  # a killed replica is started again up to this many times, as a supervisor would


@dataclass(frozen=True)
class Plan:
    """The run: how many learners, how they arrive, which faults come when (seconds after the first learner)."""

    learners: int = 200
    arrival_s: float = 50.0  # learners start spread evenly over this
    burst_share: float = 0.1  # learners who send a tap, a message and a poll answer at the same instant
    replicas: int = 3
    runner_slots: int = 2  # per runner host (its RUNNER_POOL and its maxconn in HAProxy)
    kills: tuple[float, ...] = (8.0, 38.0)  # kill -9 of a replica (the next in turn), restarted at once
    freeze_at: float | None = 22.0  # SIGSTOP of a replica ...
    freeze_s: float = 5.0  # ... for this long (longer than reply_wait_s), then SIGCONT
    runner_kill_at: float | None = 30.0  # kill -9 of a runner host, started again
    pg_restart_at: float | None = 45.0  # PostgreSQL restarted (pg_ctl restart -m fast)
    reply_wait_s: float = 3.0  # Telegram's 60 s wait for the webhook's answer, compressed
    lease_s: float = 3.0  # COURSEBOT_INBOX_LEASE: a dead replica's updates are taken over within this
    patience_s: float = 15.0  # a learner waits this long for a reaction before tapping or sending again
    deadline_s: float = 200.0  # every learner must be done by then
    quiet_after_fault_s: float = 10.0  # a reply within this of a fault counts as under the fault, not quiet
    seed: int = 17
    first_user_id: int = 30_001


@dataclass
class Figures:
    """What a run measured; every figure the issue names."""

    seconds: float = 0.0
    learners: int = 0
    finished: int = 0
    updates: int = 0
    lost_updates: int = 0
    dropped_by_telegram: int = 0
    applied_twice: int = 0  # the three below
    events_twice: int = 0  # learning events stored twice for one update (same kind and item)
    attempts_twice: int = 0  # exercise attempts stored twice for one update
    answers_twice: int = 0  # a learner's Quick Check question with more than one answer recorded
    ordering_violations: int = 0
    duplicate_replies: int = 0  # a message or poll the learner is sent twice
    callbacks_answered_twice: int = 0  # a tap answered again, which Telegram refuses and the learner never sees
    duplicates_unexplained: int = 0  # duplicate replies no kill or freeze explains (see check)
    errors_while_postgres_restarted: int = 0  # ERRORs logged by a replica whose database connection was cut
    sorry_replies: int = 0  # "Sorry, something went wrong ... could not be saved": a step refused, not lost
    kills: int = 0
    freezes: int = 0
    runner_kills: int = 0
    pg_restarts: int = 0
    recovery_after_kill_s: dict[str, float | None] = field(default_factory=dict)
    reply_latency_quiet_ms: dict[str, float | None] = field(default_factory=dict)
    code_run_quiet_ms: dict[str, float | None] = field(default_factory=dict)
    requests_per_replica: dict[str, int] = field(default_factory=dict)
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # per part of the stack (CpuShares)
    handled_per_replica: dict[str, int] = field(default_factory=dict)
    webhook_attempts: int = 0
    webhook_failed_tries: int = 0
    taken_over: int = 0  # updates a replica took over from a dead one (inbox replays)
    repeated_taps: int = 0
    recoveries: int = 0
    resent_code: int = 0
    code_runs: int = 0
    bursts: int = 0


@dataclass
class Result:
    figures: Figures
    problems: list[str]  # what must not happen: lost, twice, out of order, stranded, tracebacks
    details: dict[str, Any]

    def to_json(self) -> str:
        return json.dumps({"figures": asdict(self.figures), "problems": self.problems, "details": self.details})


# --------------------------------------------------------------------------------------------- the stand-in


@dataclass
class Made:
    """One update the stand-in made: which learner, which of Telegram's queues, when."""

    update_id: int
    user_id: int
    queue: str  # chat, callback or poll
    at: float
    answered_at: float | None = None


class RecordingStandin(BotApiStandin):
    """The stand-in, noting each update it makes and the first reaction it gets in that learner's chat."""

    def __init__(self) -> None:
        super().__init__()
        self.made: dict[int, Made] = {}
        self._waiting: dict[int, list[Made]] = defaultdict(list)  # chat id -> updates not yet answered
        self.sends: dict[int, list[str]] = defaultdict(list)  # chat id -> content of each message the bot sent
        self.sent_at: dict[int, list[float]] = defaultdict(list)  # chat id -> when each of those was sent

    def push_update(self, update: dict) -> int | None:
        update_id = super().push_update(update)
        if update_id is not None:
            kind, _ = queue_key(update)
            body = next(v for k, v in update.items() if k != "update_id")
            user_id = (body.get("from") or body.get("user") or {}).get("id")
            if user_id is not None:
                made = Made(update_id, user_id, kind, time.monotonic())
                self.made[update_id] = made
                self._waiting[user_id].append(made)
        return update_id

    def _answered(self, name: str, params: dict, result: Any, arrival: float) -> None:
        super()._answered(name, params, result, arrival)
        method = name.lower()
        if method not in REACTIONS:
            return
        try:
            chat_id = int(params.get("chat_id") or 0)
        except (TypeError, ValueError):
            return
        now = time.monotonic()
        for made in self._waiting.pop(chat_id, ()):
            made.answered_at = now
        if method in SENDS:
            self.sends[chat_id].append(_content(method, params))
            self.sent_at[chat_id].append(now)


def _content(method: str, params: dict) -> str:
    keys = ("text", "question", "options", "caption", "reply_markup")
    return method + json.dumps([str(params.get(k, "")) for k in keys])


# ---------------------------------------------------------------------------------------------- the learners


class ScaleLearner(CourseTaker):
    """One learner taking the first lesson; a burst learner fires three updates at once at their first poll."""

    def __init__(self, sim, plan: ChaosPlan, rng: random.Random, burst: bool):
        super().__init__(sim, plan, rng)
        self.burst = burst
        self.bursts = 0
        self.code_run_s: list[tuple[float, float]] = []  # (sent, verdict) of each code run
        self.finished = False

    async def take_the_lesson(self) -> None:
        reader = await self._start()
        reader = await self._read(LESSON, reader)
        self._intro = reader
        result = await self._quick_check(LESSON, reader)
        await self._drills(LESSON, result)
        await self._open_practice(result)
        sent = time.monotonic()
        await self._submit(f"```python\n{LESSON.exercise.solution}\n```", "All checks passed", result)
        self.code_run_s.append((sent, time.monotonic()))
        self.finished = True

    async def _answer(self, poll: dict) -> None:
        intro = self._current(getattr(self, "_intro", None))
        if self.burst and not self.bursts and intro is not None and "◀ Back to the slides" in str(intro):
            # Three of Telegram's queues at once: the learner's taps, their chat, the poll.
            self.bursts += 1
            self.journal.append("burst: taps back, sends /progress, answers the poll")
            self.sim.tap_nowait(intro, "◀ Back to the slides")
            self.sim.send_nowait("/progress")
        await super()._answer(poll)  # after a think of at most THINK_S: within 50 ms of the two above


# ------------------------------------------------------------------------------------------------ processes


BOTS_CFG = """\
# The webhook's balancer: deploy/scale/haproxy.cfg's `backend bots`, with the replicas on loopback ports.
global
    maxconn 4096
    stats socket {stats} mode 600 level admin

defaults
    mode http
    timeout connect 1s
    timeout client 75s
    timeout server 75s
    timeout queue 2s
    timeout check 1s
    retries 3
    option redispatch 1

frontend webhook
    bind 127.0.0.1:{port}
    default_backend bots

backend bots
    balance roundrobin
    retry-on conn-failure empty-response 503
    option httpchk GET /healthz
    http-check expect status 200
    default-server inter 1s fall 2 rise 2 on-marked-down shutdown-sessions
{servers}
"""


class BotsProxy:
    """A haproxy process balancing webhook POSTs over the replicas."""

    def __init__(self, folder: Path, replicas: list[tuple[str, int, int]]):
        self.folder = folder
        self.stats = folder / "bots-haproxy.sock"
        self.port = pg.free_port()
        servers = "\n".join(
            f"    server {name} 127.0.0.1:{port} check port {health}" for name, port, health in replicas
        )
        self.config = folder / "bots-haproxy.cfg"
        self.config.write_text(BOTS_CFG.format(stats=self.stats, port=self.port, servers=servers))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> None:
        binary = haproxy_binary()
        assert binary is not None
        checked = subprocess.run([binary, "-c", "-q", "-f", str(self.config)], capture_output=True, timeout=30)
        assert checked.returncode == 0, checked.stderr.decode()
        with (self.folder / "bots-haproxy.log").open("ab") as log:
            self.process = subprocess.Popen([binary, "-db", "-f", str(self.config)], stdout=log, stderr=log)
        deadline = time.monotonic() + 30
        while not self.stats.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("haproxy for the bots did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)

    def command(self, line: str) -> str:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(str(self.stats))
            s.sendall(line.encode() + b"\n")
            out = b""
            while chunk := s.recv(65536):
                out += chunk
        return out.decode()

    def servers(self) -> dict[str, dict[str, str]]:
        rows = csv.DictReader(io.StringIO(self.command("show stat").lstrip("# ")))
        return {r["svname"]: r for r in rows if r["pxname"] == "bots" and r["svname"] not in ("BACKEND", "FRONTEND")}

    def requests(self) -> dict[str, int]:
        """Requests HAProxy passed to each replica (HTTP requests where counted, else sessions)."""
        return {name: int(row.get("req_tot") or row["stot"] or 0) for name, row in self.servers().items()}

    async def wait_up(self, name: str, within_s: float = 60.0) -> None:
        deadline = time.monotonic() + within_s
        while self.servers()[name]["status"] != "UP":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} is not UP in HAProxy after {within_s} s")
            await asyncio.sleep(0.1)

    def set_enabled(self, name: str, enabled: bool) -> None:
        self.command(f"{'enable' if enabled else 'disable'} server bots/{name}")


@dataclass
class Replica:
    name: str
    process: BotProcess
    port: int
    health: int
    pids: list[int] = field(default_factory=list)  # one per start: the inbox's owner names the pid

    async def start(self) -> None:
        await self.process.start()
        assert self.process.process is not None
        self.pids.append(self.process.process.pid)
        await self.process.wait_polling(timeout=120, says=WEBHOOK_SAYS)


@dataclass
class Stack:
    """Everything but the learners: PostgreSQL, runner hosts and their HAProxy, replicas and theirs, the stand-in."""

    folder: Path
    cluster: pg.Cluster
    db_url: str
    standin: RecordingStandin
    replicas: list[Replica]
    proxy: BotsProxy
    runner_hosts: list
    runner_proxy: Haproxy

    def cluster_pid(self) -> int:
        """The postmaster's pid (it changes when PostgreSQL restarts); 0 if it is not running."""
        try:
            return int((self.cluster.folder / "data" / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return 0


@contextlib.asynccontextmanager
async def stack(plan: Plan, folder: Path) -> Any:
    """Start every part; stop them all at the end."""
    with pg.cluster() as cluster:
        db_url = cluster.new_database()
        (folder / "runners").mkdir(exist_ok=True)
        hosts_folder, hosts = make_hosts(2, plan.runner_slots, str(folder / "runners"))
        runner_proxy = None
        proxy = None
        standin = RecordingStandin()
        standin.webhook_timing = WebhookTiming(reply_timeout=plan.reply_wait_s, resend_cap=2.0)
        await standin.start()
        replicas: list[Replica] = []
        try:
            # The runner hosts first (a replica checks its runner at start); each imports torch: slow, in parallel.
            await asyncio.gather(*(asyncio.to_thread(host.start) for host in hosts))
            runner_proxy = Haproxy(hosts_folder, hosts)
            runner_proxy.start()
            for host in hosts:
                await runner_proxy.wait_status(host.name, "UP", within_s=60)
            ports = [(f"bot{n + 1}", pg.free_port(), pg.free_port()) for n in range(plan.replicas)]
            for name, port, health in ports:
                env = bot_env(
                    standin,
                    folder / f"{name}-unused.sqlite3",
                    COURSEBOT_DB=db_url,
                    COURSEBOT_CONTROL_SOCKET=str(folder / f"{name}.sock"),
                    COURSEBOT_WEBHOOK_LISTEN=f"127.0.0.1:{port}",
                    COURSEBOT_WEBHOOK_SECRET=SECRET,
                    COURSEBOT_MONITORING=f"127.0.0.1:{health}",
                    COURSEBOT_INBOX_LEASE=str(plan.lease_s),
                    COURSEBOT_RUNNER_URL=runner_proxy.address,
                    COURSEBOT_WATCH="off",
                    RUNNER_TOKEN=TOKEN,
                )
                replicas.append(Replica(name, BotProcess(env, folder / f"{name}.log"), port, health))
            await replicas[0].start()  # migrates the database; the others find it done
            await asyncio.gather(*(replica.start() for replica in replicas[1:]))
            proxy = BotsProxy(folder, ports)
            proxy.start()
            for replica in replicas:
                await proxy.wait_up(replica.name)
            await standin.set_webhook({"url": proxy.url, "secret_token": SECRET, "max_connections": 40})
            yield Stack(folder, cluster, db_url, standin, replicas, proxy, hosts, runner_proxy)
        finally:
            await standin.stop()
            await asyncio.gather(*(r.process.stop() for r in replicas if r.process.running), return_exceptions=True)
            if proxy is not None:
                proxy.stop()
            if runner_proxy is not None:
                runner_proxy.stop()
            remove_hosts(hosts)


# --------------------------------------------------------------------------------------------------- faults


@dataclass
class Fault:
    kind: str  # kill, freeze, runner, postgres
    target: str
    at: float  # time.monotonic() when it struck
    over: float = 0.0  # when what it struck was back (restarted, thawed)


class Faults:
    """Strike each fault of the plan at its time (seconds after ``t0``), in the background."""

    def __init__(self, plan: Plan, stack: Stack, t0: float, extra_kills: tuple[float, ...] = ()):
        self.plan = plan
        self.stack = stack
        self.t0 = t0
        self.done: list[Fault] = []
        self.problems: list[str] = []
        self.notes: list[str] = []  # what went as an operator's supervisor would have it go, for the details
        schedule: list[tuple[float, str]] = [(t, "kill") for t in (*plan.kills, *extra_kills)]
        if plan.freeze_at is not None:
            schedule.append((plan.freeze_at, "freeze"))
        if plan.runner_kill_at is not None:
            schedule.append((plan.runner_kill_at, "runner"))
        if plan.pg_restart_at is not None:
            schedule.append((plan.pg_restart_at, "postgres"))
        self.schedule = sorted(schedule)
        self._turn = 0
        self._tasks: list[asyncio.Task[None]] = []

    async def run(self) -> None:
        for offset, kind in self.schedule:
            await asyncio.sleep(max(0.0, self.t0 + offset - time.monotonic()))
            strike = getattr(self, f"_{kind}")
            self._tasks.append(asyncio.get_running_loop().create_task(self._guarded(strike)))
        await asyncio.gather(*self._tasks)

    async def _guarded(self, strike) -> None:
        try:
            await strike()
        except Exception as exc:  # a fault that could not be struck or healed: the run proves less, say so
            self.problems.append(f"fault {strike.__name__}: {exc!r}")

    def _next_replica(self) -> Replica:
        replica = self.stack.replicas[self._turn % len(self.stack.replicas)]
        self._turn += 1
        return replica

    async def _kill(self) -> None:
        replica = self._next_replica()
        fault = Fault("kill", replica.name, time.monotonic())
        self.done.append(fault)
        await replica.process.kill()
        # Started again at once, and again if it exits at start (as systemd's Restart=always or Docker's restart
        # policy would): it may come up while PostgreSQL restarts.
        for attempt in range(1, RESTARTS + 1):
            try:
                await replica.start()
                break
            except RuntimeError as exc:
                if attempt == RESTARTS:
                    raise
                self.notes.append(f"{replica.name} exited at start ({exc}); started again")
        fault.over = time.monotonic()

    async def _freeze(self) -> None:
        replica = self._next_replica()
        process = replica.process.process
        assert process is not None
        fault = Fault("freeze", replica.name, time.monotonic())
        self.done.append(fault)
        os.kill(process.pid, signal.SIGSTOP)
        await asyncio.sleep(self.plan.freeze_s)
        os.kill(process.pid, signal.SIGCONT)
        fault.over = time.monotonic()

    async def _runner(self) -> None:
        host = self.stack.runner_hosts[0]
        fault = Fault("runner", host.name, time.monotonic())
        self.done.append(fault)
        host.kill()
        await asyncio.to_thread(host.start)
        fault.over = time.monotonic()

    async def _postgres(self) -> None:
        fault = Fault("postgres", "postgres", time.monotonic())
        self.done.append(fault)
        cluster = self.stack.cluster
        # -l: the new server's output goes to the log, not to pg_ctl's pipe (which it would hold open for ever).
        log = str(cluster.folder / "log")
        await asyncio.to_thread(cluster.pg_ctl, "-m", "fast", "-l", log, "-w", "-t", "60", "restart")
        fault.over = time.monotonic()


# ---------------------------------------------------------------------------------------------- CPU shares


class CpuShares:
    """CPU seconds each part of the stack used while the run went on, from /proc, sampled every second.

    Every process of the machine is put under the part it descends from (a killed replica and its restart both count
    as the replicas'); processes of none (other work on the machine) are "other". A process that ends between two
    samples loses at most a second of its CPU. Two cores run everything, so these shares say where they went:
    the stand-in and the learners (Telegram's side, in the test's own process) against the bot's side.
    """

    TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self, parts: Stack):
        self.parts = parts
        self.first: dict[int, float] = {}  # pid -> its CPU seconds when first seen
        self.last: dict[int, tuple[str, float]] = {}  # pid -> (part, its CPU seconds when last seen)
        self._task: asyncio.Task[None] | None = None

    def _roots(self) -> dict[int, str]:
        parts = self.parts
        roots = {os.getpid(): "standin_and_learners", parts.cluster_pid(): "postgresql"}
        for replica in parts.replicas:
            if replica.process.process is not None:
                roots[replica.process.process.pid] = "bot_replicas"
        for proxy in (parts.proxy, parts.runner_proxy):
            if proxy.process is not None:
                roots[proxy.process.pid] = "haproxy"
        for host in parts.runner_hosts:
            if host.process is not None:
                roots[host.process.pid] = "runner_hosts"
        return {pid: part for pid, part in roots.items() if pid}

    def sample(self) -> None:
        stats: dict[int, tuple[int, float]] = {}  # pid -> (parent, CPU seconds)
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / self.TICK)
        roots = self._roots()
        for pid, (_, cpu) in stats.items():
            part, seen, at = "other", set(), pid
            while at and at not in seen:
                seen.add(at)
                if at in roots:
                    part = roots[at]
                    break
                at = stats.get(at, (0, 0.0))[0]
            self.first.setdefault(pid, cpu)
            self.last[pid] = (part, cpu)

    async def _run(self) -> None:
        while True:
            await asyncio.to_thread(self.sample)
            await asyncio.sleep(1.0)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> dict[str, float]:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.sample()
        used: Counter[str] = Counter()
        for pid, (part, cpu) in self.last.items():
            used[part] += cpu - self.first[pid]
        return {part: round(seconds, 1) for part, seconds in sorted(used.items())}


# ------------------------------------------------------------------------------------------------- the run


async def run_learners(plan: Plan, stack: Stack) -> tuple[list[ScaleLearner], list[str]]:
    """Start the learners spread over the arrival window; return them once all are done or stranded, and what
    stranded those who were."""
    rng = random.Random(plan.seed)
    taker_plan = ChaosPlan(
        wrong_share=0.0, think=(0.0, THINK_S), patience=plan.patience_s, run_patience=max(45.0, plan.patience_s)
    )
    bursts = set(rng.sample(range(plan.learners), round(plan.learners * plan.burst_share)))
    learners = [
        ScaleLearner(
            stack.standin.learner(user_id=plan.first_user_id + n),
            taker_plan,
            random.Random(plan.seed * 1000 + n),
            burst=n in bursts,
        )
        for n in range(plan.learners)
    ]
    stranded: list[str] = []
    t0 = time.monotonic()

    async def one(n: int, learner: ScaleLearner) -> None:
        await asyncio.sleep(max(0.0, t0 + plan.arrival_s * n / max(plan.learners, 1) - time.monotonic()))
        try:
            await learner.take_the_lesson()
        except Stranded as exc:
            stranded.append(str(exc))

    tasks = [one(n, learner) for n, learner in enumerate(learners)]
    try:
        await asyncio.wait_for(asyncio.gather(*tasks), plan.deadline_s)
    except TimeoutError:
        late = [lr for lr in learners if not lr.finished]
        stranded.append(f"{len(late)} learners were not done after {plan.deadline_s} s")
        stranded.extend(str(lr._stranded("not done by the deadline")) for lr in late[:3])
    return learners, stranded


async def run(plan: Plan, folder: Path | None = None, extra_kills: tuple[float, ...] = ()) -> Result:
    """The whole run: start the stack, the faults and the learners; check and measure; stop everything."""
    with _folder(folder) as where:
        async with stack(plan, where) as parts:
            cpu = CpuShares(parts)
            cpu.start()
            t0 = time.monotonic()
            faults = Faults(plan, parts, t0, extra_kills)
            striking = asyncio.get_running_loop().create_task(faults.run())
            learners, stranded = await run_learners(plan, parts)
            await striking
            await settle(parts)
            seconds = time.monotonic() - t0
            used = await cpu.stop()
            return await check(plan, parts, learners, [*faults.problems, *stranded], faults, seconds, used)


@contextlib.contextmanager
def _folder(folder: Path | None) -> Iterator[Path]:
    if folder is not None:
        yield folder
        return
    with tempfile.TemporaryDirectory(prefix="coursebot-scaleout-") as made:
        yield Path(made)


async def settle(parts: Stack, within_s: float = 60.0) -> None:
    """Wait until the stand-in delivered everything and the database holds no update pending."""
    db = await Database.open(parts.db_url)
    try:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            webhook = parts.standin.webhook
            [(pending,)] = await peek(db, "SELECT count(*) FROM inbox WHERE state = 'pending'")
            if pending == 0 and parts.standin.updates.settled and (webhook is None or webhook.in_flight == 0):
                return
            await asyncio.sleep(0.2)
    finally:
        await db.close()


# ----------------------------------------------------------------------------------------------- the checks


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def spread(values: list[float], scale: float = 1.0, digits: int = 1) -> dict[str, float | None]:
    def r(v: float | None) -> float | None:
        return None if v is None else round(v * scale, digits)

    return {
        "n": len(values),
        "p50": r(percentile(values, 50)),
        "p95": r(percentile(values, 95)),
        "p99": r(percentile(values, 99)),
        "max": r(max(values) if values else None),
        "mean": r(statistics.fmean(values) if values else None),
    }


async def check(
    plan: Plan,
    parts: Stack,
    learners: list[ScaleLearner],
    problems: list[str],
    faults: Faults,
    seconds: float,
    cpu_seconds: dict[str, float] | None = None,
) -> Result:
    """Check the run from the database and the stand-in's record; measure it (``cpu_seconds``: CpuShares')."""
    standin = parts.standin
    figures = Figures(seconds=round(seconds, 1), learners=len(learners), cpu_seconds=cpu_seconds or {})
    figures.finished = sum(lr.finished for lr in learners)
    made = standin.made
    figures.updates = len(made)
    db = await Database.open(parts.db_url)
    try:
        inbox = dict(await peek(db, "SELECT update_id, state FROM inbox"))
        owners = await peek(db, "SELECT owner, count(*) FROM inbox GROUP BY owner")
        inbox_rows = await peek(db, "SELECT update_id, owner, replays FROM inbox")
        [(taken_over,)] = await peek(db, "SELECT coalesce(sum(replays), 0) FROM inbox")
        events = await peek(db, "SELECT id, user_id, update_id, kind, item_id FROM events ORDER BY id")
        twice_events = await peek(
            db,
            "SELECT user_id, update_id, kind, item_id, count(*) FROM events WHERE update_id IS NOT NULL"
            " GROUP BY user_id, update_id, kind, item_id HAVING count(*) > 1",
        )
        twice_attempts = await peek(
            db,
            "SELECT update_id, count(*) FROM exercise_attempts WHERE update_id IS NOT NULL"
            " GROUP BY update_id HAVING count(*) > 1",
        )
        answers = await peek(
            db, "SELECT user_id, question_id, count(*) FROM quiz_answers GROUP BY user_id, question_id"
        )
    finally:
        await db.close()

    # Lost: made by the stand-in, but not handled (or never stored), or dropped undelivered.
    lost = sorted(u for u in made if inbox.get(u) != "handled")
    dropped = list(standin.webhook.stats.dropped) if standin.webhook is not None else []
    figures.lost_updates = len(lost)
    figures.dropped_by_telegram = len(dropped)
    if lost:
        problems.append(f"{len(lost)} updates not handled: {[(u, inbox.get(u), made[u].queue) for u in lost[:10]]}")
    if dropped:
        problems.append(f"the stand-in dropped {len(dropped)} updates it could not deliver: {dropped[:10]}")

    # Twice.
    over_answered = [(u, q, n) for u, q, n in answers if n > 1]
    figures.events_twice, figures.attempts_twice = len(twice_events), len(twice_attempts)
    figures.answers_twice = len(over_answered)
    figures.applied_twice = len(twice_events) + len(twice_attempts) + len(over_answered)
    if figures.applied_twice:
        problems.append(
            f"applied twice: events {twice_events[:5]}, attempts {twice_attempts[:5]}, answers {over_answered[:5]}"
        )
    unanswered = [lr.sim.user_id for lr in learners if lr.finished and _answered(answers, lr.sim.user_id) != 3]
    if unanswered:
        problems.append(f"learners who finished with a Quick Check answer not recorded once: {unanswered[:10]}")

    # Order.
    violations = ordering_violations(events, made)
    figures.ordering_violations = len(violations)
    if violations:
        claims = {u: (str(o).split(":")[1] if o else "?", r) for u, o, r in inbox_rows}

        def when(update_id: int) -> str:
            m = made[update_id]
            answered = "never" if m.answered_at is None else f"{m.answered_at - faults.t0:.1f}"
            pid, replays = claims.get(update_id, ("?", "?"))
            return f"{update_id} made {m.at - faults.t0:.1f} s, answered {answered}, pid {pid}, replays {replays}"

        shown = [f"{what}: {when(late)} after {when(early)}" for what, late, early in violations[:5]]
        problems.append(f"{len(violations)} ordering violations:\n" + "\n".join(shown))

    # Duplicate replies.
    figures.duplicate_replies = sum(len(sent) - len(set(sent)) for sent in standin.sends.values())
    # A second answer to one button press, refused by Telegram ("query is too old"): the learner sees nothing of it,
    # so it is counted apart (a tap taken over after a kill is answered again: the first answer may have gone out).
    figures.callbacks_answered_twice = len(standin.answered_again)
    again_at = [
        (standin.sent_at[chat][n], standin.sent_at[chat][sent.index(c)], chat, c)
        for chat, sent in standin.sends.items()
        for n, c in enumerate(sent)
        if sent.index(c) != n
    ]
    # A repeat a kill or the freeze explains: a reply that went out just before the fault and was not yet marked, sent
    # again once another replica took its update over (within a lease and a few seconds of the replica being back).
    # Any other repeat is a bug.
    kill_windows = [
        (f.at, max(f.at, f.over) + plan.lease_s + KILL_REPEAT_S) for f in faults.done if f.kind in ("kill", "freeze")
    ]
    figures.duplicates_unexplained = sum(
        not any(start <= again <= end for start, end in kill_windows) for again, _, _, _ in again_at
    )
    repeated = [
        f"chat {chat} at {again - faults.t0:.1f} s (first at {first - faults.t0:.1f} s): {c[:90]}"
        for again, first, chat, c in sorted(again_at)
    ]
    repeated += [f"answered again: {call.describe()[:120]}" for call in standin.answered_again]
    figures.sorry_replies = sum("Sorry, something went wrong" in c for sent in standin.sends.values() for c in sent)

    # Faults and recovery.
    kills = [f for f in faults.done if f.kind == "kill"]
    figures.kills = len(kills)
    figures.freezes = sum(f.kind == "freeze" for f in faults.done)
    figures.runner_kills = sum(f.kind == "runner" for f in faults.done)
    figures.pg_restarts = sum(f.kind == "postgres" for f in faults.done)
    # Each update made before a kill and answered after it: how long after the kill its answer came.
    recovery = [
        m.answered_at - f.at
        for f in kills
        for m in made.values()
        if m.answered_at is not None and m.at <= f.at < m.answered_at
    ]
    figures.recovery_after_kill_s = spread(recovery, digits=2)

    # Latency with no fault near.
    windows = [(f.at - 0.5, max(f.at, f.over) + plan.quiet_after_fault_s) for f in faults.done]

    def quiet(start: float, end: float) -> bool:
        return all(end < a or start > b for a, b in windows)

    replies = [m.answered_at - m.at for m in made.values() if m.answered_at is not None and quiet(m.at, m.answered_at)]
    figures.reply_latency_quiet_ms = spread(replies, 1000.0, 0)
    runs = [end - start for lr in learners for start, end in lr.code_run_s if quiet(start, end)]
    figures.code_run_quiet_ms = spread(runs, 1000.0, 0)

    # Balance.
    figures.requests_per_replica = parts.proxy.requests()
    by_pid = {str(pid): r.name for r in parts.replicas for pid in r.pids}
    handled: Counter[str] = Counter()
    for owner, count in owners:
        pid = str(owner).split(":")[1] if owner and str(owner).count(":") >= 2 else "?"
        handled[by_pid.get(pid, "other")] += count
    figures.handled_per_replica = dict(sorted(handled.items()))
    webhook = standin.webhook
    if webhook is not None:
        figures.webhook_attempts = webhook.stats.attempts
        figures.webhook_failed_tries = webhook.stats.attempts - webhook.stats.delivered
    figures.taken_over = int(taken_over)
    figures.repeated_taps = sum(lr.repeated_taps for lr in learners)
    figures.recoveries = sum(lr.recoveries for lr in learners)
    figures.resent_code = sum(lr.resent_code for lr in learners)
    figures.code_runs = sum(lr.code_runs for lr in learners)
    figures.bursts = sum(lr.bursts for lr in learners)

    for replica in parts.replicas:
        for error in logged_errors(replica.process.log()):
            if any(mark in error for mark in DATABASE_GONE):
                figures.errors_while_postgres_restarted += 1
            else:
                problems.append(f"{replica.name} logged an error:\n{error[:3000]}")
    details = {
        "plan": asdict(plan),
        "faults": [
            asdict(f) | {"at": round(f.at - faults.t0, 1), "over": round(f.over - faults.t0, 1)} for f in faults.done
        ],
        # Starting a drill "over" is how CourseTaker moves on to the next one; the other detours say a reply was late.
        "detours": [d for lr in learners for d in lr.detours if "starts drill" not in d][:20],
        "refused_calls": [c.describe() for c in standin.errors()][:20],
        "duplicate_replies": repeated[:60],
        "fault_notes": faults.notes,
        "load_average": os.getloadavg()[0],
    }
    return Result(figures, problems, details)


# What a replica's error says when PostgreSQL went away under it (the restart): the step is refused, not lost.
DATABASE_GONE = (
    "server closed the connection",
    "AdminShutdown",
    "the connection is closed",
    "connection is lost",
    "the database system is shutting down",
    "the database system is starting up",
    "Connection refused",
)
_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (\w+) ", re.MULTILINE)


def logged_errors(log: str) -> list[str]:
    """Each ERROR (or CRITICAL) entry of a replica's log, with the traceback that follows it."""
    starts = [(m.start(), m.group(1)) for m in _LOG_LINE.finditer(log)] + [(len(log), "")]
    return [log[a:b] for (a, level), (b, _) in itertools.pairwise(starts) if level in ("ERROR", "CRITICAL")]


def _answered(answers: list[tuple], user_id: int) -> int:
    return sum(1 for u, _, n in answers if u == user_id and n == 1)


def ordering_violations(events: list[tuple], made: dict[int, Made]) -> list[tuple[str, int, int]]:
    """Within each of a learner's queues, the events its updates wrote come in the order the updates were made; and
    a learner's slides go forward through the lesson. Each violation: (what, the late update, the one before it)."""
    violations: list[tuple[str, int, int]] = []
    last: dict[tuple[int, str], int] = {}
    slides = {slide.id: n for n, slide in enumerate(LESSON.slides)}
    furthest: dict[int, tuple[int, int]] = {}  # learner -> (furthest slide, the update that showed it)
    for event_id, user_id, update_id, kind, item_id in events:
        source = made.get(update_id) if update_id is not None else None
        if source is None:
            continue
        key = (user_id, source.queue)
        if update_id < last.get(key, 0):
            violations.append((f"learner {user_id}'s {source.queue} queue, event {event_id}", update_id, last[key]))
        last[key] = max(last.get(key, 0), update_id)
        if kind == "slide" and item_id in slides:
            n = slides[item_id]
            before, shown_by = furthest.get(user_id, (-1, 0))
            if n < before:
                violations.append(
                    (f"learner {user_id} shown slide {n + 1} after slide {before + 1}", update_id, shown_by)
                )
            elif n > before:
                furthest[user_id] = (n, update_id)
    return violations


# ---------------------------------------------------------------------------------------------- throughput


async def throughput(parts: Stack, replicas: int, learners: int, seconds: float, first_user_id: int) -> float:
    """Updates per second the stack answers with ``replicas`` of its replicas in HAProxy's rotation (the others
    disabled there), ``learners`` each turning slides back and forth as fast as the replies come, for ``seconds``."""
    for n, replica in enumerate(parts.replicas):
        parts.proxy.set_enabled(replica.name, n < replicas)
    sims = [parts.standin.learner(user_id=first_user_id + n) for n in range(learners)]
    answered = 0
    started = asyncio.Event()
    stop_at = 0.0

    async def turn(sim) -> None:
        nonlocal answered
        since = sim.cursor()
        sim.send_nowait("/start")
        menu = await sim.wait_message(lambda m: "Start the course" in str(m), timeout=60, since=since)
        sim.tap_nowait(menu, "Start the course")
        reader = await sim.wait_edit(menu["message_id"], timeout=60)
        await started.wait()
        while time.monotonic() < stop_at:
            label = "Next" if "Next" in str(reader.get("reply_markup")) else "◀ Back"
            edited = asyncio.ensure_future(sim.wait_edit(reader["message_id"], timeout=60))
            sim.tap_nowait(reader, label)
            reader = await edited
            answered += 1

    tasks = [asyncio.ensure_future(turn(sim)) for sim in sims]
    await asyncio.sleep(min(10.0, learners * 0.05))  # everyone at their first slide
    begun = time.monotonic()
    stop_at = begun + seconds
    counted_from = answered
    started.set()
    await asyncio.gather(*tasks)
    elapsed = time.monotonic() - begun
    for replica in parts.replicas:
        parts.proxy.set_enabled(replica.name, True)
    return (answered - counted_from) / elapsed
