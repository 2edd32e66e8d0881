"""Learner progress in one SQLite file, through aiosqlite: one connection, one writer, every value bound.

Rows are read by column name (sqlite3.Row) into the records of bot.learner; each method that changes a
learner's state performs one step of a machine in bot.states, in one transaction.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any, TypeAlias

import aiosqlite

from bot.drills import DrillProgress
from bot.errors import StorageError
from bot.learner import Answer, Learner, LessonProgress, ReaderView, SentPoll
from bot.storage.migrations import MIGRATIONS

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 5000
# Telegram redelivers an update only within a short window; this many ids are remembered.
REMEMBERED_UPDATES = 100_000


Params: TypeAlias = tuple[Any, ...] | dict[str, Any]


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def _learner(row: sqlite3.Row) -> Learner:
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
    )


def _lesson_progress(row: sqlite3.Row) -> LessonProgress:
    completed_at = row["completed_at"]
    return LessonProgress(
        lesson_id=row["lesson_id"],
        slide=row["slide"],
        furthest_slide=row["furthest_slide"],
        slides_read=row["slides_read_at"] is not None,
        completed=completed_at is not None,
        started=True,
        completed_on=dt.datetime.fromisoformat(completed_at).date() if completed_at else None,
    )


def _sent_poll(row: sqlite3.Row) -> SentPoll:
    return SentPoll(
        poll_id=row["poll_id"], user_id=row["user_id"], lesson_id=row["lesson_id"], question_id=row["question_id"]
    )


def _answer(row: sqlite3.Row) -> Answer:
    return Answer(
        lesson_id=row["lesson_id"],
        question_id=row["question_id"],
        option_index=row["option_index"],
        correct=bool(row["correct"]),
    )


def _drill_progress(row: sqlite3.Row) -> DrillProgress:
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
    """The progress database. Open it once with ``await Database.open(path)``; ``close()`` is idempotent."""

    def __init__(self, conn: aiosqlite.Connection, path: Path):
        self._conn = conn
        self.path = path
        self._writer = asyncio.Lock()
        self._closed = False

    @classmethod
    async def open(cls, path: Path) -> Database:
        """Open (creating if needed) and migrate the database at ``path``."""
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: transactions are explicit, so each write decides its own.
            conn = await aiosqlite.connect(path, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(f"cannot open the database {path}: {exc}") from exc
        conn.row_factory = sqlite3.Row
        db = cls(conn, path)
        try:
            # PRAGMA takes no bound parameters; the value is our own integer.
            await conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_MS)}")
            mode = await db._one("PRAGMA journal_mode = WAL")
            if mode is None or mode["journal_mode"].lower() != "wal":
                log.warning("SQLite refused WAL mode for %s (journal_mode=%s)", path, mode and mode["journal_mode"])
            await conn.execute("PRAGMA synchronous = NORMAL")
            await conn.execute("PRAGMA foreign_keys = ON")
            await db._migrate()
        except sqlite3.DatabaseError as exc:
            await conn.close()
            raise StorageError(f"the database {path} is unusable: {exc}") from exc
        except BaseException:
            await conn.close()
            raise
        return db

    async def _migrate(self) -> None:
        version = await self.schema_version()
        if version > len(MIGRATIONS):
            raise StorageError(
                f"the database {self.path} has schema version {version}, newer than this "
                f"coursebot knows ({len(MIGRATIONS)}); run a newer coursebot or restore a backup"
            )
        for number in range(version + 1, len(MIGRATIONS) + 1):
            # One script, one transaction: a migration and its version number land together or not at all.
            # PRAGMA takes no bound parameters; number is our own integer.
            script = f"BEGIN IMMEDIATE;\n{MIGRATIONS[number - 1]};\nPRAGMA user_version = {int(number)};\nCOMMIT;"
            async with self._writer:
                try:
                    await self._conn.executescript(script)
                except sqlite3.Error:
                    if self._conn.in_transaction:
                        await self._conn.execute("ROLLBACK")
                    raise
            log.info("database %s migrated to schema version %d", self.path, number)

    async def close(self) -> None:
        """Close the connection; calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        async with self._writer:
            await self._conn.close()

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[aiosqlite.Connection]:
        """Run a block as one transaction, one writer at a time."""
        async with self._writer:
            await self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                await self._conn.execute("ROLLBACK")
                raise
            else:
                await self._conn.execute("COMMIT")

    async def _write_one(self, sql: str, params: Params = ()) -> int:
        """Run one statement as its own transaction (autocommit); return the rows it changed.

        One round trip to the database thread instead of three: this is on every tap's path.
        """
        async with self._writer:
            cursor = await self._conn.execute(sql, params)
            return cursor.rowcount

    async def _one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        rows = await self._all(sql, params)
        return rows[0] if rows else None

    async def _all(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        # The connection's row factory makes every row a sqlite3.Row.
        return [row for row in await self._conn.execute_fetchall(sql, params) if isinstance(row, sqlite3.Row)]

    async def schema_version(self) -> int:
        """Return the number of the last migration applied."""
        row = await self._one("PRAGMA user_version")
        return int(row["user_version"]) if row is not None else 0

    # Updates

    async def first_delivery(self, update_id: int) -> bool:
        """Record ``update_id``; return False if it was already processed (a redelivery)."""
        fresh = (
            await self._write_one(
                "INSERT OR IGNORE INTO processed_updates (update_id, processed_at) VALUES (?, ?)", (update_id, _now())
            )
            == 1
        )
        if fresh and update_id % 1000 == 0:
            await self._write_one(
                "DELETE FROM processed_updates WHERE update_id < ?", (update_id - REMEMBERED_UPDATES,)
            )
        return fresh

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
        now = _now()
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
            " reader_view, quiz_lesson_id, quiz_queue, quiz_poll_id, practice_lesson_id, hints_shown"
            " FROM learners WHERE user_id = ?",
            (user_id,),
        )
        return _learner(row) if row is not None else None

    async def set_language(self, user_id: int, language: str | None) -> None:
        """Store the learner's chosen language (None: follow Telegram's)."""
        async with self._write() as conn:
            await conn.execute(
                "UPDATE learners SET language = ?, updated_at = ? WHERE user_id = ?", (language, _now(), user_id)
            )

    # Lessons

    async def progress(self, user_id: int) -> dict[str, LessonProgress]:
        """Return the learner's progress in every lesson they started."""
        rows = await self._all(
            "SELECT lesson_id, slide, furthest_slide, slides_read_at, completed_at"
            " FROM lesson_progress WHERE user_id = ?",
            (user_id,),
        )
        return {row["lesson_id"]: _lesson_progress(row) for row in rows}

    async def show_slide(
        self, user_id: int, lesson_id: str, slide: int, *, last_slide: int, message_id: int | None
    ) -> None:
        """Put the learner on ``slide`` of ``lesson_id``, shown in ``message_id``."""
        now = _now()
        async with self._write() as conn:
            await conn.execute(
                "INSERT INTO lesson_progress (user_id, lesson_id, slide, furthest_slide, slides_read_at)"
                " VALUES (:user, :lesson, :slide, :slide, CASE WHEN :slide >= :last THEN :now END)"
                " ON CONFLICT (user_id, lesson_id) DO UPDATE SET slide = :slide,"
                " furthest_slide = max(furthest_slide, :slide),"
                " slides_read_at = coalesce(slides_read_at, CASE WHEN :slide >= :last THEN :now END)",
                {"user": user_id, "lesson": lesson_id, "slide": slide, "last": last_slide, "now": now},
            )
            await conn.execute(
                "UPDATE learners SET lesson_id = ?, reader_message_id = coalesce(?, reader_message_id),"
                " reader_view = 'slide', updated_at = ? WHERE user_id = ?",
                (lesson_id, message_id, now, user_id),
            )

    async def slide_readers(self, since: dt.datetime) -> list[tuple[Learner, int]]:
        """Return the learners reading a slide whose place changed since ``since``, each with that slide."""
        rows = await self._all(
            "SELECT learners.*, lesson_progress.slide AS shown_slide FROM learners"
            " JOIN lesson_progress ON lesson_progress.user_id = learners.user_id"
            " AND lesson_progress.lesson_id = learners.lesson_id"
            " WHERE learners.reader_view = 'slide' AND learners.reader_message_id IS NOT NULL"
            " AND learners.updated_at >= ?",
            (since.astimezone(dt.UTC).isoformat(timespec="milliseconds"),),
        )
        return [(_learner(row), row["shown_slide"]) for row in rows]

    async def set_reader_message(self, user_id: int, message_id: int, view: ReaderView) -> None:
        """Remember which message is edited in place for the learner, and what it shows."""
        await self._write_one(
            "UPDATE learners SET reader_message_id = ?, reader_view = ?, updated_at = ? WHERE user_id = ?",
            (message_id, view.value, _now(), user_id),
        )

    async def complete_lesson(self, user_id: int, lesson_id: str) -> bool:
        """Mark the lesson done; return True if it was not done before."""
        async with self._write() as conn:
            cursor = await conn.execute(
                "UPDATE lesson_progress SET completed_at = ? WHERE user_id = ? AND lesson_id = ?"
                " AND completed_at IS NULL AND slides_read_at IS NOT NULL",
                (_now(), user_id, lesson_id),
            )
            return cursor.rowcount == 1

    # Quick Check

    async def start_quiz(self, user_id: int, lesson_id: str, question_ids: list[str]) -> None:
        """Queue the questions of a Quick Check round, replacing any round under way."""
        async with self._write() as conn:
            await conn.execute(
                "UPDATE learners SET quiz_lesson_id = ?, quiz_queue = ?, quiz_poll_id = NULL, updated_at = ?"
                " WHERE user_id = ?",
                (lesson_id, " ".join(question_ids), _now(), user_id),
            )

    async def poll_sent(self, poll: SentPoll, message_id: int) -> None:
        """Record a sent quiz poll as the one the learner's round awaits."""
        now = _now()
        async with self._write() as conn:
            await conn.execute(
                "INSERT INTO quiz_polls (poll_id, user_id, lesson_id, question_id, message_id, sent_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (poll.poll_id, poll.user_id, poll.lesson_id, poll.question_id, message_id, now),
            )
            await conn.execute(
                "UPDATE learners SET quiz_poll_id = ?, updated_at = ? WHERE user_id = ?",
                (poll.poll_id, now, poll.user_id),
            )

    async def sent_poll(self, poll_id: str) -> SentPoll | None:
        """Return the poll the bot sent with this id, or None."""
        row = await self._one(
            "SELECT poll_id, user_id, lesson_id, question_id FROM quiz_polls WHERE poll_id = ?", (poll_id,)
        )
        return _sent_poll(row) if row is not None else None

    async def record_answer(self, poll: SentPoll, option_index: int, correct: bool) -> tuple[str, ...] | None:
        """Record an answer; if it answers the awaited poll, pop it and return the questions left.

        Returns None when the answer was already recorded or its poll is not the awaited one.
        """
        now = _now()
        async with self._write() as conn:
            cursor = await conn.execute(
                "INSERT OR IGNORE INTO quiz_answers"
                " (poll_id, user_id, lesson_id, question_id, option_index, correct, answered_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (poll.poll_id, poll.user_id, poll.lesson_id, poll.question_id, option_index, int(correct), now),
            )
            if cursor.rowcount != 1:
                return None
            row = await self._one(
                "SELECT quiz_queue FROM learners WHERE user_id = ? AND quiz_poll_id = ?", (poll.user_id, poll.poll_id)
            )
            if row is None:
                return None
            remaining = tuple(q for q in row["quiz_queue"].split() if q != poll.question_id)
            await conn.execute(
                "UPDATE learners SET quiz_queue = ?, quiz_poll_id = NULL,"
                " quiz_lesson_id = CASE WHEN ? = '' THEN NULL ELSE quiz_lesson_id END,"
                " updated_at = ? WHERE user_id = ?",
                (" ".join(remaining), " ".join(remaining), now, poll.user_id),
            )
            return remaining

    async def latest_answers(self, user_id: int) -> dict[tuple[str, str], Answer]:
        """Return each question's latest answer, keyed by (lesson id, question id)."""
        rows = await self._all(
            "SELECT lesson_id, question_id, option_index, correct FROM quiz_answers AS a"
            " WHERE user_id = ? AND answered_at = (SELECT max(answered_at) FROM quiz_answers"
            " WHERE user_id = a.user_id AND lesson_id = a.lesson_id AND question_id = a.question_id)"
            " ORDER BY rowid",
            (user_id,),
        )
        return {(row["lesson_id"], row["question_id"]): _answer(row) for row in rows}

    # Practice

    async def start_practice(self, user_id: int, lesson_id: str) -> None:
        """Put the learner on a lesson's exercise, with no hints shown yet."""
        async with self._write() as conn:
            await conn.execute(
                "UPDATE learners SET practice_lesson_id = ?, hints_shown = 0, updated_at = ? WHERE user_id = ?",
                (lesson_id, _now(), user_id),
            )

    async def stop_practice(self, user_id: int) -> None:
        """Leave the exercise: messages are no longer taken as answers."""
        async with self._write() as conn:
            await conn.execute(
                "UPDATE learners SET practice_lesson_id = NULL, hints_shown = 0, updated_at = ? WHERE user_id = ?",
                (_now(), user_id),
            )

    async def show_hint(self, user_id: int, limit: int) -> int:
        """Count one more hint shown (at most ``limit``); return how many are shown now."""
        async with self._write() as conn:
            await conn.execute(
                "UPDATE learners SET hints_shown = min(hints_shown + 1, ?), updated_at = ? WHERE user_id = ?",
                (limit, _now(), user_id),
            )
            row = await self._one("SELECT hints_shown FROM learners WHERE user_id = ?", (user_id,))
            return int(row["hints_shown"]) if row is not None else 0

    async def record_attempt(self, user_id: int, lesson_id: str, passed: bool) -> None:
        """Record one graded attempt at a lesson's exercise."""
        async with self._write() as conn:
            await conn.execute(
                "INSERT INTO exercise_attempts (user_id, lesson_id, passed, attempted_at) VALUES (?, ?, ?, ?)",
                (user_id, lesson_id, int(passed), _now()),
            )

    async def exercises_passed(self, user_id: int) -> set[str]:
        """Return the lessons whose exercise the learner has passed."""
        rows = await self._all(
            "SELECT DISTINCT lesson_id FROM exercise_attempts WHERE user_id = ? AND passed = 1", (user_id,)
        )
        return {row["lesson_id"] for row in rows}

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
        now = _now()
        async with self._write() as conn:
            cursor = await conn.execute(
                "INSERT INTO drill_progress"
                " (user_id, lesson_id, drill_id, placed, ruled_out, turn, tries, done, checked, solved_at, updated_at)"
                " VALUES (:user, :lesson, :drill, :placed, :ruled_out, :turn, :tries, :done, :checked,"
                " CASE WHEN :solved THEN :now END, :now)"
                " ON CONFLICT (user_id, lesson_id, drill_id) DO UPDATE SET placed = :placed, ruled_out = :ruled_out,"
                " turn = :turn, tries = :tries, done = :done, checked = :checked,"
                " solved_at = coalesce(solved_at, CASE WHEN :solved THEN :now END), updated_at = :now"
                " WHERE turn = :before",
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
            return cursor.rowcount == 1

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
            for table in ("quiz_answers", "quiz_polls", "lesson_progress", "exercise_attempts", "drill_progress"):
                # Table names come from the tuple above, never from input.
                await conn.execute(f"DELETE FROM {table} WHERE user_id = ?", (user_id,))
            await conn.execute(
                "UPDATE learners SET lesson_id = NULL, reader_message_id = NULL, reader_view = NULL,"
                " quiz_lesson_id = NULL, quiz_queue = '', quiz_poll_id = NULL,"
                " practice_lesson_id = NULL, hints_shown = 0, updated_at = ? WHERE user_id = ?",
                (_now(), user_id),
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
