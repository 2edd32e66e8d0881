"""The reads of an update's learner snapshot (bot.snapshot): each one statement, one round trip.

A tap reads the learner with their current lesson's place and their rhythm (reminders, time zone, recent activity:
``learner_at``) and, when it needs more of one lesson, that lesson's place, latest answers, drill attempts and the
drills' review cards together (``lesson_state``), as JSON columns of one row.
"""

from __future__ import annotations

import json

from bot.learner import NOT_STARTED, Learner, LessonProgress, LessonState, Rhythm
from bot.storage.drills import drill_progress_from_row
from bot.storage.engine import Engine
from bot.storage.learners import LEARNER_COLUMNS, learner_from_row
from bot.storage.lessons import lesson_progress_from_row
from bot.storage.quiz import LATEST_ANSWER, answer_from_row
from bot.storage.retention import CARD_COLUMNS

PROGRESS_JSON = (
    "json_object('lesson_id', p.lesson_id, 'slide_id', p.slide_id, 'furthest_slide_id', p.furthest_slide_id,"
    " 'slides_read_at', p.slides_read_at, 'completed_at', p.completed_at)"
)

# A review card's columns (CARD_COLUMNS' names) as json_object's arguments.
CARD_JSON = (
    "'card_id', card_id, 'learner', learner, 'lesson', lesson, 'kind', kind, 'item', item, 'state', state,"
    " 'step', step, 'stability', stability, 'difficulty', difficulty, 'due', due, 'last_review', last_review"
)


class SnapshotQueries(Engine):
    """A learner's state for one update, in as few reads as it takes."""

    async def learner_at(
        self, user_id: int, activity_since: int
    ) -> tuple[Learner, LessonProgress | None, Rhythm] | None:
        """Return the learner, their place in the lesson they are in (None: in none yet) and their rhythm with the
        activity from ``activity_since`` on (epoch seconds), or None if new."""
        row = await self._one(
            f"SELECT {LEARNER_COLUMNS}, reminders, utc_offset, completion_card_at,"
            f" (SELECT {PROGRESS_JSON} FROM lesson_progress AS p"
            " WHERE p.user_id = learners.user_id AND p.lesson_id = learners.lesson_id) AS place,"
            " (SELECT json_group_array(json_object('at', a.at)) FROM activity AS a"
            " WHERE a.user_id = learners.user_id AND a.at >= :since) AS activity"
            " FROM learners WHERE user_id = :user",
            {"user": user_id, "since": activity_since},
        )
        if row is None:
            return None
        learner = learner_from_row(row)
        rhythm = Rhythm(
            reminders=str(row["reminders"]),
            utc_offset_minutes=row["utc_offset"],
            completion_card_sent=row["completion_card_at"] is not None,
            activity=tuple(sorted(int(item["at"]) for item in json.loads(row["activity"]))),
        )
        if learner.lesson_id is None:
            return learner, None, rhythm
        place = row["place"]
        if place is None:
            return learner, LessonProgress(lesson_id=learner.lesson_id), rhythm
        return learner, lesson_progress_from_row(json.loads(place)), rhythm

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
            " FROM drill_progress WHERE user_id = :user AND lesson_id = :lesson) AS drills,"
            f" (SELECT json_group_array(json_object({CARD_JSON})) FROM (SELECT {CARD_COLUMNS} FROM review_cards"
            " WHERE user_id = :user AND lesson_id = :lesson AND kind = 'drill') AS c) AS cards",
            {"user": user_id, "lesson": lesson_id},
        )
        if row is None:  # an aggregate always returns its row
            raise RuntimeError("the lesson state query returned no row")
        place = row["place"]
        progress = lesson_progress_from_row(json.loads(place)) if place is not None else NOT_STARTED
        answers = [answer_from_row(answer) for answer in json.loads(row["answers"])]
        drills = {drill["drill_id"]: drill_progress_from_row(drill) for drill in json.loads(row["drills"])}
        cards = {int(card["card_id"]): card for card in json.loads(row["cards"])}
        return LessonState(
            progress=progress if progress.started else LessonProgress(lesson_id=lesson_id),
            answers={(answer.lesson_id, answer.question_id): answer for answer in answers},
            drills=drills,
            drill_cards=cards,
        )
