"""The drills' table: each learner's attempt at each drill, changed by compare-and-set."""

from __future__ import annotations

from bot.learner import DrillProgress
from bot.storage.engine import Engine, Row


def drill_progress_from_row(row: Row) -> DrillProgress:
    return DrillProgress(
        placed=tuple(int(i) for i in row["placed"].split()),
        ruled_out=frozenset(int(i) for i in row["ruled_out"].split()),
        turn=row["turn"],
        tries=row["tries"],
        solved=row["solved_at"] is not None,
        done=bool(row["done"]),
        checked=bool(row["checked"]),
    )


# Compare-and-set: the row is written only if its turn is still the one the change was made from.
SAVE_DRILL = (
    "INSERT INTO drill_progress"
    " (user_id, lesson_id, drill_id, placed, ruled_out, turn, tries, done, checked, solved_at, updated_at)"
    " VALUES (:user, :lesson, :drill, :placed, :ruled_out, :turn, :tries, :done, :checked,"
    " CASE WHEN :solved = 1 THEN :now END, :now)"
    " ON CONFLICT (user_id, lesson_id, drill_id) DO UPDATE SET placed = :placed, ruled_out = :ruled_out,"
    " turn = :turn, tries = :tries, done = :done, checked = :checked,"
    " solved_at = coalesce(drill_progress.solved_at, CASE WHEN :solved = 1 THEN :now END), updated_at = :now"
    " WHERE drill_progress.turn = :before"
)


def drill_params(
    user_id: int, lesson_id: str, drill_id: str, before: DrillProgress, after: DrillProgress, now: str
) -> dict[str, object]:
    """Return SAVE_DRILL's parameters for a change from ``before`` to ``after``."""
    return {
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
    }


class DrillQueries(Engine):
    """Drill attempts counted solved (read with their lesson by bot.storage.snapshots, saved by compare-and-set
    with their update's outcome by bot.storage.outcomes)."""

    async def drills_solved(self, user_id: int) -> dict[str, set[str]]:
        """Return the drills the learner has solved, as drill ids by lesson id."""
        rows = await self._all(
            "SELECT lesson_id, drill_id FROM drill_progress WHERE user_id = ? AND solved_at IS NOT NULL", (user_id,)
        )
        solved: dict[str, set[str]] = {}
        for row in rows:
            solved.setdefault(row["lesson_id"], set()).add(row["drill_id"])
        return solved
