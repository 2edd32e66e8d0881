"""The lessons' tables: each learner's place in each lesson, and the slide order the lessons were served in."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from bot.course.model import Course
from bot.learner import Learner, LessonProgress
from bot.storage.backend import ADOPT_LOCK
from bot.storage.engine import Engine, Row, Transaction, timestamp
from bot.storage.learners import learner_from_row

log = logging.getLogger(__name__)


def lesson_progress_from_row(row: Row) -> LessonProgress:
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


@dataclass(frozen=True)
class Adopted:
    """What adopting the lessons being served changed in stored places (Database.adopt_course)."""

    slides_removed: int = 0  # slides gone from a lesson since it was last served
    learners_moved: int = 0  # places on a removed slide, moved to the next slide that remains
    rows_converted: int = 0  # positions left by schema 2 turned into ids


class LessonQueries(Engine):
    """Places in lessons, and the lessons as served."""

    async def progress(self, user_id: int) -> dict[str, LessonProgress]:
        """Return the learner's progress in every lesson they started."""
        rows = await self._all(
            "SELECT lesson_id, slide_id, furthest_slide_id, slides_read_at, completed_at"
            " FROM lesson_progress WHERE user_id = ?",
            (user_id,),
        )
        return {row["lesson_id"]: lesson_progress_from_row(row) for row in rows}

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
        return [(learner_from_row(row), lesson_progress_from_row(row)) for row in rows]

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
            # Replicas starting together would each rewrite slide_order at once: one after the other instead.
            await conn.lock(ADOPT_LOCK)
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
