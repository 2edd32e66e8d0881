"""The Quick Check's tables: polls on their way out, polls sent, and the answers to them."""

from __future__ import annotations

import datetime as dt
from typing import Any, NamedTuple

from bot.learner import Answer, SentPoll
from bot.storage.backend import SyncConnection
from bot.storage.engine import Engine, Row


def sent_poll_from_row(row: Row) -> SentPoll:
    return SentPoll(
        poll_id=row["poll_id"],
        user_id=row["user_id"],
        lesson_id=row["lesson_id"],
        question_id=row["question_id"],
        options=tuple((row["options"] or "").split()),
    )


class FoundPoll(NamedTuple):
    """A quiz poll the bot sent, as an answer to it finds it."""

    poll: SentPoll
    answered: bool  # its answer is recorded
    # Its question was answered through another poll since this one went out: the same question sent twice (a
    # replica killed between sending a poll and recording it, its update handled again), or an older round's poll.
    superseded: bool


# Each question's latest answer of learner :user (a statement to narrow with AND and order).
LATEST_ANSWER = (
    "SELECT lesson_id, question_id, option_id, correct FROM quiz_answers AS a"
    " WHERE user_id = :user AND answered_at = (SELECT max(answered_at) FROM quiz_answers"
    " WHERE user_id = a.user_id AND lesson_id = a.lesson_id AND question_id = a.question_id)"
)


def answer_from_row(row: Row) -> Answer:
    return Answer(
        lesson_id=row["lesson_id"],
        question_id=row["question_id"],
        option_id=row["option_id"],
        correct=bool(row["correct"]),
    )


class QuizQueries(Engine):
    """Quick Check rounds, polls and answers."""

    async def drop_questions(self, user_id: int, question_ids: list[str]) -> tuple[str, ...]:
        """Take questions that left the lesson off the round, and the poll awaited with them; return those left."""
        now = self._now()

        def drop(conn: SyncConnection) -> tuple[str, ...]:
            row = conn.execute("SELECT quiz_queue FROM learners WHERE user_id = ?", (user_id,)).fetchone()
            queue = tuple(row["quiz_queue"].split()) if row is not None else ()
            remaining = tuple(q for q in queue if q not in question_ids)
            conn.execute(
                "UPDATE learners SET quiz_queue = ?, quiz_poll_id = NULL, quiz_lesson_id = CASE WHEN ? = '' THEN NULL"
                " ELSE quiz_lesson_id END, updated_at = ? WHERE user_id = ?",
                (" ".join(remaining), " ".join(remaining), now, user_id),
            )
            return remaining

        # A transaction the engine may run again if the database restarts under it (Engine._transaction).
        return await self._transaction(drop)

    async def poll_sending(self, user_id: int, lesson_id: str, question_id: str, options: tuple[str, ...]) -> int:
        """Note a quiz poll about to be sent, before it is; return the note's id, for ``poll_sent``.

        Should the bot die after Telegram showed the poll but before it was recorded, the note lets the answer
        still count (``adopt_poll``).
        """
        now = self._now()

        def note(conn: SyncConnection) -> int:
            row = conn.execute(
                "INSERT INTO quiz_sends (user_id, lesson_id, question_id, options, started_at) VALUES (?, ?, ?, ?, ?)"
                " RETURNING id",
                (user_id, lesson_id, question_id, " ".join(options), now),
            ).fetchone()
            return int(row["id"]) if row is not None else 0

        return await self._transaction(note)

    async def poll_sent(self, poll: SentPoll, message_id: int, sending: int | None = None) -> None:
        """Record a sent quiz poll as the one the learner's round awaits; its note ``sending`` is done with."""
        now = self._now()

        def record(conn: SyncConnection) -> None:
            conn.execute(
                "INSERT INTO quiz_polls (poll_id, user_id, lesson_id, question_id, options, message_id, sent_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (poll.poll_id, poll.user_id, poll.lesson_id, poll.question_id, " ".join(poll.options), message_id, now),
            )
            conn.execute(
                "UPDATE learners SET quiz_poll_id = ?, updated_at = ? WHERE user_id = ?",
                (poll.poll_id, now, poll.user_id),
            )
            conn.execute("DELETE FROM quiz_sends WHERE id = ? AND user_id = ?", (sending, poll.user_id))

        await self._transaction(record)

    async def poll_refused(self, sending: int) -> None:
        """Forget the note of a poll Telegram refused: it was never shown."""
        await self._write_one("DELETE FROM quiz_sends WHERE id = ?", (sending,))

    async def adopt_poll(self, poll_id: str, user_id: int) -> SentPoll | None:
        """Match an answer to a poll the bot never recorded to the learner's latest poll sent but not recorded.

        Telegram reports answers only to the bot's own polls, so an unknown one went out while its recording did
        not happen (the bot died in between, or the reply was lost). It becomes the awaited poll when none is
        awaited or the awaited one asks the same question, so answering it moves the round on. None: no note.
        """
        now = self._now()

        def adopt(conn: SyncConnection) -> Any:
            note = conn.execute(
                "SELECT lesson_id, question_id, options, started_at FROM quiz_sends WHERE user_id = ?"
                " ORDER BY id DESC LIMIT 1",
                (user_id,),
            ).fetchone()
            if note is None:
                return None
            conn.execute(
                "INSERT INTO quiz_polls (poll_id, user_id, lesson_id, question_id, options, message_id,"
                " sent_at) VALUES (?, ?, ?, ?, ?, NULL, ?) ON CONFLICT (poll_id) DO NOTHING",
                (poll_id, user_id, note["lesson_id"], note["question_id"], note["options"], note["started_at"]),
            )
            conn.execute(
                "UPDATE learners SET quiz_poll_id = :poll, updated_at = :now WHERE user_id = :user"
                " AND quiz_lesson_id = :lesson AND instr(' ' || quiz_queue || ' ', ' ' || :question || ' ') > 0"
                " AND (quiz_poll_id IS NULL OR quiz_poll_id IN ("
                "  SELECT p.poll_id FROM quiz_polls AS p WHERE p.lesson_id = :lesson AND p.question_id = :question"
                "  AND p.poll_id NOT IN (SELECT a.poll_id FROM quiz_answers AS a WHERE a.user_id = :user)))",
                {
                    "poll": poll_id,
                    "now": now,
                    "user": user_id,
                    "lesson": note["lesson_id"],
                    "question": note["question_id"],
                },
            )
            return note

        note = await self._transaction(adopt)
        if note is None:
            return None
        return SentPoll(poll_id, user_id, note["lesson_id"], note["question_id"], tuple(note["options"].split()))

    async def answered_poll(self, poll_id: str) -> FoundPoll | None:
        """Return the poll the bot sent with this id, whether its answer is recorded, and whether its question was
        answered through another poll since it was sent; None if the bot sent no such poll (one read)."""
        row = await self._one(
            "SELECT poll_id, user_id, lesson_id, question_id, options,"
            " EXISTS (SELECT 1 FROM quiz_answers AS a WHERE a.poll_id = p.poll_id) AS answered,"
            " EXISTS (SELECT 1 FROM quiz_answers AS a WHERE a.user_id = p.user_id AND a.lesson_id = p.lesson_id"
            "  AND a.question_id = p.question_id AND a.poll_id <> p.poll_id AND a.answered_at >= p.sent_at)"
            " AS superseded"
            " FROM quiz_polls AS p WHERE poll_id = ?",
            (poll_id,),
        )
        if row is None:
            return None
        return FoundPoll(sent_poll_from_row(row), bool(row["answered"]), bool(row["superseded"]))

    async def poll_age(self, poll_id: str) -> dt.timedelta | None:
        """Return how long ago the poll was sent, by the database's clock (None: no such poll)."""
        row = await self._one("SELECT sent_at FROM quiz_polls WHERE poll_id = ?", (poll_id,))
        return self.clock() - dt.datetime.fromisoformat(row["sent_at"]) if row is not None else None

    async def poll_message(self, poll_id: str) -> int | None:
        """Return the id of the message that carries the poll, if known."""
        row = await self._one("SELECT message_id FROM quiz_polls WHERE poll_id = ?", (poll_id,))
        return int(row["message_id"]) if row is not None and row["message_id"] is not None else None

    async def latest_answers(self, user_id: int) -> dict[tuple[str, str], Answer]:
        """Return each question's latest answer, keyed by (lesson id, question id)."""
        rows = await self._all(f"{LATEST_ANSWER} ORDER BY answered_at, poll_id", {"user": user_id})
        return {(row["lesson_id"], row["question_id"]): answer_from_row(row) for row in rows}
