"""The outbox's storage (bot.storage.outbox), on each engine: an update's replies are written in its one transaction
with its outcome, or not at all; read back in order; marked sent with the message showing them (and the learner's
message edited in place, in the same write); purged with the inbox's handled ids. What a replay does with them is
tests/test_replay.py's (and test_postgres's) to prove, through the real bot."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

import pytest

from bot.changes import DrillSaved, ReaderAt, SlideShown
from bot.learner import DrillProgress, ReaderView
from bot.storage.db import Database
from bot.storage.outbox import Reply, ReplyKind
from tests.conftest import peek

USER, CHAT = 501, 501
T0 = dt.datetime(2026, 12, 5, 4, 0, tzinfo=dt.UTC)
SLIDE = SlideShown("autograd", "s2", "s2", last=False)


@pytest.fixture
async def db(store) -> AsyncIterator[Database]:
    database = await Database.open(store, clock=lambda: T0)
    await database.learner(USER, CHAT, "en")
    try:
        yield database
    finally:
        await database.close()


def edit(message_id: int, text: str, reader: ReaderView | None = None) -> Reply:
    return Reply(CHAT, ReplyKind.EDIT, message_id, text, '{"inline_keyboard":[]}', reader)


def new(text: str) -> Reply:
    return Reply(CHAT, ReplyKind.SEND, None, text, None)


async def test_replies_are_stored_with_the_outcome_and_read_back_in_order(db):
    replies = [edit(40, "<b>slide 2</b>", ReaderView.SLIDE), Reply(CHAT, ReplyKind.RETIRE, 38), new("then")]
    assert await db.store(USER, [SLIDE], language="en", update_id=9001, replies=replies)
    # A later outcome of the same update (a graded run's verdict, say) goes on after the first's.
    assert await db.store(USER, [], language="en", update_id=9001, replies=[new("verdict")], first_reply=3)
    stored = await db.replies(9001)
    assert [r.position for r in stored] == [0, 1, 2, 3]
    assert [r.reply for r in stored] == [*replies, new("verdict")]
    assert not any(r.sent for r in stored)
    assert await db.replies(9009) == []


async def test_an_outcome_refused_stores_none_of_its_replies(db):
    # A drill attempt that changed meanwhile: nothing of the outcome is stored, its replies neither.
    tap = DrillSaved("autograd", "d1", DrillProgress(), DrillProgress(placed=(1,), turn=1))
    assert await db.store(USER, [tap], language="en", update_id=9002, replies=[new("first tap")])
    assert not await db.store(USER, [tap], language="en", update_id=9003, replies=[new("never")])
    assert await db.replies(9003) == []


async def test_replies_of_an_update_not_from_the_inbox_are_not_kept(db):
    assert await db.store(USER, [SLIDE], language="en", update_id=None, replies=[new("unkeyed")])
    assert await peek(db, "SELECT count(*) FROM outbox") == [(0,)]


async def test_a_reply_marked_sent_keeps_its_message_and_moves_the_reader_in_the_same_write(db):
    assert await db.store(USER, [ReaderAt(10, ReaderView.MENU)], language="en", update_id=9004, replies=[new("a")])
    await db.reply_sent(9004, 0, USER, 77, ReaderView.RESULT)
    [sent] = await db.replies(9004)
    assert sent.sent and sent.shown == 77
    assert await peek(db, f"SELECT reader_message_id, reader_view FROM learners WHERE user_id = {USER}") == [
        (77, "result")
    ]


async def test_replies_are_purged_with_the_handled_updates_and_kept_while_theirs_is_pending(db):
    await db.accept_updates([(9005, "{}"), (9006, "{}")], T0)
    for update_id in (9005, 9006):
        assert await db.store(USER, [], language="en", update_id=update_id, replies=[new(str(update_id))])
    await db.updates_handled([9005], T0)
    day = dt.timedelta(days=1)
    await db.forget_updates(T0 - day)  # kept as long as the inbox keeps the update's id
    assert len(await db.replies(9005)) == 1
    await db.forget_updates(T0 + day)
    assert await db.replies(9005) == []
    assert len(await db.replies(9006)) == 1, "the replies of an update still pending were purged: a replay needs them"
