"""How updates flow in: on disk before Telegram is told they arrived, then concurrently across learners, in order
for each, each in its learner's language, and each one handled once.

Telegram keeps an update until a getUpdates with a higher offset confirms it. PTB's Updater confirms a batch with
its next call, before the batch is handled, so a crash in between lost it (for a poll answer, for good: a quiz
cannot be answered twice). Here ``Polling`` stores every batch in the inbox (bot.storage.db) before that next
call; the ``Inbox`` counts an update handled once its handlers and every task they started for it have finished,
and at start hands the application, in order, what a crash left unhandled. The inbox also drops Telegram's
redeliveries: an update id it holds is never handled again.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import inspect
import json
import logging
import os
import socket
import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from telegram import Bot, Update
from telegram.error import RetryAfter, TelegramError, TimedOut
from telegram.ext import Application, BaseUpdateProcessor

from bot.context import BotData, CourseContext
from bot.errors import ClaimLost, StorageError
from bot.logs import UPDATE_ID
from bot.storage.db import Database
from bot.storage.inbox import Pending

log = logging.getLogger(__name__)

UpdateScope = Callable[[object], AbstractAsyncContextManager[None]]
# Sends what an update handled again stored in the outbox; True: it stored replies, so its flow must not run again.
Resend = Callable[[Update], Awaitable[bool]]
Clock = Callable[[], dt.datetime]
# Database.learner_lock: hold a learner's lock (by user id) for a block; given an update's id, yield its learner's
# earlier pending updates (Database.earlier_pending), read under the lock.
LearnerLock = Callable[[int, int | None], AbstractAsyncContextManager[Sequence[Pending] | None]]
T = TypeVar("T")

# A crash may interrupt any update under way. One still pending after it was handled again at a start is a
# suspect: the next start handles it alone, watching it for WATCH_ALONE seconds. If the bot dies meanwhile MAX_CRASHES
# times, the update is taken to crash it: it is given up and logged. (Many crashes find it pending before that.)
MAX_CRASHES = 2
# A learner's update waiting for an earlier one at another replica asks again every 30th of a lease, at most every
# ORDER_POLL seconds, and goes ahead out of order (logged) after ORDER_WAIT leases (bot.updates.Inbox.earlier_first).
ORDER_POLL, ORDER_WAIT = 0.1, 2
WATCH_ALONE = 5.0
# Telegram keeps an unconfirmed update for 24 hours, so no redelivery comes later than that; handled ids are kept
# twice as long. (After a week without updates Telegram may start ids anywhere, even below old ones.)
REMEMBER_HANDLED = dt.timedelta(days=2)
FORGET_EVERY = dt.timedelta(hours=1)
# A process claims each update it takes, for LEASE seconds, and renews its claims every third of that while it runs.
# On a shared database a replay takes only updates nobody holds or whose lease ran out: a replica starting never
# handles again what a live one is handling, and a live one takes over, within a lease, what a dead one left. So a
# lease is how long a learner whose update a killed replica held waits for it (issue 17: recovery under 10 s);
# renewing every third of it is one UPDATE per replica every 2.7 s.
LEASE = 8.0
# A batch of updates that could not be marked handled is tried again this often, every so many seconds.
MARK_TRIES, MARK_RETRY_S = 30, 1.0
# Waits after a failed getUpdates: the first, then each one half as long again, up to the last (seconds).
RETRY_FIRST, RETRY_MAX = 1.0, 30.0


def utc_now() -> dt.datetime:
    """Return the current time in UTC (the default clock)."""
    return dt.datetime.now(dt.UTC)


def _learner_key(update: object) -> int | None:
    if not isinstance(update, Update):
        return None
    user = update.effective_user
    if user is not None:
        return user.id
    chat = update.effective_chat
    return chat.id if chat is not None else None


def _read_update(update_id: int, payload: str, bot: Bot) -> Update | None:
    """Read back an update stored in the inbox; None (logged) if it cannot be read."""
    try:
        return Update.de_json(json.loads(payload), bot)
    except (ValueError, TypeError, KeyError) as exc:
        # Stored by another version of PTB, say, with a field this one requires: never readable, so given up.
        log.error("update %s was given up: it cannot be read back (%s)", update_id, exc)
        return None


class Inbox:
    """The updates on disk from the moment they are fetched until they are handled.

    ``begin``/``end`` bracket every piece of work done for an update (its handling, each task started for it);
    when the last ends, the update is marked handled, in a batch written in the background (``flush`` waits for
    it). Work that was cancelled leaves its update pending, to be handled again at the next start.
    """

    def __init__(self, db: Database, clock: Clock = utc_now, watch_alone: float = WATCH_ALONE, lease: float = LEASE):
        self._db = db
        self._clock = clock
        self._watch_alone = watch_alone
        self._lease = dt.timedelta(seconds=lease)
        # Who holds this process's claims: unique to this run (a restarted process never mistakes its old claims,
        # whose work died with it, for live ones); host and pid name it in the database for an operator.
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        # One process on an SQLite file: no other process can hold a claim, so a replay takes every pending update.
        self._shared = db.backend.name != "sqlite"
        if self._shared:
            # An update's write then checks that this process still holds its claim (bot.storage.outcomes).
            db.claimant = self.owner
        self._keeper: asyncio.Task[None] | None = None
        self._work: dict[int, int] = {}  # update id -> pieces of work under way; present from hand-over to the end
        self._interrupted: set[int] = set()
        self._again: set[int] = set()  # handed over again (a replay, a lapsed claim taken over), until handled
        self._finished: dict[int, asyncio.Event] = {}  # set when an update awaited by replay has no work left
        self._handled: list[int] = []  # to be marked handled by the writer
        self._writer: asyncio.Task[None] | None = None
        self._forgotten_at: dt.datetime | None = None
        # For ordering one learner's updates across replicas (earlier_first): the updates handed over and not yet
        # handled, those of them whose handling started (under their learner's lock), and those handled ahead of
        # their turn (their own turn then skips them).
        self._updates: dict[int, Update] = {}
        self._started: set[int] = set()
        self._ahead: set[int] = set()
        self._waiting: dict[int, dt.datetime] = {}  # update id -> since when it waits for an earlier one
        # When the last renewal of this process's claims began (its leases run from then), and the updates found
        # taken over by another process while this one still had work for them (guard).
        self._renewed_at = clock()
        self._lost: set[int] = set()

    async def accept(self, updates: Sequence[Update], payloads: Sequence[str] | None = None) -> list[Update]:
        """Store ``updates`` on disk; return, in order, those not seen before, now expected to be handled.

        ``payloads`` are the updates' JSON as Telegram sent it, stored as is; without them each update is turned
        back into JSON (PTB's to_json walks every object of the update: the costliest step of a tap).
        """
        now = self._clock()
        texts = payloads if payloads is not None else [u.to_json() for u in updates]
        learners = {u.update_id: key for u in updates if (key := _learner_key(u)) is not None}
        fresh = await self._db.accept_updates(
            [(u.update_id, text) for u, text in zip(updates, texts, strict=True)],
            now,
            owner=self.owner,
            lease_until=now + self._lease,
            learners=learners,
        )
        accepted = [u for u in updates if u.update_id in fresh]
        for update in accepted:
            self._work[update.update_id] = 0
            self._updates[update.update_id] = update
        if self._forgotten_at is None or now - self._forgotten_at >= FORGET_EVERY:
            await self._forget(now)
        return accepted

    async def replay(self, bot: Bot, queue: asyncio.Queue[object]) -> int:
        """Hand ``queue`` the updates a crash left unhandled, in order; return how many.

        Suspects (handed over at an earlier start already) are handled alone: what came before them first, then
        each one, watched, so that a crash meanwhile is blamed on it and on nothing else.
        """
        return await self._take_over(bot, queue, at_start=True)

    def keep(self, bot: Bot, queue: asyncio.Queue[object]) -> None:
        """On a shared database, renew this process's claims and take over lapsed ones in the background until
        ``close``: a replica that died mid-update leaves its updates to the others, after one lease."""
        if self._shared and self._keeper is None:
            self._keeper = asyncio.get_running_loop().create_task(self._keep(bot, queue), name="inbox: claims")

    async def close(self) -> None:
        """Stop renewing claims and taking over others' (once the updates under way are handled)."""
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.cancel()
            try:
                await keeper
            except asyncio.CancelledError:
                if not keeper.cancelled():
                    raise

    async def _keep(self, bot: Bot, queue: asyncio.Queue[object]) -> None:
        """Renew this process's claims, and take over updates whose owner's lease ran out, every third of a lease."""
        while True:
            await asyncio.sleep(self._lease.total_seconds() / 3)
            await self.keep_once(bot, queue)

    async def keep_once(self, bot: Bot, queue: asyncio.Queue[object]) -> int:
        """Renew this process's claims, then hand ``queue`` the updates whose lease ran out; return how many."""
        try:
            began = self._clock()
            lapsed = self._may_have_lapsed(began)
            await self._db.renew_claims(self.owner, began + self._lease)
            if lapsed:
                # This process stood still (frozen, or its database away) past a lease: its claims may have been
                # taken over meanwhile, and the renewal renewed only those still its own.
                under_way = list(self._work)
                self._lost.update(set(under_way) - await self._db.claims_held(under_way, self.owner))
            self._renewed_at = began
            return await self._take_over(bot, queue, at_start=False)
        except (sqlite3.Error, StorageError):
            # The next round tries again; meanwhile this process's claims may lapse: at least once, never lost.
            log.exception("could not renew the inbox's claims")
            return 0

    async def _take_over(self, bot: Bot, queue: asyncio.Queue[object], *, at_start: bool) -> int:
        now = self._clock()
        pending, abandoned = await self._db.unhandled_updates(
            MAX_CRASHES, now, owner=self.owner, lease_until=now + self._lease, take_live=not self._shared
        )
        for update_id in abandoned:
            log.error(
                "update %s was given up: the bot died %d times while handling it alone, as if it crashed the bot",
                update_id,
                MAX_CRASHES,
            )
        if at_start:
            await self._forget(now)
        if pending:
            if at_start:
                log.info("handling %d updates again that the last run left unhandled", len(pending))
            else:
                log.warning("taking over %d updates whose owner's lease ran out", len(pending))
        under_way: list[int] = []
        for update_id, replays, payload in pending:
            update = _read_update(update_id, payload, bot)
            if update is None:
                await self._db.give_up_update(update_id, now)
                continue
            suspect = replays > 1
            if suspect:
                await self._finish(under_way)
                await self._db.handling_alone(update_id, True)
            self._work[update_id] = 0
            self._again.add(update_id)
            self._updates[update_id] = update
            queue.put_nowait(update)
            under_way.append(update_id)
            if suspect:
                if not await self._finish(under_way):
                    # It outlived the watch (a long run, say): what comes later is not blamed on it.
                    await self._db.handling_alone(update_id, False)
                under_way = []
        return len(pending)

    async def _finish(self, update_ids: list[int]) -> bool:
        """Wait (up to the watch) until ``update_ids`` have no work left and are on disk; False if they did not."""
        waits = [self._finished.setdefault(i, asyncio.Event()) for i in update_ids if i in self._work]
        try:
            await asyncio.wait_for(asyncio.gather(*(event.wait() for event in waits)), self._watch_alone)
        except TimeoutError:
            return False
        finally:
            for update_id in update_ids:
                self._finished.pop(update_id, None)
        await self.flush()
        return True

    def orders(self, update: Update) -> bool:
        """Whether ``update`` waits for its learner's earlier updates at other processes (``earlier_first`` reads
        them): on a shared database, one the inbox handed over."""
        return self._shared and update.update_id in self._work

    async def earlier_first(
        self,
        update: Update,
        learner: int,
        handle: Callable[[Update], Awaitable[None]],
        pending: Sequence[Pending] | None = None,
    ) -> float | None:
        """Before ``update`` of ``learner`` is handled (under the learner's lock), handle ``learner``'s earlier
        updates this process can take, in order, with ``handle``; return 0 when ``update``'s turn has come, None if
        it is no longer this process's to handle, else how many seconds to wait (without the learner's lock)
        before asking again.

        Telegram sends the next update of a queue once the last was answered, and a replica answers once the update
        is on disk, before handling it: the learner's next update can reach another replica while the last is still
        pending at the first, or at a replica frozen or killed before handling it. So on a shared database an earlier
        pending update of the learner comes first: one its owner's lease still covers is waited for (its owner
        handles it, or its lease lapses), a lapsed one is taken over and handled here. An earlier one of this process
        waiting behind this update for the learner's lock (taken over meanwhile, say) is handled here, ahead of its
        turn. The wait is bounded: past ``ORDER_WAIT`` leases ``update`` goes ahead, out of order, logged.

        ``update`` itself must still be pending and this process's: one frozen past its lease may find it taken over
        (and handled) by another, and then does nothing with it (its write would be refused too: bot.storage.outcomes).

        ``pending`` is what Database.earlier_pending returns for ``update``, read under the learner's lock already
        (Database.learner_lock reads it in the lock's round trip); read here without it.
        """
        if not self.orders(update):
            return 0.0  # one process: PerLearnerOrder's lock takes the learner's updates in order
        self._started.add(update.update_id)
        now = self._clock()
        rows = pending if pending is not None else await self._db.earlier_pending(learner, update.update_id)
        if not rows or rows[-1][0] != update.update_id or rows[-1][1] != self.owner:
            log.warning(
                "update %s of learner %s is no longer this process's: another took it over (this one stood still "
                "past its lease); it is left to that one",
                update.update_id,
                learner,
            )
            self._waiting.pop(update.update_id, None)
            return None
        for earlier_id, owner, lease_until in rows[:-1]:
            if owner == self.owner:
                earlier = self._updates.get(earlier_id)
                if earlier is None or earlier_id in self._started or earlier_id in self._ahead:
                    continue  # under way or handled here (ahead of its turn, say), its mark not yet written
                log.info("update %s of learner %s: handling update %s first", update.update_id, learner, earlier_id)
                self._ahead.add(earlier_id)
                await handle(earlier)
                continue
            if owner is not None and lease_until is not None and lease_until >= now:
                return self._wait_for(update, learner, earlier_id, owner, lease_until - now)
            taken = await self._db.take_over_update(earlier_id, self.owner, now, now + self._lease)
            if taken is None:
                return self._wait_for(update, learner, earlier_id, owner, dt.timedelta())  # handled or taken meanwhile
            earlier_update = _read_update(earlier_id, taken[1], update.get_bot())
            if earlier_update is None:
                await self._db.give_up_update(earlier_id, now)
                continue
            log.warning(
                "update %s of learner %s: took over update %s (its owner %s let its lease lapse) to handle it first",
                update.update_id,
                learner,
                earlier_id,
                owner,
            )
            self._work[earlier_id] = 0
            self._again.add(earlier_id)
            self._updates[earlier_id] = earlier_update
            await handle(earlier_update)
        self._waiting.pop(update.update_id, None)
        return 0.0

    def _wait_for(
        self, update: Update, learner: int, earlier_id: int, owner: str | None, lease_left: dt.timedelta
    ) -> float:
        """How long ``update`` waits before asking again for ``earlier_id`` (0 once it waited long enough)."""
        now = self._clock()
        since = self._waiting.setdefault(update.update_id, now)
        if now - since >= self._lease * ORDER_WAIT:
            log.error(
                "update %s of learner %s goes ahead of update %s after waiting %.1f s for it at %s",
                update.update_id,
                learner,
                earlier_id,
                (now - since).total_seconds(),
                owner,
            )
            self._waiting.pop(update.update_id, None)
            return 0.0
        if since == now:
            log.info("update %s of learner %s waits for update %s at %s", update.update_id, learner, earlier_id, owner)
        self._started.discard(update.update_id)
        # Its owner marks it handled soon after handling it; a lapsing lease is looked at as it lapses.
        step = min(self._lease.total_seconds() / 30, ORDER_POLL)
        return max(0.01, min(step, lease_left.total_seconds() + 0.01))

    def skip_turn(self, update: object) -> bool:
        """Whether ``update`` was handled ahead of its turn (by earlier_first): its turn then does nothing."""
        if not isinstance(update, Update) or update.update_id not in self._ahead:
            return False
        self._ahead.discard(update.update_id)
        return True

    def _may_have_lapsed(self, now: dt.datetime) -> bool:
        # Renewed every third of a lease: half a lease since the last renewal began means this process stalled,
        # and a claim of its own may lapse (or have lapsed) under it before the next renewal.
        return now - self._renewed_at >= self._lease / 2

    async def guard(self) -> None:
        """Before a call to Telegram made for the update being handled (bot.logs.UPDATE_ID): raise ClaimLost if
        another process took that update over, so that it is shown once, by that process.

        A replica frozen past its lease (SIGSTOP, a stalled host) wakes up in the middle of its updates, while
        the replica that took them over sends their replies; without this it would send them a second time. The
        write of an update is checked too (bot.storage.outcomes), but replies go out after it. Free while this
        process renews its claims in time; otherwise one read per call until it does again.
        """
        update_id = UPDATE_ID.get()
        if not self._shared or update_id is None or update_id not in self._work:
            return
        if update_id not in self._lost:
            if not self._may_have_lapsed(self._clock()):
                return
            try:
                if update_id in await self._db.claims_held([update_id], self.owner):
                    return
            except (sqlite3.Error, StorageError):
                return  # cannot tell; nobody takes an update over without the database either
            self._lost.add(update_id)
        raise ClaimLost(f"update {update_id} was taken over by another process; its reply is left to that one")

    def handled_again(self, update: object) -> bool:
        """Whether ``update`` is being handled again (replayed, or taken over): it may have stored its replies."""
        return isinstance(update, Update) and update.update_id in self._again

    def begin(self, update: object) -> bool:
        """Count one more piece of work for ``update``; False if it did not come through the inbox."""
        if not isinstance(update, Update) or update.update_id not in self._work:
            return False
        self._work[update.update_id] += 1
        return True

    def end(self, update: Update, *, completed: bool) -> None:
        """Count a piece of work begun for ``update`` as over (``completed``: not cancelled)."""
        update_id = update.update_id
        if not completed:
            self._interrupted.add(update_id)
        left = self._work[update_id] - 1
        if left:
            self._work[update_id] = left
            return
        del self._work[update_id]
        self._again.discard(update_id)
        # One taken over is marked handled by its new owner (the handled mark checks the owner: _write_handled).
        self._lost.discard(update_id)
        self._updates.pop(update_id, None)
        self._started.discard(update_id)
        finished = self._finished.get(update_id)
        if finished is not None:
            finished.set()
        if update_id in self._interrupted:
            self._interrupted.discard(update_id)  # still pending: handled again at the next start
            return
        self._handled.append(update_id)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_handled(), name="inbox: handled")

    async def flush(self) -> None:
        """Wait until every update counted handled is marked so on disk."""
        while self._writer is not None and not self._writer.done():
            await self._writer

    async def _write_handled(self) -> None:
        tries = 0
        while self._handled:
            batch, self._handled = self._handled, []
            try:
                # On a shared database only those still this process's (one taken over is the new owner's to mark).
                await self._db.updates_handled(batch, self._clock(), owner=self.owner if self._shared else None)
                tries = 0
            except (sqlite3.Error, StorageError):
                tries += 1
                if tries >= MARK_TRIES:
                    # Left pending, they are handled again at the next start: at least once rather than lost.
                    log.exception("could not mark %d updates handled", len(batch))
                    tries = 0
                    continue
                # Tried again (the database restarting, say): on a shared database this process keeps renewing its
                # claim on them, so no other replica would ever take them over, and they would stay pending.
                log.warning("could not mark %d updates handled; trying again", len(batch))
                self._handled[:0] = batch
                await asyncio.sleep(MARK_RETRY_S)

    async def _forget(self, now: dt.datetime) -> None:
        self._forgotten_at = now
        try:
            await self._db.forget_updates(now - REMEMBER_HANDLED)
        except (sqlite3.Error, StorageError):
            log.exception("could not forget the updates handled before %s", now - REMEMBER_HANDLED)


class Polling:
    """Fetch updates with getUpdates and hand them to ``queue``, each stored in ``inbox`` before the next call.

    The next call's offset is what confirms a batch to Telegram; a batch that cannot be stored is fetched again.
    ``stop`` never interrupts storing a batch.
    """

    def __init__(
        self,
        bot: Bot,
        inbox: Inbox,
        queue: asyncio.Queue[object],
        *,
        timeout: int,
        allowed_updates: Sequence[str],
        on_error: Callable[[Exception], None],
    ):
        self._bot = bot
        self._inbox = inbox
        self._queue = queue
        self._timeout = timeout
        self._allowed = list(allowed_updates)
        self._on_error = on_error
        self._task: asyncio.Task[None] | None = None
        self._storing = False
        self._stopping = False

    async def start(self) -> None:
        """Hand over what a crash left unhandled, then poll in the background."""
        await self._inbox.replay(self._bot, self._queue)
        self._task = asyncio.get_running_loop().create_task(self._poll(), name="polling")

    async def stop(self) -> None:
        """Stop polling; a batch being stored is stored and handed over first."""
        self._stopping = True
        task, self._task = self._task, None
        if task is None:
            return
        if not self._storing:
            # Between calls or waiting for Telegram: whatever a cancelled call fetched was not confirmed.
            task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            if not task.cancelled():
                raise

    async def _get_updates(self, offset: int) -> tuple[list[Update], list[str]]:
        """Call getUpdates; return the updates and each one's JSON as Telegram sent it (for the inbox).

        As Bot.get_updates does, but keeping the JSON: the read timeout is the getUpdates request's own, which
        the application sets longer than the long poll. Bot._post is PTB's (pinned) own path for every method;
        its public do_api_request warns when asked for a method the Bot has.
        """
        result = await self._bot._post(
            "getUpdates", {"offset": offset, "timeout": self._timeout, "allowed_updates": self._allowed}
        )
        if not isinstance(result, list):
            raise TelegramError(f"getUpdates answered {type(result).__name__}, not a list")
        return [Update.de_json(item, self._bot) for item in result], [json.dumps(item) for item in result]

    async def _poll(self) -> None:
        # Offset 0 at start: Telegram sends every update not confirmed yet; those already stored are dropped.
        offset = 0
        wait = 0.0
        webhook_deleted = False
        while not self._stopping:
            if wait:
                await asyncio.sleep(wait)
            try:
                if not webhook_deleted:
                    # A bot that had a webhook cannot poll; PTB's Updater does this first too.
                    webhook_deleted = await self._bot.delete_webhook(drop_pending_updates=False)
                updates, payloads = await self._get_updates(offset)
            except RetryAfter as exc:
                wait = exc.retry_after if isinstance(exc.retry_after, float | int) else exc.retry_after.total_seconds()
                self._on_error(exc)
                continue
            except TimedOut:
                wait = 0.0  # the long poll outlived its read timeout: ask again at once
                continue
            except TelegramError as exc:
                wait = RETRY_FIRST if not wait else min(RETRY_MAX, wait * 1.5)
                self._on_error(exc)
                continue
            wait = 0.0
            if not updates:
                continue
            self._storing = True
            try:
                fresh = await self._inbox.accept(updates, payloads)
            except (sqlite3.Error, StorageError) as exc:
                # Not confirmed: Telegram sends the batch again with the next call.
                wait = RETRY_FIRST
                self._on_error(exc)
                continue
            finally:
                self._storing = False
            offset = updates[-1].update_id + 1
            for update in fresh:
                self._queue.put_nowait(update)


# The name PTB (22, pinned) gives the task that processes one update when updates are processed concurrently.
PTB_PROCESSING_TASK = ":process_concurrent_update"


class InboxApplication(Application[Any, CourseContext, Any, Any, BotData, Any]):
    """PTB's Application, counting each task started for an update as part of handling it (see Inbox).

    A practice run, for instance, goes on in a task after its handler returned; its update is handled when the
    verdict is sent, so a crash before that handles the update again.
    """

    def __init__(self, *, inbox: Inbox, **kwargs: Any):
        super().__init__(**kwargs)
        self.inbox = inbox

    def create_task(
        self,
        coroutine: Generator[asyncio.Future[object], None, T] | Awaitable[T],
        update: object | None = None,
        *,
        name: str | None = None,
    ) -> asyncio.Task[T]:
        """Start ``coroutine`` as PTB does; if it is for an update from the inbox, count it as that update's work.

        Not the task PTB starts to process the update itself: PerLearnerOrder counts that once the update's turn
        has come, not while it waits for it (an update handled ahead of its turn is then marked handled at once).
        """
        task: asyncio.Task[T] = super().create_task(coroutine, update, name=name)
        inbox = self.inbox
        processing = name is not None and name.endswith(PTB_PROCESSING_TASK)
        if isinstance(update, Update) and not processing and inbox.begin(update):
            task.add_done_callback(lambda done: inbox.end(update, completed=not done.cancelled()))
        return task


class PerLearnerOrder(BaseUpdateProcessor):
    """Process many learners' updates at once, but one learner's updates one at a time, in order.

    Two quick taps of one learner must not race on their progress; two learners never wait for each other.
    Each update is handled inside ``scope`` (bot.context.update_scope: its learner's language), which
    encloses the error handler too. With an ``inbox``, its handling counts as the update's work. ``learner_lock``
    (Database.learner_lock) orders one learner's updates across processes too: on PostgreSQL, replicas share it;
    given an update's id, it reads what Inbox.earlier_first needs under the lock.
    An update the inbox hands over again is first given to ``resend`` (bot.handlers.outbox.resend), under the
    learner's lock: one that stored its replies has them sent, and its handlers do not run again.
    """

    def __init__(
        self,
        max_concurrent_updates: int,
        scope: UpdateScope,
        inbox: Inbox | None = None,
        learner_lock: LearnerLock | None = None,
        resend: Resend | None = None,
    ):
        super().__init__(max_concurrent_updates)
        self._scope = scope
        self._inbox = inbox
        self._learner_lock = learner_lock
        self._resend = resend
        # PTB's handling of an update (Application.process_update), for an earlier update of a learner handled
        # ahead of a later one (Inbox.earlier_first); set once the application is built.
        self.process: Callable[[object], Awaitable[None]] | None = None
        self._locks: dict[int, asyncio.Lock] = {}
        self._users: dict[int, int] = {}

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        """Await ``coroutine`` (PTB's handling of ``update``) after the learner's earlier updates, in its scope."""
        if self._inbox is not None and self._inbox.skip_turn(update):
            _close(coroutine)  # handled ahead of its turn, before it began
            return
        key = _learner_key(update)
        if key is None:
            async with self._counted(update), self._scope(update):
                await coroutine
            return
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] = self._users.get(key, 0) + 1
        try:
            async with lock:
                if self._inbox is not None and self._inbox.skip_turn(update):
                    _close(coroutine)  # handled ahead of its turn (Inbox.earlier_first) while it waited for the lock
                    return
                # Counted as under way from here, not while it waited for the lock: an update handled ahead of its
                # turn meanwhile (by a later one holding the lock) is then marked handled as soon as that is done;
                # a later update of the learner at another replica waits for that mark.
                async with self._counted(update):
                    await self._in_order(update, key, coroutine)
        finally:
            self._users[key] -= 1
            if not self._users[key]:
                # Nobody else waits on this learner's lock; drop it so idle learners cost nothing.
                del self._users[key], self._locks[key]

    @contextlib.asynccontextmanager
    async def _counted(self, update: object) -> AsyncIterator[None]:
        """Count the block as work for ``update`` in the inbox (Inbox.begin/end), if it came through it."""
        inbox = self._inbox if self._inbox is not None and self._inbox.begin(update) else None
        completed = True
        try:
            yield
        except asyncio.CancelledError:
            completed = False
            raise
        finally:
            if inbox is not None and isinstance(update, Update):
                inbox.end(update, completed=completed)

    async def _in_order(self, update: object, key: int, coroutine: Awaitable[Any]) -> None:
        """Handle ``update`` once the learner's earlier updates at any replica are (under the in-process lock)."""
        if self._learner_lock is None:
            async with self._scope(update):
                await self._handle(update, coroutine)
            return
        inbox = self._inbox
        while True:
            # The learner's earlier pending updates are read with the lock, in its round trip, when they are needed.
            read = None
            if isinstance(update, Update) and inbox is not None and self.process is not None and inbox.orders(update):
                read = update.update_id
            async with self._learner_lock(key, read) as pending:
                wait = await self._earlier_first(update, key, pending)
                if wait is None:
                    _close(coroutine)  # another process took it over: that one handles it
                    return
                if not wait:
                    async with self._scope(update):
                        await self._handle(update, coroutine)
                    return
            # Waiting for an earlier update at another replica, which needs the learner's lock to handle it.
            await asyncio.sleep(wait)

    async def _earlier_first(self, update: object, key: int, pending: Sequence[Pending] | None) -> float | None:
        """Handle the learner's earlier updates first (Inbox.earlier_first); return how long to wait, 0 to go on,
        None if the update is no longer this process's."""
        if self._inbox is None or self.process is None or not isinstance(update, Update):
            return 0.0
        return await self._inbox.earlier_first(update, key, self._ahead_of_turn, pending)

    async def _ahead_of_turn(self, earlier: Update) -> None:
        """Handle ``earlier`` now, under its learner's locks (held by the later update), as its own turn would."""
        inbox, process = self._inbox, self.process
        if inbox is None or process is None:
            return
        async with self._counted(earlier), self._scope(earlier):
            await self._handle(earlier, process(earlier))

    async def _handle(self, update: object, coroutine: Awaitable[Any]) -> None:
        resend, inbox = self._resend, self._inbox
        again = resend is not None and inbox is not None and inbox.handled_again(update)
        if again and resend is not None and isinstance(update, Update) and await resend(update):
            _close(coroutine)  # never started: its handlers decided and stored this update before
            return
        await coroutine

    async def initialize(self) -> None:
        """Nothing to set up."""

    async def shutdown(self) -> None:
        """Nothing to tear down."""


def _close(coroutine: Awaitable[Any]) -> None:
    """Close a coroutine that is never awaited (its update needs no handling), so Python does not warn of it."""
    if inspect.iscoroutine(coroutine):
        coroutine.close()
