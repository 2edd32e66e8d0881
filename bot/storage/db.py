"""Learner progress in one SQLite file (the default) or one PostgreSQL database, every value bound.

The queries are written once for both engines (bot.storage.backend). Rows are read by column name into the records
of bot.learner; each method that changes a learner's state performs one step of a machine in bot.states, in one
transaction.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, closing
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from bot.course.model import Course
from bot.errors import StorageError
from bot.learner import Answer, DrillProgress, EventKind, Learner, LessonProgress, ReaderView, SentPoll
from bot.storage.backend import PURGE_LOCK, Backend, Params, Row, Transaction, is_url
from bot.storage.migrations import MIGRATIONS
from bot.storage.migrations_pg import POSTGRES_MIGRATIONS
from bot.storage.sqlite import BUSY_TIMEOUT_MS, SqliteBackend

log = logging.getLogger(__name__)
# What time it is, as an aware datetime; tests pass their own so no test waits for time to pass.
Clock: TypeAlias = Callable[[], dt.datetime]


def utc_now() -> dt.datetime:
    """Return the current time in UTC: the database's clock unless one is injected."""
    return dt.datetime.now(dt.UTC)


def timestamp(moment: dt.datetime) -> str:
    """Return ``moment`` as the database stores times: UTC, ISO 8601 to the millisecond."""
    return moment.astimezone(dt.UTC).isoformat(timespec="milliseconds")


def _learner(row: Row) -> Learner:
    return Learner(
        user_id=row["user_id"],
        chat_id=row["chat_id"],
        language=row["language"],
        telegram_language=row["telegram_language"],
        lesson_id=row["lesson_id"],
        reader_message_id=row["reader_message_id"],
        reader_view=ReaderView(row["reader_view"]) if row["reader_view"] else None,
        quiz_lesson_id=row["quiz_lesson_id"],
        quiz_queue=tuple(row["quiz_queue"].split()),
        quiz_poll_id=row["quiz_poll_id"],
        practice_lesson_id=row["practice_lesson_id"],
        hints_shown=row["hints_shown"],
        quiz_seed=row["quiz_seed"],
    )


def _lesson_progress(row: Row) -> LessonProgress:
    completed_at = row["completed_at"]
    return LessonProgress(
        lesson_id=row["lesson_id"],
        slide_id=row["slide_id"],
        furthest_slide_id=row["furthest_slide_id"],
        slides_read=row["slides_read_at"] is not None,
        completed=completed_at is not None,
        started=True,
        completed_on=dt.datetime.fromisoformat(completed_at).date() if completed_at else None,
    )


def _sent_poll(row: Row) -> SentPoll:
    return SentPoll(
        poll_id=row["poll_id"],
        user_id=row["user_id"],
        lesson_id=row["lesson_id"],
        question_id=row["question_id"],
        options=tuple((row["options"] or "").split()),
    )


def _answer(row: Row) -> Answer:
    return Answer(
        lesson_id=row["lesson_id"],
        question_id=row["question_id"],
        option_id=row["option_id"],
        correct=bool(row["correct"]),
    )


@dataclass(frozen=True)
class Adopted:
    """What adopting the lessons being served changed in stored places (Database.adopt_course)."""

    slides_removed: int = 0  # slides gone from a lesson since it was last served
    learners_moved: int = 0  # places on a removed slide, moved to the next slide that remains
    rows_converted: int = 0  # positions left by schema 2 turned into ids


@dataclass(frozen=True)
class Recorded:
    """An answer just recorded, and what it did to the learner's round."""

    remaining: tuple[str, ...] | None  # the questions left, or None: its poll was not the one awaited


def _drill_progress(row: Row) -> DrillProgress:
    return DrillProgress(
        placed=tuple(int(i) for i in row["placed"].split()),
        ruled_out=frozenset(int(i) for i in row["ruled_out"].split()),
        turn=row["turn"],
        tries=row["tries"],
        solved=row["solved_at"] is not None,
        done=bool(row["done"]),
        checked=bool(row["checked"]),
    )


class Database:
    """The progress database. Open it once with ``await Database.open(path or URL)``; ``close()`` is idempotent."""

    def __init__(self, engine: Backend, clock: Clock = utc_now, events_days: int | None = None):
        self.engine = engine
        # The SQLite file (None on PostgreSQL); ``where`` names either, for messages.
        self.path = engine.path if isinstance(engine, SqliteBackend) else None
        self.where = engine.where
        self.clock = clock
        # How long learning events are kept: None keeps them, 0 records none (bot.config: COURSEBOT_EVENTS_DAYS).
        self.events_days = events_days

    def _now(self) -> str:
        return timestamp(self.clock())

    @classmethod
    async def open(
        cls, target: Path | str, *, clock: Clock = utc_now, events_days: int | None = None, pool_size: int = 10
    ) -> Database:
        """Open (creating if needed) and migrate the database: an SQLite file's path, or a ``postgresql://`` URL.

        ``clock`` stamps every write; learning events are kept ``events_days`` days (None: for good);
        ``pool_size`` is how many PostgreSQL connections this process holds at most.
        """
        engine: Backend
        if is_url(target):
            # Imported only when chosen: a bot on SQLite never loads psycopg.
            from bot.storage.postgres import PostgresBackend

            engine = await PostgresBackend.open(str(target), pool_size=pool_size)
        else:
            engine = await SqliteBackend.open(Path(target))
        db = cls(engine, clock, events_days)
        try:
            await db._migrate()
        except sqlite3.DatabaseError as exc:
            await engine.close()
            raise StorageError(f"the database {engine.where} is unusable: {exc}") from exc
        except BaseException:
            await engine.close()
            raise
        return db

    async def _migrate(self) -> None:
        migrations = MIGRATIONS if self.engine.name == "sqlite" else POSTGRES_MIGRATIONS
        version = await self.schema_version()
        if version > len(migrations):
            raise StorageError(
                f"the database {self.where} has schema version {version}, newer than this "
                f"coursebot knows ({len(migrations)}); run a newer coursebot or restore a backup"
            )
        for number in await self.engine.migrate(migrations):
            log.info("database %s migrated to schema version %d", self.where, number)

    async def close(self) -> None:
        """Close the connection; calling it again does nothing."""
        await self.engine.close()

    def _write(self, *, to_disk: bool = False) -> AbstractAsyncContextManager[Transaction]:
        """Run a block as one transaction (``to_disk``: one that survives a crash of the machine too)."""
        return self.engine.transaction(to_disk=to_disk)

    async def _write_one(self, sql: str, params: Params = ()) -> int:
        """Run one statement as its own transaction; return the rows it changed (one round trip: every tap's path)."""
        return await self.engine.write_one(sql, params)

    async def _one(self, sql: str, params: Params = ()) -> Row | None:
        return await self.engine.one(sql, params)

    async def _all(self, sql: str, params: Params = ()) -> list[Row]:
        return await self.engine.all(sql, params)

    async def schema_version(self) -> int:
        """Return the number of the last migration applied."""
        return await self.engine.schema_version()

    # Updates: the inbox (bot.updates)

    async def check_writable(self) -> None:
        """Take a write transaction and commit it (it changes nothing): raises if the database cannot be written."""
        await self.engine.check_writable()

    async def accept_updates(self, updates: Sequence[tuple[int, str]], now: dt.datetime) -> set[int]:
        """Store fetched updates (id, JSON) as pending, on disk; return the ids not stored before.

        An id stored before is a redelivery: pending (replayed at start) or handled already, so not new.
        """
        if not updates:
            return set()
        fresh = set()
        # Telegram forgets an update once the next getUpdates confirms it, so it must be on disk by then. The insert
        # is the claim: of two processes given one update, the second inserts nothing (it waits for the first's
        # commit on PostgreSQL), so it is new to one of them only.
        async with self._write(to_disk=True) as conn:
            for update_id, payload in updates:
                claimed = await conn.one(
                    "INSERT INTO inbox (update_id, payload, received_at) VALUES (?, ?, ?)"
                    " ON CONFLICT (update_id) DO NOTHING RETURNING update_id",
                    (update_id, payload, timestamp(now)),
                )
                if claimed is not None:
                    fresh.add(update_id)
        return fresh

    async def unhandled_updates(
        self, max_crashes: int, now: dt.datetime
    ) -> tuple[list[tuple[int, int, str]], list[int]]:
        """Count a replay for every pending update; return (id, replays, JSON) of each, in order, and the ids given
        up now because the bot died ``max_crashes`` times while handling them alone."""
        async with self._write() as conn:
            # Still pending and handled alone when the bot stopped: it died handling this update, and this one only.
            await conn.execute(
                "UPDATE inbox SET crashes = crashes + 1, alone = 0 WHERE state = 'pending' AND alone = 1"
            )
            abandoned = [
                row[0]
                for row in await conn.all(
                    "SELECT update_id FROM inbox WHERE state = 'pending' AND crashes >= ? ORDER BY update_id",
                    (max_crashes,),
                )
            ]
            await conn.execute(
                "UPDATE inbox SET state = 'abandoned', payload = NULL, handled_at = ?"
                " WHERE state = 'pending' AND crashes >= ?",
                (timestamp(now), max_crashes),
            )
            await conn.execute("UPDATE inbox SET replays = replays + 1 WHERE state = 'pending'")
            rows = await conn.all(
                "SELECT update_id, replays, payload FROM inbox WHERE state = 'pending' ORDER BY update_id"
            )
        return [(row[0], row[1], row[2]) for row in rows], abandoned

    async def give_up_update(self, update_id: int, now: dt.datetime) -> None:
        """Mark a pending update abandoned: it is never handled."""
        await self._write_one(
            "UPDATE inbox SET state = 'abandoned', payload = NULL, handled_at = ? WHERE update_id = ?",
            (timestamp(now), update_id),
        )

    async def handling_alone(self, update_id: int, alone: bool) -> None:
        """Note whether a pending update is being handled alone, so that a crash meanwhile is blamed on it."""
        await self._write_one("UPDATE inbox SET alone = ? WHERE update_id = ?", (int(alone), update_id))

    async def updates_handled(self, update_ids: Sequence[int], now: dt.datetime) -> None:
        """Mark updates handled; their text is dropped, their ids kept to recognise redeliveries."""
        async with self._write() as conn:
            await conn.executemany(
                "UPDATE inbox SET state = 'handled', payload = NULL, handled_at = ? WHERE update_id = ?"
                " AND state = 'pending'",
                [(timestamp(now), update_id) for update_id in update_ids],
            )

    async def forget_updates(self, received_before: dt.datetime) -> int:
        """Delete handled updates received before ``received_before``; return how many (0 when another process
        is purging them right now: the daily purge runs in one process, whichever comes first)."""
        async with self._write() as conn:
            if not await conn.try_lock(PURGE_LOCK):
                return 0
            return await conn.execute(
                "DELETE FROM inbox WHERE state != 'pending' AND received_at < ?", (timestamp(received_before),)
            )

    # Learners

    async def learner(self, user_id: int, chat_id: int, telegram_language: str | None) -> Learner:
        """Return the learner, creating them on first contact and noting Telegram's language."""
        return await self.noted(await self.find_learner(user_id), user_id, chat_id, telegram_language)

    async def noted(self, found: Learner | None, user_id: int, chat_id: int, telegram_language: str | None) -> Learner:
        """Return the learner ``found`` by find_learner just now (None: new), with this contact's chat and language."""
        # Poll answers carry no language_code; keep the last one Telegram sent.
        language = telegram_language or (found.telegram_language if found else None)
        if found is not None and found.chat_id == chat_id and found.telegram_language == language:
            return found  # the common case: nothing to write
        now = self._now()
        async with self._write() as conn:
            await conn.execute(
                "INSERT INTO learners (user_id, chat_id, telegram_language, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (user_id) DO UPDATE SET chat_id = excluded.chat_id,"
                " telegram_language = excluded.telegram_language, updated_at = excluded.updated_at",
                (user_id, chat_id, language, now, now),
            )
        stored = await self.find_learner(user_id)
        if stored is None:
            raise StorageError(f"learner {user_id} was written but cannot be read back from {self.path}")
        return stored

    async def find_learner(self, user_id: int) -> Learner | None:
        """Return the learner, or None if they never wrote to the bot."""
        row = await self._one(
            "SELECT user_id, chat_id, language, telegram_language, lesson_id, reader_message_id,"
            " reader_view, quiz_lesson_id, quiz_queue, quiz_poll_id, practice_lesson_id, hints_shown, quiz_seed"
            " FROM learners WHERE user_id = ?",
            (user_id,),
        )
        return _learner(row) if row is not None else None

    async def set_language(self, user_id: int, language: str | None) -> None:
        """Store the learner's chosen language (None: follow Telegram's)."""
        async with self._write() as conn:
            await conn.execute(
                "UPDATE learners SET language = ?, updated_at = ? WHERE user_id = ?", (language, self._now(), user_id)
            )

    # Lessons

    async def progress(self, user_id: int) -> dict[str, LessonProgress]:
        """Return the learner's progress in every lesson they started."""
        rows = await self._all(
            "SELECT lesson_id, slide_id, furthest_slide_id, slides_read_at, completed_at"
            " FROM lesson_progress WHERE user_id = ?",
            (user_id,),
        )
        return {row["lesson_id"]: _lesson_progress(row) for row in rows}

    async def show_slide(
        self,
        user_id: int,
        lesson_id: str,
        slide_id: str,
        *,
        furthest_slide_id: str,
        last: bool,
        message_id: int | None,
    ) -> None:
        """Put the learner on ``slide_id`` of ``lesson_id``, shown in ``message_id``.

        ``furthest_slide_id`` is the furthest slide reached, this one included; ``last`` says this is the
        lesson's last slide, which marks its slides read for good.
        """
        now = self._now()
        async with self._write() as conn:
            await conn.execute(
                "INSERT INTO lesson_progress (user_id, lesson_id, slide_id, furthest_slide_id, slides_read_at)"
                " VALUES (:user, :lesson, :slide, :furthest, CASE WHEN :last = 1 THEN :now END)"
                " ON CONFLICT (user_id, lesson_id) DO UPDATE SET slide_id = :slide, furthest_slide_id = :furthest,"
                " slides_read_at = coalesce(lesson_progress.slides_read_at, CASE WHEN :last = 1 THEN :now END)",
                {
                    "user": user_id,
                    "lesson": lesson_id,
                    "slide": slide_id,
                    "furthest": furthest_slide_id,
                    "last": int(last),
                    "now": now,
                },
            )
            await conn.execute(
                "UPDATE learners SET lesson_id = ?, reader_message_id = coalesce(?, reader_message_id),"
                " reader_view = 'slide', updated_at = ? WHERE user_id = ?",
                (lesson_id, message_id, now, user_id),
            )

    async def slide_readers(self, since: dt.datetime) -> list[tuple[Learner, LessonProgress]]:
        """Return the learners reading a slide whose place changed since ``since``, each with that lesson's progress."""
        rows = await self._all(
            "SELECT learners.*, lesson_progress.slide_id, lesson_progress.furthest_slide_id,"
            " lesson_progress.slides_read_at, lesson_progress.completed_at FROM learners"
            " JOIN lesson_progress ON lesson_progress.user_id = learners.user_id"
            " AND lesson_progress.lesson_id = learners.lesson_id"
            " WHERE learners.reader_view = 'slide' AND learners.reader_message_id IS NOT NULL"
            " AND learners.updated_at >= ?",
            (timestamp(since),),
        )
        return [(_learner(row), _lesson_progress(row)) for row in rows]

    async def set_reader_message(self, user_id: int, message_id: int, view: ReaderView) -> None:
        """Remember which message is edited in place for the learner, and what it shows."""
        await self._write_one(
            "UPDATE learners SET reader_message_id = ?, reader_view = ?, updated_at = ? WHERE user_id = ?",
            (message_id, view.value, self._now(), user_id),
        )

    async def complete_lesson(self, user_id: int, lesson_id: str) -> bool:
        """Mark the lesson done; return True if it was not done before."""
        async with self._write() as conn:
            changed = await conn.execute(
                "UPDATE lesson_progress SET completed_at = ? WHERE user_id = ? AND lesson_id = ?"
                " AND completed_at IS NULL AND slides_read_at IS NOT NULL",
                (self._now(), user_id, lesson_id),
            )
            return changed == 1

    # The lessons as served: places follow their edits

    async def adopt_course(self, course: Course) -> Adopted:
        """Bring stored places in line with ``course`` (English, as the bot now serves it); one transaction.

        A slide removed since the lesson was last served sends the learners on it to the next slide that
        remains (the lesson's last if none does) and is remembered with that successor, so an old button
        naming it lands there too; positions that migration 3 could not convert (lessons it did not know)
        become ids, read against ``course``. Call it at start and after every reload, before learners are served.
        """
        slides_removed = learners_moved = converted = 0
        async with self._write() as conn:
            for lesson in course.lessons:
                order = [slide.id for slide in lesson.slides]
                removed, moved = await self._adopt_slide_order(conn, lesson.id, order)
                slides_removed += removed
                learners_moved += moved
                converted += await self._convert_positions(conn, lesson.id, order)
                for question in lesson.quiz:
                    converted += await self._convert_options(conn, lesson.id, question.id, list(question.option_ids))
        if slides_removed or learners_moved or converted:
            log.info(
                "lessons adopted: %d slides removed, %d places moved to the next slide, %d positions converted",
                slides_removed,
                learners_moved,
                converted,
            )
        return Adopted(slides_removed, learners_moved, converted)

    async def _adopt_slide_order(self, conn: Transaction, lesson_id: str, order: list[str]) -> tuple[int, int]:
        rows = await conn.all("SELECT slide_id, position, successor FROM slide_order WHERE lesson_id = ?", (lesson_id,))
        served = set(order)
        before = [
            row["slide_id"] for row in sorted(rows, key=lambda r: r["position"] or 0) if row["position"] is not None
        ]
        # Each slide gone now: the next one after it, in the order served before, that is still here.
        gone = {
            slide: next((later for later in before[i + 1 :] if later in served), None)
            for i, slide in enumerate(before)
            if slide not in served
        }
        retired = {
            row["slide_id"]: row["successor"]
            for row in rows
            if row["position"] is None and row["slide_id"] not in served
        }
        for slide, successor in retired.items():
            if successor is not None and successor not in served:
                retired[slide] = gone.get(successor)  # its successor went too: follow it on
        retired |= gone
        await conn.execute("DELETE FROM slide_order WHERE lesson_id = ?", (lesson_id,))
        await conn.executemany(
            "INSERT INTO slide_order (lesson_id, slide_id, position, successor) VALUES (?, ?, ?, NULL)",
            [(lesson_id, slide, position) for position, slide in enumerate(order)],
        )
        await conn.executemany(
            "INSERT INTO slide_order (lesson_id, slide_id, position, successor) VALUES (?, ?, NULL, ?)",
            [(lesson_id, slide, successor) for slide, successor in retired.items()],
        )
        moved = 0
        for slide, successor in gone.items():
            landing = successor or order[-1]
            index = order.index(landing)
            # Reached as far as the removed slide: read up to the one before its successor, so Next goes on.
            reached = order[index - 1] if successor is not None and index > 0 else landing
            moved += await conn.execute(
                "UPDATE lesson_progress SET slide_id = ? WHERE lesson_id = ? AND slide_id = ?",
                (landing, lesson_id, slide),
            )
            await conn.execute(
                "UPDATE lesson_progress SET furthest_slide_id = ? WHERE lesson_id = ? AND furthest_slide_id = ?",
                (reached, lesson_id, slide),
            )
        return len(gone), moved

    async def _convert_positions(self, conn: Transaction, lesson_id: str, order: list[str]) -> int:
        rows = await conn.all(
            "SELECT user_id, slide, furthest_slide FROM lesson_progress WHERE lesson_id = ? AND slide_id IS NULL",
            (lesson_id,),
        )
        last = len(order) - 1
        await conn.executemany(
            "UPDATE lesson_progress SET slide_id = ?, furthest_slide_id = ? WHERE user_id = ? AND lesson_id = ?",
            [
                (order[min(row["slide"], last)], order[min(row["furthest_slide"], last)], row["user_id"], lesson_id)
                for row in rows
            ],
        )
        return len(rows)

    async def _convert_options(self, conn: Transaction, lesson_id: str, question_id: str, option_ids: list[str]) -> int:
        # Schema 2 showed options in file order, so a stored position is an index into the file's options.
        rows = await conn.all(
            "SELECT poll_id, option_index FROM quiz_answers"
            " WHERE lesson_id = ? AND question_id = ? AND option_id IS NULL",
            (lesson_id, question_id),
        )
        # A position past the options (the question had more then) stays unconverted: its meaning is lost.
        answers = [
            (option_ids[row["option_index"]], row["poll_id"])
            for row in rows
            if 0 <= row["option_index"] < len(option_ids)
        ]
        await conn.executemany("UPDATE quiz_answers SET option_id = ? WHERE poll_id = ?", answers)
        updated = await conn.execute(
            "UPDATE quiz_polls SET options = ? WHERE lesson_id = ? AND question_id = ? AND options IS NULL",
            (" ".join(option_ids), lesson_id, question_id),
        )
        return len(answers) + updated

    async def successor_of_removed_slide(self, lesson_id: str, slide_id: str) -> str | None:
        """Return the slide that stands where a removed slide was (see adopt_course), or None if it never was."""
        row = await self._one(
            "SELECT successor, (SELECT slide_id FROM slide_order AS o WHERE o.lesson_id = r.lesson_id"
            " AND o.position IS NOT NULL ORDER BY o.position DESC LIMIT 1) AS last_slide"
            " FROM slide_order AS r WHERE lesson_id = ? AND slide_id = ? AND position IS NULL",
            (lesson_id, slide_id),
        )
        if row is None:
            return None
        return str(row["successor"] or row["last_slide"])

    # Quick Check

    async def start_quiz(self, user_id: int, lesson_id: str, question_ids: list[str], seed: int) -> None:
        """Queue the questions of a Quick Check round, replacing any round under way; ``seed`` is its shuffle."""
        async with self._write() as conn:
            await conn.execute(
                "UPDATE learners SET quiz_lesson_id = ?, quiz_queue = ?, quiz_poll_id = NULL, quiz_seed = ?,"
                " updated_at = ? WHERE user_id = ?",
                (lesson_id, " ".join(question_ids), seed, self._now(), user_id),
            )

    async def drop_questions(self, user_id: int, question_ids: list[str]) -> tuple[str, ...]:
        """Take questions that left the lesson off the round, and the poll awaited with them; return those left."""
        async with self._write() as conn:
            row = await conn.one("SELECT quiz_queue FROM learners WHERE user_id = ?", (user_id,))
            queue = tuple(row["quiz_queue"].split()) if row is not None else ()
            remaining = tuple(q for q in queue if q not in question_ids)
            await conn.execute(
                "UPDATE learners SET quiz_queue = ?, quiz_poll_id = NULL, quiz_lesson_id = CASE WHEN ? = '' THEN NULL"
                " ELSE quiz_lesson_id END, updated_at = ? WHERE user_id = ?",
                (" ".join(remaining), " ".join(remaining), self._now(), user_id),
            )
            return remaining

    async def poll_sending(self, user_id: int, lesson_id: str, question_id: str, options: tuple[str, ...]) -> int:
        """Note a quiz poll about to be sent, before it is; return the note's id, for ``poll_sent``.

        Should the bot die after Telegram showed the poll but before it was recorded, the note lets the answer
        still count (``adopt_poll``).
        """
        async with self._write() as conn:
            row = await conn.one(
                "INSERT INTO quiz_sends (user_id, lesson_id, question_id, options, started_at) VALUES (?, ?, ?, ?, ?)"
                " RETURNING id",
                (user_id, lesson_id, question_id, " ".join(options), self._now()),
            )
            return int(row["id"]) if row is not None else 0

    async def poll_sent(self, poll: SentPoll, message_id: int, sending: int | None = None) -> None:
        """Record a sent quiz poll as the one the learner's round awaits; its note ``sending`` is done with."""
        now = self._now()
        async with self._write() as conn:
            await conn.execute(
                "INSERT INTO quiz_polls (poll_id, user_id, lesson_id, question_id, options, message_id, sent_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (poll.poll_id, poll.user_id, poll.lesson_id, poll.question_id, " ".join(poll.options), message_id, now),
            )
            await conn.execute(
                "UPDATE learners SET quiz_poll_id = ?, updated_at = ? WHERE user_id = ?",
                (poll.poll_id, now, poll.user_id),
            )
            await conn.execute("DELETE FROM quiz_sends WHERE id = ? AND user_id = ?", (sending, poll.user_id))

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
        async with self._write() as conn:
            note = await conn.one(
                "SELECT lesson_id, question_id, options, started_at FROM quiz_sends WHERE user_id = ?"
                " ORDER BY id DESC LIMIT 1",
                (user_id,),
            )
            if note is None:
                return None
            await conn.execute(
                "INSERT INTO quiz_polls (poll_id, user_id, lesson_id, question_id, options, message_id,"
                " sent_at) VALUES (?, ?, ?, ?, ?, NULL, ?) ON CONFLICT (poll_id) DO NOTHING",
                (poll_id, user_id, note["lesson_id"], note["question_id"], note["options"], note["started_at"]),
            )
            await conn.execute(
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
        return SentPoll(poll_id, user_id, note["lesson_id"], note["question_id"], tuple(note["options"].split()))

    async def sent_poll(self, poll_id: str) -> SentPoll | None:
        """Return the poll the bot sent with this id, or None."""
        row = await self._one(
            "SELECT poll_id, user_id, lesson_id, question_id, options FROM quiz_polls WHERE poll_id = ?", (poll_id,)
        )
        return _sent_poll(row) if row is not None else None

    async def poll_age(self, poll_id: str) -> dt.timedelta | None:
        """Return how long ago the poll was sent, by the database's clock (None: no such poll)."""
        row = await self._one("SELECT sent_at FROM quiz_polls WHERE poll_id = ?", (poll_id,))
        return self.clock() - dt.datetime.fromisoformat(row["sent_at"]) if row is not None else None

    async def poll_message(self, poll_id: str) -> int | None:
        """Return the id of the message that carries the poll, if known."""
        row = await self._one("SELECT message_id FROM quiz_polls WHERE poll_id = ?", (poll_id,))
        return int(row["message_id"]) if row is not None and row["message_id"] is not None else None

    async def record_answer(self, poll: SentPoll, option_index: int, option_id: str, correct: bool) -> Recorded | None:
        """Record an answer (the position tapped, and the option there); if it answers the awaited poll, pop
        its question from the round.

        Returns None when this poll's answer was recorded before.
        """
        now = self._now()
        async with self._write() as conn:
            inserted = await conn.execute(
                "INSERT INTO quiz_answers"
                " (poll_id, user_id, lesson_id, question_id, option_index, option_id, correct, answered_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (poll_id) DO NOTHING",
                (
                    poll.poll_id,
                    poll.user_id,
                    poll.lesson_id,
                    poll.question_id,
                    option_index,
                    option_id,
                    int(correct),
                    now,
                ),
            )
            if inserted != 1:
                return None
            row = await conn.one(
                "SELECT quiz_queue FROM learners WHERE user_id = ? AND quiz_poll_id = ?", (poll.user_id, poll.poll_id)
            )
            if row is None:
                return Recorded(None)
            remaining = tuple(q for q in row["quiz_queue"].split() if q != poll.question_id)
            await conn.execute(
                "UPDATE learners SET quiz_queue = ?, quiz_poll_id = NULL,"
                " quiz_lesson_id = CASE WHEN ? = '' THEN NULL ELSE quiz_lesson_id END,"
                " updated_at = ? WHERE user_id = ?",
                (" ".join(remaining), " ".join(remaining), now, poll.user_id),
            )
            return Recorded(remaining)

    async def latest_answers(self, user_id: int) -> dict[tuple[str, str], Answer]:
        """Return each question's latest answer, keyed by (lesson id, question id)."""
        rows = await self._all(
            "SELECT lesson_id, question_id, option_id, correct FROM quiz_answers AS a"
            " WHERE user_id = ? AND answered_at = (SELECT max(answered_at) FROM quiz_answers"
            " WHERE user_id = a.user_id AND lesson_id = a.lesson_id AND question_id = a.question_id)"
            " ORDER BY answered_at, poll_id",
            (user_id,),
        )
        return {(row["lesson_id"], row["question_id"]): _answer(row) for row in rows}

    # Practice

    async def start_practice(self, user_id: int, lesson_id: str) -> None:
        """Put the learner on a lesson's exercise, with no hints shown yet."""
        async with self._write() as conn:
            await conn.execute(
                "UPDATE learners SET practice_lesson_id = ?, hints_shown = 0, updated_at = ? WHERE user_id = ?",
                (lesson_id, self._now(), user_id),
            )

    async def stop_practice(self, user_id: int) -> None:
        """Leave the exercise: messages are no longer taken as answers."""
        async with self._write() as conn:
            await conn.execute(
                "UPDATE learners SET practice_lesson_id = NULL, hints_shown = 0, updated_at = ? WHERE user_id = ?",
                (self._now(), user_id),
            )

    async def show_hint(self, user_id: int, limit: int) -> int:
        """Count one more hint shown (at most ``limit``); return how many are shown now."""
        async with self._write() as conn:
            await conn.execute(
                "UPDATE learners SET hints_shown = CASE WHEN hints_shown < :limit THEN hints_shown + 1 ELSE :limit END,"
                " updated_at = :now WHERE user_id = :user",
                {"limit": limit, "now": self._now(), "user": user_id},
            )
            row = await conn.one("SELECT hints_shown FROM learners WHERE user_id = ?", (user_id,))
            return int(row["hints_shown"]) if row is not None else 0

    async def record_attempt(self, user_id: int, lesson_id: str, passed: bool) -> None:
        """Record one graded attempt at a lesson's exercise."""
        async with self._write() as conn:
            await conn.execute(
                "INSERT INTO exercise_attempts (user_id, lesson_id, passed, attempted_at) VALUES (?, ?, ?, ?)",
                (user_id, lesson_id, int(passed), self._now()),
            )

    async def exercises_passed(self, user_id: int) -> set[str]:
        """Return the lessons whose exercise the learner has passed."""
        rows = await self._all(
            "SELECT DISTINCT lesson_id FROM exercise_attempts WHERE user_id = ? AND passed = 1", (user_id,)
        )
        return {row["lesson_id"] for row in rows}

    # Learning events

    async def record_event(
        self,
        user_id: int,
        *,
        language: str,
        lesson_id: str,
        kind: EventKind | str,
        item_id: str | None = None,
        option_id: str | None = None,
        verdict: str | None = None,
        failed_check: str | None = None,
        seconds: float | None = None,
    ) -> None:
        """Record one learning event (bot.learner.EventKind says what each kind's fields hold).

        For a slide, ``seconds`` left out is the time since the learner's previous slide of this lesson: it
        stays None when something else came between (another lesson, the Quick Check, practice) or for the
        first. Nothing is recorded while events are kept 0 days.
        """
        if self.events_days == 0:
            return
        # One statement (one round trip on every tap): a slide's time on the previous one is worked out in SQL.
        await self._write_one(
            "INSERT INTO events (user_id, at, language, lesson_id, kind, item_id, option_id, verdict,"
            " failed_check, seconds) SELECT :user, :at, :language, :lesson, :kind, :item, :option, :verdict, :check,"
            # The cast types a NULL for PostgreSQL, which cannot tell the type of a bare parameter compared with NULL.
            " CASE WHEN CAST(:seconds AS DOUBLE PRECISION) IS NOT NULL OR :kind != 'slide'"
            " THEN CAST(:seconds AS DOUBLE PRECISION) ELSE ("
            "  SELECT CASE WHEN last.lesson_id = :lesson AND last.kind IN ('slide', 'back')"
            "  THEN round(CASE WHEN last.at > :at THEN 0.0 ELSE (julianday(:at) - julianday(last.at)) * 86400.0 END, 3)"
            "  END"
            "  FROM events AS last WHERE last.user_id = :user ORDER BY last.at DESC, last.id DESC LIMIT 1"
            " ) END",
            {
                "user": user_id,
                "at": self._now(),
                "language": language,
                "lesson": lesson_id,
                "kind": str(kind),
                "item": item_id,
                "option": option_id,
                "verdict": verdict,
                "check": failed_check,
                "seconds": seconds,
            },
        )

    async def purge_events(self) -> int:
        """Delete the learning events older than the days they are kept; return how many went."""
        if self.events_days is None:
            return 0
        cutoff = timestamp(self.clock() - dt.timedelta(days=self.events_days))
        async with self._write() as conn:
            if not await conn.try_lock(PURGE_LOCK):
                return 0  # another process is purging them right now
            return await conn.execute(
                "DELETE FROM events WHERE at < :cutoff OR :days = 0", {"cutoff": cutoff, "days": self.events_days}
            )

    # Drills

    async def drill_progress(self, user_id: int, lesson_id: str) -> dict[str, DrillProgress]:
        """Return the learner's attempt at each drill of a lesson they touched, by drill id."""
        rows = await self._all(
            "SELECT drill_id, placed, ruled_out, turn, tries, done, checked, solved_at FROM drill_progress"
            " WHERE user_id = ? AND lesson_id = ?",
            (user_id, lesson_id),
        )
        return {row["drill_id"]: _drill_progress(row) for row in rows}

    async def save_drill(
        self, user_id: int, lesson_id: str, drill_id: str, before: DrillProgress, after: DrillProgress
    ) -> bool:
        """Store ``after`` if the stored attempt is still ``before``; return False if another tap changed it first."""
        now = self._now()
        async with self._write() as conn:
            changed = await conn.execute(
                "INSERT INTO drill_progress"
                " (user_id, lesson_id, drill_id, placed, ruled_out, turn, tries, done, checked, solved_at, updated_at)"
                " VALUES (:user, :lesson, :drill, :placed, :ruled_out, :turn, :tries, :done, :checked,"
                " CASE WHEN :solved = 1 THEN :now END, :now)"
                " ON CONFLICT (user_id, lesson_id, drill_id) DO UPDATE SET placed = :placed, ruled_out = :ruled_out,"
                " turn = :turn, tries = :tries, done = :done, checked = :checked,"
                " solved_at = coalesce(drill_progress.solved_at, CASE WHEN :solved = 1 THEN :now END),"
                " updated_at = :now WHERE drill_progress.turn = :before",
                {
                    "user": user_id,
                    "lesson": lesson_id,
                    "drill": drill_id,
                    "placed": " ".join(map(str, after.placed)),
                    "ruled_out": " ".join(map(str, sorted(after.ruled_out))),
                    "turn": after.turn,
                    "tries": after.tries,
                    "done": int(after.done),
                    "checked": int(after.checked),
                    "solved": int(after.solved),
                    "before": before.turn,
                    "now": now,
                },
            )
            return changed == 1

    async def drills_solved(self, user_id: int) -> dict[str, set[str]]:
        """Return the drills the learner has solved, as drill ids by lesson id."""
        rows = await self._all(
            "SELECT lesson_id, drill_id FROM drill_progress WHERE user_id = ? AND solved_at IS NOT NULL", (user_id,)
        )
        solved: dict[str, set[str]] = {}
        for row in rows:
            solved.setdefault(row["lesson_id"], set()).add(row["drill_id"])
        return solved

    # Reset and backup

    async def reset(self, user_id: int) -> None:
        """Forget the learner's progress and answers; keep who they are and their language."""
        async with self._write() as conn:
            for table in (
                "quiz_answers",
                "quiz_polls",
                "quiz_sends",
                "lesson_progress",
                "exercise_attempts",
                "drill_progress",
            ):
                # Table names come from the tuple above, never from input.
                await conn.execute(f"DELETE FROM {table} WHERE user_id = ?", (user_id,))
            await conn.execute(
                "UPDATE learners SET lesson_id = NULL, reader_message_id = NULL, reader_view = NULL,"
                " quiz_lesson_id = NULL, quiz_queue = '', quiz_poll_id = NULL,"
                " practice_lesson_id = NULL, hints_shown = 0, updated_at = ? WHERE user_id = ?",
                (self._now(), user_id),
            )


def ensure_writable(path: Path) -> None:
    """Refuse, in one line naming the uid that must own them, a database or folder this process cannot write.

    SQLite would open such a file read-only and fail only at the first write, with every learner's update.
    """
    path = Path(path)
    folder = path.parent if path.parent.exists() else next(p for p in path.parents if p.exists())
    if os.statvfs(folder).f_flag & os.ST_RDONLY:
        # No owner could write it: saying who should own it would send the operator the wrong way.
        raise StorageError(
            f"cannot write the database {path}: {folder} is on a read-only file system (a volume mounted "
            "with :ro?); mount it read-write"
        )
    uid = os.geteuid()
    for place in (folder, path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if place.exists() and not os.access(place, os.W_OK):
            owner = place.stat().st_uid
            raise StorageError(
                f"cannot write the database {path}: {place} belongs to uid {owner} and coursebot runs as uid "
                f"{uid}; make uid {uid} its owner (chown -R {uid}:{os.getegid()} {folder})"
            )


def backup(source: Path, target: Path) -> None:
    """Copy a live database to ``target`` with SQLite's online backup; safe while the bot writes."""
    source, target = Path(source), Path(target)
    if not source.is_file():
        raise StorageError(f"there is no database at {source} (set COURSEBOT_DB to its path)")
    if target.exists() and target.resolve() == source.resolve():
        raise StorageError("the backup must go to another file than the database itself")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    try:
        with (
            closing(
                sqlite3.connect(source.resolve().as_uri() + "?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
            ) as src,
            closing(sqlite3.connect(partial)) as dst,
        ):
            src.backup(dst)
        # Only a complete copy takes the target's name, so a failed backup never leaves half a file.
        partial.replace(target)
    except sqlite3.Error as exc:
        partial.unlink(missing_ok=True)
        raise StorageError(f"backup of {source} failed: {exc}") from exc
