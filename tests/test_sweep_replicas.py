"""Two replicas' reminder sweeps on one PostgreSQL (a throwaway cluster, tests/pg.py), sending through the stand-in:
each due reminder is claimed and sent once across both, together they keep one bot-wide pace (the send budget in
the database), and a 429 at one holds the other too.

Two Database objects are two pools, as two bot processes have; each sweep sends through a Bot of its own. Time is
virtual: it moves only when both sweeps sleep for their next slot and no send is on its way, so every send reaches
the stand-in (and its flood limit, on the same clock) at the moment it was sent.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import heapq
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace

import psycopg
import pytest
from telegram import Bot

from bot import app
from bot.config import Config
from bot.library.live import Library
from bot.localapi.errors import ApiError
from bot.localapi.floodlimit import POSTING, FloodLimit
from bot.retention.bulk_sender import MESSAGES_PER_SECOND, Delivery, LocalBudget, SendBudget
from bot.storage.db import Database
from bot.storage.sending import SharedBudget
from bot.sweep import Outgoing, ReminderSweep, SweepReport, send_budget, telegram_send
from tests.botprocess import replicas_on, wait_until
from tests.conftest import LESSONS, LOCALES
from tests.test_bulk_sender import busiest_second

START = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)
FIRST_LESSON = "requires-grad"
LEARNERS = range(2_000_000, 2_000_400)
# Half the learners are due at START, the rest a second later: the replicas meet at START over the same due rows
# (each reminder is claimed by one of them), and a replica whose sweep found nothing left finds the second half
# while the other is still sending: both send at once.
SECOND_GROUP_DUE = START + dt.timedelta(seconds=1)


class SharedTime:
    """Virtual time for several sweeps: it moves to the earliest wake-up once every sweep sleeps and no send is out."""

    def __init__(self, start: dt.datetime):
        self.now = start
        self.sweeping = 0
        self.sending = 0
        self._sleepers: list[tuple[dt.datetime, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def clock(self) -> dt.datetime:
        return self.now

    def seconds(self) -> float:
        return self.now.timestamp()

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + dt.timedelta(seconds=max(seconds, 0.0)), next(self._order), future))
        # Soon, not now: a send the sleeper just started (a task, scheduled before this) counts as on its way first.
        asyncio.get_running_loop().call_soon(self._move)
        await future

    def _move(self) -> None:
        if self._sleepers and len(self._sleepers) >= self.sweeping and not self.sending:
            wake, _, future = heapq.heappop(self._sleepers)
            self.now = max(self.now, wake)
            future.set_result(None)

    async def replica(self, sweep: ReminderSweep) -> list[SweepReport]:
        """Run a replica's sweeps as one of those time waits for: at START, then at the next due moment (or as soon
        as the first sweep's sending is done, if later), then once more."""
        self.sweeping += 1
        try:
            reports = [await sweep.once()]
            wait = (SECOND_GROUP_DUE - self.now).total_seconds()
            if wait > 0:
                await self.sleep(wait)
            return [*reports, await sweep.once(), await sweep.once()]
        finally:
            self.sweeping -= 1
            self._move()

    def tracked(self, send: Callable[[Outgoing], Awaitable[Delivery]]) -> Callable[[Outgoing], Awaitable[Delivery]]:
        """Return ``send``, with time standing still while it is on its way."""

        async def sending(item: Outgoing) -> Delivery:
            self.sending += 1
            try:
                return await send(item)
            finally:
                self.sending -= 1
                # Soon: the 429 this send met is held (BulkSender._attempt, on HeldInTime) before time moves.
                asyncio.get_running_loop().call_soon(self._move)

        return sending


class HeldInTime:
    """A send budget with time standing still while a hold is written: the hold a 429 calls for is in the database
    before any replica wakes for its next slot, as it is within a slot's length on the wall clock."""

    def __init__(self, budget: SendBudget, time: SharedTime):
        self.budget = budget
        self.time = time

    async def reserve(self, now: float) -> float:
        return await self.budget.reserve(now)

    async def hold(self, until: float) -> None:
        self.time.sending += 1
        try:
            await self.budget.hold(until)
        finally:
            self.time.sending -= 1
            asyncio.get_running_loop().call_soon(self.time._move)

    async def held_until(self) -> float:
        return await self.budget.held_until()


@dataclass
class RecordingFlood(FloodLimit):
    """The stand-in's flood limit, noting every posting call (when, to whom) and every 429 (when, for how long)."""

    sends: list[tuple[float, int]] = field(default_factory=list)
    accepted: list[tuple[float, int]] = field(default_factory=list)
    refusals: list[tuple[float, int]] = field(default_factory=list)

    def check(self, method: str, chat_id: object) -> None:
        if method.lower() not in POSTING:
            return
        now = self.clock()
        self.sends.append((now, int(str(chat_id))))
        try:
            super().check(method, chat_id)
        except ApiError as exc:
            self.refusals.append((now, int((exc.parameters or {})["retry_after"])))
            raise
        self.accepted.append((now, int(str(chat_id))))


def due_learners(url: str) -> None:
    """Learners with reminders on, half due at START and half at SECOND_GROUP_DUE, each with lesson 1 begun (the
    reminder names it)."""
    with psycopg.connect(url) as conn, conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO learners (user_id, chat_id, created_at, updated_at, reminders, remind_at)"
            " VALUES (%s, %s, 'x', 'x', 'on', %s)",
            [(user, user, int((START if user % 2 else SECOND_GROUP_DUE).timestamp())) for user in LEARNERS],
        )
        cursor.executemany(
            "INSERT INTO lesson_progress (user_id, lesson_id) VALUES (%s, %s)", [(u, FIRST_LESSON) for u in LEARNERS]
        )


async def replicas(stack: AsyncExitStack, config: Config, url: str, time: SharedTime) -> list[ReminderSweep]:
    """Two replicas' sweeps: each its own database pool and its own Bot, on the test's time."""
    library = Library(LESSONS, LOCALES)
    sweeps = []
    for _ in range(2):
        db = await Database.open(url, clock=time.clock)
        stack.push_async_callback(db.close)
        bot = Bot(config.token, base_url=config.bot_base_url)
        await bot.initialize()
        stack.push_async_callback(bot.shutdown)
        # The budget the bot takes on this database (SharedBudget on PostgreSQL).
        budget = HeldInTime(send_budget(db), time)
        # batch: the due learners are read in several batches, so both replicas claim some of them.
        sweeps.append(
            ReminderSweep(
                db,
                library,
                time.tracked(telegram_send(bot)),
                clock=time.clock,
                sleep=time.sleep,
                budget=budget,
                batch=40,
            )
        )
    return sweeps


def budgets(sweeps: list[ReminderSweep]) -> list[HeldInTime]:
    return [sweep.budget for sweep in sweeps if isinstance(sweep.budget, HeldInTime)]


def sum_up(reports: list[SweepReport]) -> SweepReport:
    """Return one replica's sweeps as one report (the counts added up, every send's moment)."""
    return SweepReport(
        sent=sum(r.sent for r in reports),
        failed=sum(r.failed for r in reports),
        retries=sum(r.retries for r in reports),
        sent_at=[moment for r in reports for moment in r.sent_at],
    )


@pytest.fixture
async def on_postgresql(standin, pg_url) -> AsyncIterator[str]:
    # Migrated once before the replicas start, then the due learners, as the stand-in knows them.
    await (await Database.open(pg_url)).close()
    due_learners(pg_url)
    for user in LEARNERS:
        standin.learner(user)._state.known = True  # as if each had written to the bot once
    yield pg_url


async def test_two_replicas_send_each_reminder_once_at_one_bot_wide_pace(standin, config, on_postgresql):
    time = SharedTime(START)
    # Telegram's own limit, which the shared pace (28 a second) stays under: no 429 comes.
    standin.flood = flood = RecordingFlood(clock=time.seconds)
    async with AsyncExitStack() as stack:
        sweeps = await replicas(stack, config, on_postgresql, time)
        held = budgets(sweeps)
        assert len(held) == 2 and all(isinstance(budget.budget, SharedBudget) for budget in held)
        runs = await asyncio.gather(*(time.replica(sweep) for sweep in sweeps))
    reports = [report for run in runs for report in run]
    # Once across replicas: every reminder claimed by one of them, sent once, to each learner once.
    assert sum(r.claimed for r in reports) == sum(r.sent for r in reports) == len(LEARNERS)
    assert sorted(chat for _, chat in flood.accepted) == list(LEARNERS)
    assert all(run[-1].claimed == run[-1].sent == 0 for run in runs)  # nothing was left for a last sweep
    sent = [sum(r.sent for r in run) for run in runs]
    assert all(count > len(LEARNERS) // 10 for count in sent), sent  # both took part
    # One pace for the bot, not one per replica: never more than 28 sends in a second (two budgets of their own
    # would send 56), so the whole lot takes at least as long as one process alone would.
    times = [moment for moment, _ in flood.sends]
    assert busiest_second(times) <= MESSAGES_PER_SECOND + 1 and flood.refused == 0
    assert max(times) - min(times) >= (len(LEARNERS) - 1) / MESSAGES_PER_SECOND * 0.99
    # And both sent in the same seconds: the pace was shared, not taken in turns.
    first, second = ({int(moment) for report in run for moment in report.sent_at} for run in runs)
    assert len(first & second) > 3, (sorted(first), sorted(second))


async def test_a_429_at_one_replica_holds_the_other_too(standin, config, on_postgresql):
    time = SharedTime(START)
    # Stricter than the sweeps' pace, so the stand-in answers 429 (retry_after: whole seconds) again and again.
    standin.flood = flood = RecordingFlood(clock=time.seconds, overall_per_second=20.0, overall_burst=20.0)
    async with AsyncExitStack() as stack:
        sweeps = await replicas(stack, config, on_postgresql, time)
        runs = await asyncio.gather(*(time.replica(sweep) for sweep in sweeps))
    reports = [sum_up(run) for run in runs]
    assert sum(r.sent for r in reports) == len(LEARNERS) and sum(r.failed for r in reports) == 0
    assert sorted(chat for _, chat in flood.accepted) == list(LEARNERS)
    assert flood.refused > 0 and sum(r.retries for r in reports) == flood.refused  # each 429 waited out, then resent
    assert all(r.sent > len(LEARNERS) // 10 for r in reports), [r.sent for r in reports]  # both sent
    # After each 429, neither replica sends until its retry_after has passed: the other replica's message that
    # took its slot before the 429 finds the hold ending after its slot, and takes a new one.
    sends = sorted(moment for moment, _ in flood.sends)
    for refused_at, retry_after in flood.refusals:
        during = [moment for moment in sends if refused_at < moment < refused_at + retry_after]
        assert during == [], (refused_at, retry_after, during)
    # Held, the pair of them keeps to the stricter limit: far fewer 429s than sends.
    assert flood.refused < len(LEARNERS) // 4


async def test_the_bot_takes_the_shared_budget_on_postgresql_and_its_own_on_sqlite(standin, config, pg_url):
    library = Library(LESSONS, LOCALES)
    slower = replace(config, messages_per_second=10.0)
    for chosen, kind, rate in (
        (replace(config, db_url=pg_url), SharedBudget, MESSAGES_PER_SECOND),
        (replace(slower, db_url=pg_url), SharedBudget, 10.0),
        (config, LocalBudget, MESSAGES_PER_SECOND),
    ):
        db = await Database.open(chosen.database)
        try:
            async with app.reminder_sweep(chosen, library, db) as sweep:
                assert isinstance(sweep.budget, kind)
                # Under the bot's ceiling (COURSEBOT_MESSAGES_PER_SECOND), and never above the sender's own pace.
                assert sweep.budget.interval == pytest.approx(1 / rate)
        finally:
            await db.close()


async def test_two_bot_processes_send_each_due_reminder_once_from_one_budget(standin, pg_url, tmp_path):
    # Real processes on the wall clock: each sweeps as it starts. No timing is asserted here (the tests above do it
    # on virtual time): only that each reminder goes out once, and that both took their slots from the one budget.
    count = 60
    learners = range(3_000_000, 3_000_000 + count)
    await (await Database.open(pg_url)).close()
    began = dt.datetime.now(dt.UTC)
    with psycopg.connect(pg_url) as conn, conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO learners (user_id, chat_id, created_at, updated_at, reminders, remind_at)"
            " VALUES (%s, %s, 'x', 'x', 'on', %s)",
            [(user, user, int(began.timestamp()) - 60) for user in learners],
        )
        cursor.executemany(
            "INSERT INTO lesson_progress (user_id, lesson_id) VALUES (%s, %s)", [(u, FIRST_LESSON) for u in learners]
        )
    for user in learners:
        standin.learner(user)._state.known = True
    bots = replicas_on(standin, pg_url, tmp_path)

    def reminded() -> list[int]:
        return [call.params["chat_id"] for call in standin.calls_to("sendMessage") if call.ok]

    try:
        await asyncio.gather(*(bot.start() for bot in bots))
        await wait_until(lambda: len(reminded()) >= count, "every reminder sent", timeout=90)
        await asyncio.gather(*(bot.wait_polling() for bot in bots))
        await asyncio.sleep(1)  # time for a second, wrong, reminder to arrive
    finally:
        await asyncio.gather(*(bot.stop() for bot in bots))
    assert sorted(reminded()) == list(learners)
    logs = [bot.log() for bot in bots]
    assert all("Traceback" not in log for log in logs), logs
    with psycopg.connect(pg_url) as conn:
        [(sent,)] = conn.execute("SELECT count(*) FROM reminders_sent WHERE outcome = 'sent'").fetchall()
        [(next_free,)] = conn.execute("SELECT next_free FROM send_budget WHERE name = 'bot'").fetchall()
    assert sent == count
    # Every send took a slot from the one budget in the database, 1/28 s apart.
    assert next_free >= began.timestamp() + count / MESSAGES_PER_SECOND
