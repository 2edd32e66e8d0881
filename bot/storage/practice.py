"""The practice's table: graded attempts at exercises (the exercise under way is a column of learners)."""

from __future__ import annotations

from bot.storage.engine import Engine


class PracticeQueries(Engine):
    """Practice: the exercises passed (the attempts, the exercise under way and its hints are written by
    bot.storage.outcomes)."""

    async def exercises_passed(self, user_id: int) -> set[str]:
        """Return the lessons whose exercise the learner has passed."""
        rows = await self._all(
            "SELECT DISTINCT lesson_id FROM exercise_attempts WHERE user_id = ? AND passed = 1", (user_id,)
        )
        return {row["lesson_id"] for row in rows}
