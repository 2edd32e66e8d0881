"""The reads of an update's learner snapshot (bot.snapshot): each one statement, one round trip.

A tap reads the learner with their current lesson's place (``learner_at``) and, when it needs more of one lesson,
that lesson's place, latest answers and drill attempts together (``lesson_state``), as JSON columns of one row.
"""

from __future__ import annotations

import json

from bot.learner import NOT_STARTED, Learner, LessonProgress, LessonState
from bot.storage.drills import drill_progress_from_row
from bot.storage.engine import Engine
from bot.storage.learners import LEARNER_COLUMNS, learner_from_row
from bot.storage.lessons import lesson_progress_from_row
from bot.storage.quiz import LATEST_ANSWER, answer_from_row

PROGRESS_JSON = (
    "json_object('lesson_id', p.lesson_id, 'slide_id', p.slide_id, 'furthest_slide_id', p.furthest_slide_id,"
    " 'slides_read_at', p.slides_read_at, 'completed_at', p.completed_at)"
)


class SnapshotQueries(Engine):
    """A learner's state for one update, in as few reads as it takes."""

    async def learner_at(self, user_id: int) -> tuple[Learner, LessonProgress | None] | None:
        """Return the learner and their place in the lesson they are in (None: in none yet), or None if new."""
        row = await self._one(
            f"SELECT {LEARNER_COLUMNS}, (SELECT {PROGRESS_JSON} FROM lesson_progress AS p"
            " WHERE p.user_id = learners.user_id AND p.lesson_id = learners.lesson_id) AS place"
            " FROM learners WHERE user_id = ?",
            (user_id,),
        )
        if row is None:
            return None
        learner = learner_from_row(row)
        if learner.lesson_id is None:
            return learner, None
        place = row["place"]
        if place is None:
            return learner, LessonProgress(lesson_id=learner.lesson_id)
        return learner, lesson_progress_from_row(json.loads(place))

    async def lesson_state(self, user_id: int, lesson_id: str) -> LessonState:
        """Return the learner's place, latest answers and drill attempts in one lesson, in one statement."""
        row = await self._one(
            f"SELECT (SELECT {PROGRESS_JSON} FROM lesson_progress AS p WHERE p.user_id = :user"
            " AND p.lesson_id = :lesson) AS place,"
            " (SELECT json_group_array(json_object('lesson_id', lesson_id, 'question_id', question_id,"
            f" 'option_id', option_id, 'correct', correct)) FROM ({LATEST_ANSWER} AND lesson_id = :lesson"
            " ORDER BY answered_at, poll_id) AS latest) AS answers,"
            " (SELECT json_group_array(json_object('drill_id', drill_id, 'placed', placed, 'ruled_out', ruled_out,"
            " 'turn', turn, 'tries', tries, 'done', done, 'checked', checked, 'solved_at', solved_at))"
            " FROM drill_progress WHERE user_id = :user AND lesson_id = :lesson) AS drills",
            {"user": user_id, "lesson": lesson_id},
        )
        if row is None:  # an aggregate always returns its row
            raise RuntimeError("the lesson state query returned no row")
        place = row["place"]
        progress = lesson_progress_from_row(json.loads(place)) if place is not None else NOT_STARTED
        answers = [answer_from_row(answer) for answer in json.loads(row["answers"])]
        drills = {drill["drill_id"]: drill_progress_from_row(drill) for drill in json.loads(row["drills"])}
        return LessonState(
            progress=progress if progress.started else LessonProgress(lesson_id=lesson_id),
            answers={(answer.lesson_id, answer.question_id): answer for answer in answers},
            drills=drills,
        )
