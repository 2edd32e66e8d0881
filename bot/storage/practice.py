"""The practice's table: graded attempts at exercises (the exercise under way is a column of learners)."""

from __future__ import annotations

from bot.storage.engine import Engine


class PracticeQueries(Engine):
    """Practice: the exercise under way, hints shown, attempts."""

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
