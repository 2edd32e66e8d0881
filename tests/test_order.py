"""One learner's updates across webhook replicas on one PostgreSQL (issue 17): handled in the order they were made
even when the earlier one is stuck at a replica frozen past its lease, and never applied by a replica that lost its
claim meanwhile (bot.updates.Inbox.earlier_first, bot.storage.outcomes.write_outcome's claim check).

Two bots in this process, each a real CourseBot with its own pool on one throwaway PostgreSQL, receive the stand-in's
webhooks. "Frozen" is what SIGSTOP does to a replica, made deterministic: its handling of one update waits on an
event the test sets, and its claims are no longer renewed (its inbox's keeper is stopped), so its lease runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import AsyncIterator, Awaitable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from telegram import Update

from bot.app import CourseBot
from bot.changes import Event
from bot.config import Config
from bot.errors import ClaimLost
from bot.learner import EventKind
from bot.library.load import load_valid
from bot.logs import UPDATE_ID
from bot.storage.db import Database
from bot.updates import Inbox
from tests.botprocess import wait_until
from tests.conftest import LESSONS, LOCALES, peek
from tests.pg import free_port

SECRET = "order-test_SECRET"
LEASE = 2.0
T0 = dt.datetime(2030, 5, 1, 12, 0, tzinfo=dt.UTC)
COURSE = load_valid(LESSONS, LOCALES).english


def replica_config(config: Config, pg_url: str, folder: Path) -> Config:
    folder.mkdir(parents=True, exist_ok=True)
    return replace(
        config,
        db_url=pg_url,
        db_path=folder / "unused.sqlite3",
        control_socket=folder / "control.sock",
        webhook_listen=("127.0.0.1", free_port()),
        webhook_secret=SECRET,
        inbox_lease=LEASE,
    )


@contextlib.asynccontextmanager
async def replicas(config: Config, pg_url: str, tmp_path: Path) -> AsyncIterator[tuple[CourseBot, CourseBot]]:
    async with (
        CourseBot(replica_config(config, pg_url, tmp_path / "a")) as first,
        CourseBot(replica_config(config, pg_url, tmp_path / "b")) as second,
    ):
        yield first, second


def url(bot: CourseBot) -> str:
    assert bot.config.webhook_listen is not None
    host, port = bot.config.webhook_listen
    return f"http://{host}:{port}/"


def freeze(bot: CourseBot, update_ids: set[int]) -> asyncio.Event:
    """Hold ``bot``'s handling of ``update_ids`` until the returned event is set (see the module's docstring)."""
    thaw = asyncio.Event()
    order = bot.app.update_processor
    handle = order.do_process_update

    async def frozen(update: object, coroutine: Awaitable[Any]) -> None:
        if getattr(update, "update_id", None) in update_ids:
            await thaw.wait()
        await handle(update, coroutine)

    order.do_process_update = frozen  # type: ignore[method-assign]
    return thaw


async def handled_by(bot: CourseBot, update_id: int, timeout: float = 5.0) -> None:
    """Wait until ``update_id`` is marked handled by ``bot`` (the mark is written in a batch, after its last work)."""
    for _ in range(int(timeout / 0.05)):
        if await inbox_row(bot.db, update_id) == ("handled", bot.app.inbox.owner):
            return
        await asyncio.sleep(0.05)
    assert await inbox_row(bot.db, update_id) == ("handled", bot.app.inbox.owner)


async def inbox_row(db: Database, update_id: int) -> tuple[object, ...]:
    rows = await peek(db, f"SELECT state, owner FROM inbox WHERE update_id = {update_id}")
    return rows[0] if rows else ()


async def test_a_learners_next_update_at_another_replica_waits_for_the_one_frozen_at_the_first(
    config, standin, pg_url, tmp_path, caplog
):
    caplog.set_level(logging.INFO)
    # /start reaches A, which stores it, answers 2xx and freezes before handling it. Telegram then sends the
    # learner's next message, /help, which reaches B. B must not answer /help before /start: it waits for A's lease
    # to lapse, takes /start over and handles it, then /help. When A wakes, its /start finds its claim gone: it
    # stores nothing and sends nothing.
    async with replicas(config, pg_url, tmp_path) as (a, b):
        ada = standin.learner(user_id=7101)
        first = await ada.send("/start")
        assert first is not None
        thaw = freeze(a, {first})
        try:
            await _frozen_then_thawed(standin, ada, a, b, first, thaw, caplog)
        finally:
            thaw.set()  # a failure must not leave A's update waiting for ever (the bots could not stop)


async def _frozen_then_thawed(standin, ada, a, b, first, thaw, caplog) -> None:
    # (The test's body, run with A's update thawed in any case.)
    await a.app.inbox.close()  # frozen: its claims are no longer renewed
    await standin.set_webhook({"url": url(a), "secret_token": SECRET})
    await wait_until(lambda: standin.updates.pending_count == 0, "A answered /start 2xx", 10)
    since = ada.cursor()
    # Telegram sends the next message of the chat once /start was answered 2xx; HAProxy sends it to B.
    await standin.set_webhook({"url": url(b), "secret_token": SECRET})
    second = await ada.send("/help")
    assert second is not None
    assert await inbox_row(a.db, first) == ("pending", a.app.inbox.owner)
    # B answers both, /start first, once A's lease has run out.
    menu = await ada.wait_message(since=since, timeout=LEASE * 5)
    assert COURSE.title in menu.get("text", ""), [m.get("text") for m in ada.messages]
    await ada.wait_message(lambda m: m["message_id"] > menu["message_id"], since=since, timeout=LEASE * 5)
    assert f"took over update {first}" in caplog.text or "taking over 1 updates" in caplog.text
    await handled_by(b, first)
    answered = [m["message_id"] for m in ada.messages if m["from"]["is_bot"]]
    assert len(answered) == 2
    # A wakes: its /start is someone else's now.
    calls = len(standin.calls)
    thaw.set()
    await a.app.inbox.flush()
    await asyncio.sleep(0.5)
    await a.app.update_queue.join()
    assert [m["message_id"] for m in ada.messages if m["from"]["is_bot"]] == answered
    assert [c.method for c in standin.calls[calls:] if c.method not in ("getUpdates", "getWebhookInfo")] == []
    assert await inbox_row(b.db, first) == ("handled", b.app.inbox.owner)


@pytest.mark.parametrize("shared", [True, False], ids=["claimed", "one-process"])
async def test_an_update_whose_claim_was_taken_over_stores_nothing(store, shared):
    # A replica frozen past its lease wakes and writes the outcome of an update another replica took over: the whole
    # write rolls back. On one process (SQLite, no claimant) every write goes through as before.
    frozen = await Database.open(store, clock=lambda: T0)
    other = await Database.open(store, clock=lambda: T0) if isinstance(store, str) else frozen
    try:
        await frozen.learner(7201, 7201, "en")
        await frozen.accept_updates([(41, "{}")], T0, owner="A", lease_until=T0 + dt.timedelta(seconds=3))
        later = T0 + dt.timedelta(seconds=5)
        taken, _ = await other.unhandled_updates(2, later, owner="B", lease_until=later + dt.timedelta(seconds=3))
        assert [row[0] for row in taken] == [41]
        frozen.claimant = "A" if shared else None
        event = (Event(EventKind.SLIDE, "grad", item_id="a"),)
        if shared:
            with pytest.raises(ClaimLost):
                await frozen.write_outcome(7201, (), event, language="en", update_id=41)
            assert await peek(frozen, "SELECT count(*) FROM events WHERE user_id = 7201") == [(0,)]
        else:
            assert (await frozen.write_outcome(7201, (), event, language="en", update_id=41)).stored
            assert await peek(frozen, "SELECT count(*) FROM events WHERE user_id = 7201") == [(1,)]
        # The owner's write goes through; a mark by the frozen one does not touch what it no longer holds.
        other.claimant = "B"
        assert (await other.write_outcome(7201, (), event, language="en", update_id=41)).stored
        await frozen.updates_handled([41], later, owner="A")
        assert await peek(other, "SELECT state, owner FROM inbox WHERE update_id = 41") == [("pending", "B")]
    finally:
        if other is not frozen:
            await other.close()
        await frozen.close()


async def test_a_replica_frozen_between_storing_and_sending_sends_nothing_once_another_took_the_update_over(
    config, standin, pg_url, tmp_path, caplog
):
    # A stores the outcome of a tap on "Start the course" with its reply (the first slide, edited into the menu) in
    # the outbox, then freezes before sending it. B takes the update over once A's lease lapsed and sends the stored
    # reply. A wakes in the middle of sending it: the reply is B's now, and A's call never goes out
    # (bot.updates.Inbox.guard): one edit, and one answer to the tap.
    caplog.set_level(logging.INFO)
    async with replicas(config, pg_url, tmp_path) as (a, b):
        ada = standin.learner(user_id=7102)
        await standin.set_webhook({"url": url(b), "secret_token": SECRET})
        since = ada.cursor()
        assert await ada.send("/start") is not None
        menu = await ada.wait_message(since=since, timeout=10)
        thaw, stored = asyncio.Event(), asyncio.Event()
        frozen: list[int] = []
        write = a.db.write_outcome

        async def store_then_freeze(*args: Any, **kwargs: Any) -> Any:
            written = await write(*args, **kwargs)
            if kwargs.get("replies") and not frozen:
                frozen.append(kwargs["update_id"])
                stored.set()
                await thaw.wait()
            return written

        a.db.write_outcome = store_then_freeze  # type: ignore[method-assign]
        await a.app.inbox.close()  # frozen: its claims are no longer renewed
        await standin.set_webhook({"url": url(a), "secret_token": SECRET})
        edits = len(standin.calls_to("editMessageText"))
        tap = ada.tap_nowait(menu, "Start the course").update_id
        try:
            await asyncio.wait_for(stored.wait(), 10)
            assert frozen == [tap]
            # B takes it over, then waits for the learner's lock, which A holds while it is frozen (as a SIGSTOPped
            # replica's lock connection does, until it thaws or PostgreSQL ends its idle transaction).
            await wait_until(lambda: "taking over 1 updates" in caplog.text, "B took the tap over", LEASE * 5)
        finally:
            thaw.set()
        slide = await ada.wait_edit(menu["message_id"], timeout=10)
        assert "Lesson 1" in slide.get("text", "")
        await handled_by(b, tap)
        await a.app.update_queue.join()
        await a.app.inbox.flush()
        assert len(standin.calls_to("editMessageText")) == edits + 1  # B's edit; A's never went out
        assert len(standin.calls_to("answerCallbackQuery")) == 1
        assert standin.errors() == []
        assert f"update {tap} was taken over by another process" in caplog.text
        assert await inbox_row(b.db, tap) == ("handled", b.app.inbox.owner)


async def test_an_update_handled_ahead_of_its_turn_is_marked_handled_at_once_for_the_replica_waiting_on_it(
    config, standin, pg_url, tmp_path, caplog
):
    # Telegram's queues deliver a learner's updates out of their order: /lessons (3) reaches A first and waits for
    # /progress (2), pending at B; then /help (1) reaches A, whose own turn waits for A's lock on the learner, held by
    # /lessons. /lessons handles /help ahead of its turn; B's /progress waits for /help's handled mark. That mark must
    # come when /help is done, not when its own turn (stuck behind /lessons) ends: it came late, so B went ahead out
    # of order after two leases, and /lessons handled /help again on each of its rounds (tests/test_scaleout.py).
    caplog.set_level(logging.INFO)
    async with replicas(config, pg_url, tmp_path) as (a, b):
        learner = 7103
        chat = standin.learner(user_id=learner)
        await standin.set_webhook({"url": url(b), "secret_token": SECRET})
        since = chat.cursor()
        assert await chat.send("/start") is not None  # the chat exists once the learner wrote first
        await chat.wait_message(since=since, timeout=10)
        help_, progress, lessons = (
            message_update(9001 + n, learner, text, bot.app.bot)
            for n, (text, bot) in enumerate(zip(TEXTS, (a, b, a), strict=True))
        )
        thaw = freeze(b, {progress.update_id})
        try:
            for bot, update in ((b, progress), (a, lessons)):
                assert await bot.app.inbox.accept([update]) == [update]
                bot.app.update_queue.put_nowait(update)
            await wait_until(lambda: "waits for update 9002" in caplog.text, "/lessons waits for /progress", 5)
            assert await a.app.inbox.accept([help_]) == [help_]
            a.app.update_queue.put_nowait(help_)
            await wait_until(lambda: "handling update 9001 first" in caplog.text, "/help is handled ahead", 5)
            await handled_by(a, help_.update_id, timeout=LEASE)  # at once: B's /progress waits for it
        finally:
            thaw.set()
        for update in (progress, lessons):
            await handled_by(b if update is progress else a, update.update_id, timeout=LEASE * 3)
        await a.app.update_queue.join()
        shown = [first_line(m) for m in chat.messages][1:]
        assert len(shown) == 3, shown  # each handled once, in order
        assert "Your progress" in shown[1] and "Welcome" not in shown[2], shown
        assert "goes ahead of" not in caplog.text
        assert caplog.text.count("handling update 9001 first") == 1


TEXTS = ("/help", "/progress", "/lessons")


def first_line(message: dict) -> str:
    return message.get("text", "").split("\n")[0]


async def test_the_guard_costs_no_read_while_claims_are_renewed_and_refuses_a_call_for_an_update_taken_over(pg_url):
    # Inbox.guard, which every call to Telegram passes (bot.ratelimit): free while this process renews its claims in
    # time; after it stood still past half a lease, one read tells whether the update is still its own.
    now = [T0]
    a_db, b_db = await Database.open(pg_url, clock=lambda: now[0]), await Database.open(pg_url, clock=lambda: now[0])
    a, b = Inbox(a_db, clock=lambda: now[0], lease=3.0), Inbox(b_db, clock=lambda: now[0], lease=3.0)
    reads: list[list[int]] = []
    held = a_db.claims_held

    async def counted(update_ids: list[int], owner: str) -> set[int]:
        reads.append(list(update_ids))
        return await held(update_ids, owner)

    a_db.claims_held = counted  # type: ignore[method-assign]
    queue: asyncio.Queue[object] = asyncio.Queue()

    async def guard(update_id: int) -> None:
        token = UPDATE_ID.set(update_id)
        try:
            await a.guard()
        finally:
            UPDATE_ID.reset(token)

    try:
        await a.accept([message_update(51, 7301), message_update(52, 7302)])
        await guard(51)
        now[0] += dt.timedelta(seconds=1)
        assert await a.keep_once(None, queue) == 0  # type: ignore[arg-type]
        await guard(51)
        assert reads == []  # renewed in time: no read
        # A stands still 5 s (its lease is 3 s); B takes both updates over.
        now[0] += dt.timedelta(seconds=5)
        assert await b.keep_once(None, queue) == 2  # type: ignore[arg-type]
        with pytest.raises(ClaimLost):
            await guard(51)  # woken before its own renewal: one read finds it B's
        assert reads == [[51]]
        assert await a.keep_once(None, queue) == 0  # type: ignore[arg-type]
        assert reads[-1] == [51, 52]  # the renewal after the stall asks which of its updates are still its own
        for update_id in (51, 52):
            with pytest.raises(ClaimLost):
                await guard(update_id)
        assert len(reads) == 2
        await guard(99)  # a call for no update of this process's (a reminder, say) is never refused
    finally:
        await a_db.close()
        await b_db.close()


def message_update(update_id: int, user_id: int, text: str = "/help", bot: Any = None) -> Update:
    return Update.de_json(
        {
            "update_id": update_id,
            "message": {
                "message_id": 1,
                "date": 0,
                "chat": {"id": user_id, "type": "private"},
                "from": {"id": user_id, "is_bot": False, "first_name": "Ada"},
                "text": text,
                "entities": [{"type": "bot_command", "offset": 0, "length": len(text)}],
            },
        },
        bot,
    )
