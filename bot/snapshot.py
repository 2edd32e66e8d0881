"""The learner of one update, read once: their row with their current place, and what else a flow needs, loaded
when first asked for and kept for the rest of the update.

A flow decides over what this holds; storage writes the outcome in one transaction. A background task of the update
(a run, a Parsons check) outlives what it read: it takes a ``fresh`` snapshot when its result comes in.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from bot.learner import Answer, Learner, LessonProgress, LessonState, Rhythm
from bot.retention.reminders import HISTORY
from bot.storage.db import Database


def activity_since(now: dt.datetime) -> int:
    """Return from when (epoch seconds) a learner's activity is read with their row: what their habit reads."""
    return int((now - HISTORY).timestamp())


class Snapshot:
    """One learner's state for one update; each part read at most once."""

    def __init__(
        self, db: Database, learner: Learner, place: LessonProgress | None = None, rhythm: Rhythm | None = None
    ):
        self._db = db
        self.learner = learner
        # The learner's place in the lesson they are in, read with their row (None: in no lesson yet).
        self._place = place
        # Their reminders, time zone and recent activity, read with their row (a new learner has none).
        self.rhythm = rhythm if rhythm is not None else Rhythm()
        self._lessons: dict[str, LessonState] = {}
        self._progress: dict[str, LessonProgress] | None = None
        self._answers: dict[tuple[str, str], Answer] | None = None
        self._solved: dict[str, set[str]] | None = None

    @classmethod
    async def read(cls, db: Database, learner: Learner) -> Snapshot:
        """Read a fresh snapshot of ``learner`` (a background task's, when its result comes in)."""
        found = await db.learner_at(learner.user_id, activity_since(db.clock()))
        return cls(db, *found) if found is not None else cls(db, learner)

    def noted_activity(self, at: int, utc_offset_minutes: int | None) -> None:
        """Note activity this update stored at ``at`` (and the UTC offset it set, if none was stored): what the
        update decides after that sees it, as the database now holds it."""
        offset = self.rhythm.utc_offset_minutes
        self.rhythm = dataclasses.replace(
            self.rhythm,
            activity=(*self.rhythm.activity, at),
            utc_offset_minutes=offset if offset is not None else utc_offset_minutes,
        )

    async def progress(self, lesson_id: str) -> LessonProgress:
        """Return the learner's place in one lesson: no read for the lesson they are in."""
        if lesson_id in self._lessons:
            return self._lessons[lesson_id].progress
        if self._place is not None and self._place.lesson_id == lesson_id:
            return self._place
        if self._progress is not None:
            return self._progress.get(lesson_id, LessonProgress(lesson_id=lesson_id))
        return (await self.lesson(lesson_id)).progress

    async def lesson(self, lesson_id: str) -> LessonState:
        """Return the learner's place, latest answers and drill attempts in one lesson (one read)."""
        state = self._lessons.get(lesson_id)
        if state is None:
            state = self._lessons[lesson_id] = await self._db.lesson_state(self.learner.user_id, lesson_id)
        return state

    async def drill_card(self, lesson_id: str, card_id: int) -> dict[str, Any] | None:
        """Return the learner's review card ``card_id`` of a drill in ``lesson_id``, as a stored row, or None: read
        with the lesson (no read when the flow read the lesson already)."""
        card = (await self.lesson(lesson_id)).drill_cards.get(card_id)
        return dict(card) if card is not None else None

    async def all_progress(self) -> dict[str, LessonProgress]:
        """Return the learner's place in every lesson they started."""
        if self._progress is None:
            self._progress = await self._db.progress(self.learner.user_id)
        return self._progress

    async def all_answers(self) -> dict[tuple[str, str], Answer]:
        """Return the learner's latest answer to every question, by (lesson id, question id)."""
        if self._answers is None:
            self._answers = await self._db.latest_answers(self.learner.user_id)
        return self._answers

    async def all_solved(self) -> dict[str, set[str]]:
        """Return the drills the learner solved, as drill ids by lesson id."""
        if self._solved is None:
            self._solved = await self._db.drills_solved(self.learner.user_id)
        return self._solved
