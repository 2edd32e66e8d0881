"""The outbox: the replies an update shows, written in the update's one transaction and sent after it commits.

Each reply is a row keyed by (update, position). ``write_replies`` runs inside bot.storage.outcomes' transaction, so
an update's changes and the replies that show them are stored together or not at all; ``reply_sent`` marks one sent,
with the message now showing it (and, for a reply that becomes the message edited in place, that message in the
learner's row, in the same small transaction). A replay of an update that stored replies reads them (``replies``)
and sends those not marked sent, instead of deciding again over a state the update has already moved on.

An edit is not marked when it went where it was stored to go: sent again, it changes nothing (Telegram refuses an
edit to the same text and buttons), so a replay may send it again at no cost. A new message is marked: sent again,
it would be a second message (Telegram's methods are not idempotent). It is marked just before the update's next
reply goes out (at once if it becomes the message edited in place), or never if it was the last: its update, once
handled, is never replayed. So only the last new message sent before a crash may go out twice.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from bot.learner import ReaderView
from bot.storage.backend import SyncConnection
from bot.storage.engine import Engine


class ReplyKind(enum.StrEnum):
    """What a reply does in the chat (the outbox's ``kind``)."""

    SEND = "send"  # sendMessage: a new message
    EDIT = "edit"  # editMessageText: text and buttons of ``message_id`` (a new message if it cannot be edited)
    RETIRE = "retire"  # editMessageReplyMarkup: the buttons of ``message_id`` taken off


@dataclass(frozen=True)
class Reply:
    """One reply an update shows, as the outbox stores it."""

    chat_id: int
    kind: ReplyKind
    message_id: int | None = None  # the message edited (EDIT, RETIRE)
    text: str | None = None  # HTML (SEND, EDIT)
    buttons: str | None = None  # the inline keyboard as Telegram's JSON; None: none
    reader: ReaderView | None = None  # the message showing it becomes the one edited in place, showing this
    supersedes: bool = False  # it takes the buttons off the last such screen (bot.flows.outcome.Show.supersedes)


@dataclass(frozen=True)
class StoredReply:
    """A reply read back from the outbox: its place in the update, and whether it is known to be sent."""

    position: int
    reply: Reply
    sent: bool
    shown: int | None  # the message showing it, once sent


def write_replies(
    conn: SyncConnection, update_id: int, user_id: int, first: int, replies: Sequence[Reply], now: str
) -> None:
    """Store ``replies`` of update ``update_id`` at positions ``first``, ``first`` + 1, ... (inside the update's
    transaction: bot.storage.outcomes). One stored before at a position is kept as it is."""
    for position, reply in enumerate(replies, start=first):
        conn.execute(
            "INSERT INTO outbox (update_id, position, user_id, chat_id, kind, message_id, text, buttons, reader,"
            " supersedes, stored_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (
                update_id,
                position,
                user_id,
                reply.chat_id,
                str(reply.kind),
                reply.message_id,
                reply.text,
                reply.buttons,
                reply.reader.value if reply.reader is not None else None,
                int(reply.supersedes),
                now,
            ),
        )


class OutboxQueries(Engine):
    """Replies stored, read back on a replay, and marked sent."""

    async def replies(self, update_id: int) -> list[StoredReply]:
        """Return the replies update ``update_id`` stored, in order (none: it stored none, or its flow never ran)."""
        rows = await self._all(
            "SELECT position, chat_id, kind, message_id, text, buttons, reader, supersedes, sent_at"
            " FROM outbox WHERE update_id = ? ORDER BY position",
            (update_id,),
        )
        return [
            StoredReply(
                position=row["position"],
                reply=Reply(
                    chat_id=row["chat_id"],
                    kind=ReplyKind(row["kind"]),
                    message_id=row["message_id"],
                    text=row["text"],
                    buttons=row["buttons"],
                    reader=ReaderView(row["reader"]) if row["reader"] is not None else None,
                    supersedes=bool(row["supersedes"]),
                ),
                sent=row["sent_at"] is not None,
                shown=row["message_id"] if row["sent_at"] is not None else None,
            )
            for row in rows
        ]

    async def reply_sent(
        self, update_id: int, position: int, user_id: int, message_id: int, reader: ReaderView | None
    ) -> None:
        """Mark a reply sent, shown in ``message_id``; with ``reader``, that message becomes the learner's one edited
        in place (one transaction: the message is known only now, once sent)."""
        now = self._now()

        def mark(conn: SyncConnection) -> None:
            conn.execute(
                "UPDATE outbox SET sent_at = ?, message_id = ? WHERE update_id = ? AND position = ?",
                (now, message_id, update_id, position),
            )
            if reader is not None:
                conn.execute(
                    "UPDATE learners SET reader_message_id = ?, reader_view = ?, updated_at = ? WHERE user_id = ?",
                    (message_id, reader.value, now, user_id),
                )

        await self._transaction(mark)

    async def reader_not_shown(self, user_id: int, message_id: int) -> None:
        """Forget what the learner's message edited in place shows: a reply meant to show it there failed, so the
        stored view is not what the learner sees (their next tap on it is not a double tap: it edits again)."""
        await self._write_one(
            "UPDATE learners SET reader_view = NULL, updated_at = ? WHERE user_id = ? AND reader_message_id = ?",
            (self._now(), user_id, message_id),
        )
