"""The reminder sweep: once a minute, claim the learners whose reminder is due and send them through one sender.

A learner's next reminder time is a column (indexed); the sweep reads the due rows in batches, decides for
each (bot.retention.plan), and claims each reminder under its unique (learner, local day) key in the same
transaction that plans the next one. Only a claimed reminder is sent, so a second sweep, a restart at the
due moment or another process finds the key taken and sends nothing. A reminder claimed by a process that
stopped before sending it is sent by the next sweep that finds it older than ``STALE_CLAIM``.

Sending goes through one ``BulkSender`` under Telegram's bot-wide rate, waiting out 429s; a 403 (the learner
blocked the bot) turns their reminders off for good. On PostgreSQL every replica sweeps, each sending only what it
claimed, and all of them take their slots from one budget in the database (bot.storage.sending.SharedBudget), so
together they keep the bot's pace, and a 429 at one holds them all. Time is the injected clock's; sleeping is
injected too, so tests run the sweep on virtual time.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from telegram import Bot
from telegram.constants import ParseMode
from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter, TelegramError
from telegram.warnings import PTBDeprecationWarning

from bot import retention_render
from bot.i18n import I18n
from bot.library.live import Library
from bot.render import Screen
from bot.retention import plan
from bot.retention.bulk_sender import (
    MESSAGES_PER_SECOND,
    Blocked,
    BulkSender,
    Delivery,
    Failed,
    LocalBudget,
    SendBudget,
    Sent,
    Wait,
)
from bot.retention.plan import Action, Status, reminder_state
from bot.retention.reminders import HISTORY
from bot.storage.db import Clock, Database
from bot.storage.retention import Claim, ReminderRow, RetentionStore
from bot.storage.sending import SharedBudget

log = logging.getLogger(__name__)

INTERVAL = dt.timedelta(minutes=1)
BATCH = 500  # learners read and claimed per transaction
YIELD_EVERY = 25  # learners planned between two turns of the event loop: updates are served meanwhile
STALE_CLAIM = dt.timedelta(minutes=15)  # a claim this old with no outcome was cut short by a stop: send it


def epoch(moment: dt.datetime) -> int:
    """Return ``moment`` in whole seconds since the Unix epoch."""
    return int(moment.timestamp())


def moment(seconds: int) -> dt.datetime:
    """Return an aware UTC datetime for seconds since the epoch."""
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


@dataclass(frozen=True)
class Outgoing:
    """One message the sweep sends: to whom, under which claim, with what text and buttons."""

    claim: Claim
    chat_id: int
    screen: Screen
    pause: bool = False  # the note that reminders pause, not a reminder


@dataclass
class SweepReport:
    """What one sweep did."""

    due: int = 0  # learners whose time had come
    claimed: int = 0
    sent: int = 0
    paused: int = 0
    blocked: int = 0
    failed: int = 0
    retries: int = 0  # 429s waited out
    sent_at: list[float] = field(default_factory=list)


Send = Callable[[Outgoing], Awaitable[Delivery]]


def send_budget(db: Database, rate: float = MESSAGES_PER_SECOND) -> SendBudget:
    """Return the bot's budget of sends, ``rate`` a second: on PostgreSQL one for every replica, kept in the database
    (a 429 at one holds them all); on SQLite, whose one process is every sender there is, kept in memory."""
    if db.backend.name == "postgresql":
        return SharedBudget(db, rate)
    return LocalBudget(rate)


def telegram_send(bot: Bot) -> Send:
    """Return a send through ``bot`` that reports Telegram's answer as a Delivery (never raises for one)."""

    async def send(item: Outgoing) -> Delivery:
        try:
            await bot.send_message(
                item.chat_id, item.screen.text, parse_mode=ParseMode.HTML, reply_markup=item.screen.buttons
            )
        except RetryAfter as exc:
            with warnings.catch_warnings():
                # PTB warns that retry_after becomes a timedelta one day; both are read below.
                warnings.simplefilter("ignore", PTBDeprecationWarning)
                retry = exc.retry_after
            return Wait(retry.total_seconds() if isinstance(retry, dt.timedelta) else float(retry))
        except Forbidden:
            return Blocked()
        except BadRequest as exc:
            if "chat not found" in exc.message.lower():
                return Blocked()
            return Failed(exc.message)
        except (NetworkError, TelegramError) as exc:
            return Failed(str(exc))
        return Sent()

    return send


class ReminderSweep:
    """Claims due reminders and sends them; ``once`` is one sweep, ``run`` sweeps every minute."""

    def __init__(
        self,
        db: Database,
        library: Library,
        send: Send,
        *,
        clock: Clock | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        budget: SendBudget | None = None,
        rate: float = MESSAGES_PER_SECOND,
        batch: int = BATCH,
    ):
        self.db = db
        self.store = RetentionStore(db)
        self.library = library
        self.clock = clock or db.clock
        self.sleep = sleep
        # The bot-wide pace: shared through PostgreSQL by every replica's sweep, or this process's own (send_budget).
        self.budget = budget or send_budget(db, rate)
        self.sender = BulkSender(send, self.budget, lambda: self.clock().timestamp(), sleep)
        self.batch = batch

    async def once(self) -> SweepReport:
        """Sweep once: send what a stopped process left claimed, then claim and send what is due now."""
        now = self.clock()
        report = SweepReport()
        outgoing = await self._left_claimed(now)
        while True:
            due = await self.store.due_reminders(epoch(now), self.batch)
            if not due:
                break
            report.due += len(due)
            outgoing += await self._claim(due, now, report)
            if len(due) < self.batch:
                break
        if outgoing:
            await self._send(outgoing, report)
        # The habit reads only the last weeks: older activity is dead weight.
        await self.store.forget_activity(epoch(now - HISTORY))
        return report

    async def run(self) -> None:
        """Sweep at the start of every minute of the clock, until cancelled."""
        while True:
            try:
                report = await self.once()
                if report.due or report.sent:
                    log.info(
                        "reminder sweep: %d due, %d sent, %d paused, %d blocked, %d failed, %d 429s waited out",
                        report.due,
                        report.sent,
                        report.paused,
                        report.blocked,
                        report.failed,
                        report.retries,
                    )
            except Exception:
                # The sweep goes on next minute; the log says why this one failed.
                log.exception("the reminder sweep failed")
            now = self.clock()
            next_minute = now.replace(second=0, microsecond=0) + INTERVAL
            await self.sleep((next_minute - now).total_seconds())

    async def _claim(self, user_ids: list[int], now: dt.datetime, report: SweepReport) -> list[Outgoing]:
        rows = {row.user_id: row for row in await self.store.reminder_rows(user_ids, epoch(now))}
        claims: list[tuple[Claim, int | None, str]] = []
        screens: dict[int, tuple[ReminderRow, Action]] = {}
        for n, user_id in enumerate(user_ids, 1):
            if n % YIELD_EVERY == 0:
                await asyncio.sleep(0)  # planning is CPU: let the updates waiting meanwhile be handled
            row = rows.get(user_id)
            if row is None:
                continue
            decision = plan.decide(reminder_state(row), now)
            next_at = None if decision.next_at is None else epoch(decision.next_at)
            if decision.action is Action.NOTHING or decision.key is None:
                await self.store.plan(user_id, next_at)
                continue
            claim = Claim(user_id, decision.key.day.isoformat(), decision.key.snoozed)
            claims.append((claim, next_at, decision.status.value))
            screens[user_id] = (row, decision.action)
        claimed = await self.store.claim(claims, epoch(now))
        report.claimed += len(claimed)
        outgoing = []
        for n, claim in enumerate(claimed, 1):
            if n % YIELD_EVERY == 0:
                await asyncio.sleep(0)
            row, action = screens[claim.user_id]
            outgoing.append(Outgoing(claim, row.chat_id, self._screen(row, action), action is Action.PAUSE))
        return outgoing

    async def _left_claimed(self, now: dt.datetime) -> list[Outgoing]:
        claims = await self.store.unsent(epoch(now - STALE_CLAIM))
        if not claims:
            return []
        rows = {row.user_id: row for row in await self.store.reminder_rows([c.user_id for c in claims], epoch(now))}
        outgoing = []
        for claim in claims:
            row = rows.get(claim.user_id)
            if row is not None and row.status in (Status.ON, Status.PAUSED):
                action = Action.PAUSE if row.status == Status.PAUSED else Action.SEND
                outgoing.append(Outgoing(claim, row.chat_id, self._screen(row, action), action is Action.PAUSE))
        return outgoing

    def _screen(self, row: ReminderRow, action: Action) -> Screen:
        """Render the learner's reminder in their language."""
        edition = self.library.current
        i18n: I18n = edition.i18n
        language = i18n.choose(row.language, row.telegram_language)
        with i18n.use(language):
            if action is Action.PAUSE:
                return retention_render.reminders_paused()
            course = edition.content.course(language)
            lesson = course.lesson(row.unfinished_lesson) if row.unfinished_lesson else None
            return retention_render.reminder(row.cards_due, lesson)

    async def _send(self, outgoing: list[Outgoing], report: SweepReport) -> None:
        drained = await self.sender.drain(outgoing)
        report.retries += drained.retries
        report.sent_at = drained.sent_at
        blocked = {item.claim for item in drained.blocked}
        failed = {item.claim for item, _ in drained.failed}
        outcomes: list[tuple[Claim, str]] = []
        for item in outgoing:
            if item.claim in blocked:
                outcomes.append((item.claim, "blocked"))
                await self.store.blocked(item.claim.user_id)
                report.blocked += 1
            elif item.claim in failed:
                outcomes.append((item.claim, "failed"))
                report.failed += 1
            else:
                paused = item.pause
                outcomes.append((item.claim, "paused" if paused else "sent"))
                report.paused += paused
                report.sent += not paused
        await self.store.delivered(outcomes)
        for item, reason in drained.failed:
            log.warning("reminder to user %s not sent: %s", item.claim.user_id, reason)
