"""The learners' table: who each learner is, their language, and forgetting their progress."""

from __future__ import annotations

from bot.errors import StorageError
from bot.learner import Learner, ReaderView
from bot.storage.engine import Engine, Row

# The columns learner_from_row reads (the statement is ours, never built from input).
LEARNER_COLUMNS = (
    "user_id, chat_id, language, telegram_language, lesson_id, reader_message_id, reader_view, quiz_lesson_id,"
    " quiz_queue, quiz_poll_id, practice_lesson_id, hints_shown, quiz_seed"
)


def learner_from_row(row: Row) -> Learner:
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


class LearnerQueries(Engine):
    """Learners: found, noted on contact, their language set, their progress reset."""

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
        # One statement, retried on its own if the database restarts under it (an upsert: the same row either way).
        await self._write_one(
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
            f"SELECT {LEARNER_COLUMNS} FROM learners WHERE user_id = ?",
            (user_id,),
        )
        return learner_from_row(row) if row is not None else None

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
