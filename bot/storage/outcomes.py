"""One update's changes and events, written in one transaction keyed by the update (bot.changes says what each is).

An update replayed after a crash writes again what it wrote before: every statement here leaves the tables as one
write would. Places are set, not added to; an event or a graded attempt carries its update's id under a unique key
(migration 9), so the second insert is ignored; a drill attempt is saved by compare-and-set, so a replayed tap
finds its turn passed and changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.changes import (
    ActivityNoted,
    AnswerRecorded,
    AttemptGraded,
    CardMet,
    CardReviewed,
    Change,
    CompletionCardClaimed,
    DrillSaved,
    Event,
    HintsShown,
    LanguageChosen,
    LessonCompleted,
    PracticeLeft,
    PracticeStarted,
    QuizStarted,
    ReaderAt,
    RemindersOffered,
    SlideShown,
    StreakDay,
)
from bot.learner import EventKind
from bot.storage.backend import SyncConnection
from bot.storage.drills import SAVE_DRILL, drill_params
from bot.storage.engine import Engine
from bot.storage.events import RECORD_EVENT
from bot.storage.outbox import Reply, write_replies
from bot.storage.retention import LOG_REVIEW, MEET_CARD, REVIEW_CARD, STREAK_DAY, card_params, log_params


class Precondition(Exception):
    """What the outcome was decided over changed (a drill attempt) or was stored before (an answer): nothing of it is
    stored (internal to ``store``)."""


# Activity noted unless a row lies within the step before it, or this update noted it before (activity_once).
NOTE_ACTIVITY = (
    "INSERT INTO activity (user_id, at, update_id) SELECT :user, :at, CAST(:update AS BIGINT) WHERE NOT EXISTS"
    " (SELECT 1 FROM activity WHERE user_id = :user AND at > :since) ON CONFLICT DO NOTHING"
)


@dataclass(frozen=True)
class Stored:
    """What writing an outcome did."""

    stored: bool  # False: a drill attempt it saves changed meanwhile, or an answer was recorded before; nothing written
    activity_added: bool = False  # its ActivityNoted added a row: the learner's habit changed


class OutcomeQueries(Engine):
    """The one write of an update."""

    async def store(
        self,
        user_id: int,
        changes: Sequence[Change],
        events: Sequence[Event] = (),
        *,
        language: str,
        update_id: int | None,
        replies: Sequence[Reply] = (),
        first_reply: int = 0,
    ) -> bool:
        """Write ``changes`` and ``events`` of one update in one transaction; False (nothing written) if a drill
        attempt it saves changed meanwhile, or an answer it records was recorded before (see ``write_outcome``)."""
        written = await self.write_outcome(
            user_id, changes, events, language=language, update_id=update_id, replies=replies, first_reply=first_reply
        )
        return written.stored

    async def write_outcome(
        self,
        user_id: int,
        changes: Sequence[Change],
        events: Sequence[Event] = (),
        *,
        language: str,
        update_id: int | None,
        replies: Sequence[Reply] = (),
        first_reply: int = 0,
    ) -> Stored:
        """Write ``changes`` and ``events`` of one update in one transaction; see Stored.

        ``update_id`` keys the events and attempts, so a replay of the update records none of them again (None: an
        update that did not come through the inbox, never replayed). ``language`` is the course language shown.
        ``replies``, the update's replies from position ``first_reply`` on, go to the outbox in the same transaction
        (bot.storage.outbox; not without an ``update_id`` to key them).
        """
        if update_id is None:
            replies = ()
        if not changes and not replies and not (events and self.events_days != 0):
            return Stored(True)
        now = self._now()
        record_events = self.events_days != 0
        added: list[bool] = []

        def write(conn: SyncConnection) -> None:
            added.clear()  # a transaction run again (a busy database) starts afresh
            completed: list[str] = []
            for change in changes:
                if isinstance(change, LessonCompleted):
                    completed.append(change.lesson_id)  # after the events: DONE comes after what finished it
                elif isinstance(change, ActivityNoted):
                    added.append(_note_activity(conn, user_id, change, update_id))
                else:
                    _change(conn, user_id, change, now, update_id)
            done = []
            for lesson_id in completed:
                cursor = conn.execute(
                    "UPDATE lesson_progress SET completed_at = ? WHERE user_id = ? AND lesson_id = ?"
                    " AND completed_at IS NULL AND slides_read_at IS NOT NULL",
                    (now, user_id, lesson_id),
                )
                if cursor.rowcount == 1:  # done just now: its DONE event is recorded once, here
                    done.append(Event(EventKind.DONE, lesson_id))
            if record_events:
                for event in (*events, *done):
                    conn.execute(RECORD_EVENT, _event_params(user_id, event, now, language, update_id))
            if replies and update_id is not None:
                write_replies(conn, update_id, user_id, first_reply, replies, now)

        try:
            await self._transaction(write)
        except Precondition:
            return Stored(False)
        return Stored(True, activity_added=any(added))


def _note_activity(conn: SyncConnection, user_id: int, change: ActivityNoted, update_id: int | None) -> bool:
    """Note the learner's activity; True if a row was added (see ActivityNoted)."""
    params = {"user": user_id, "at": change.at, "update": update_id, "since": change.at - change.step}
    if conn.execute(NOTE_ACTIVITY, params).rowcount != 1:
        return False
    # Any activity answers the reminders sent before it: they no longer count as ignored.
    conn.execute("UPDATE learners SET reminders_ignored = 0 WHERE user_id = ? AND reminders_ignored != 0", (user_id,))
    if change.utc_offset is not None:
        conn.execute(
            "UPDATE learners SET utc_offset = ? WHERE user_id = ? AND utc_offset IS NULL", (change.utc_offset, user_id)
        )
    return True


def _change(conn: SyncConnection, user_id: int, change: Change, now: str, update_id: int | None) -> None:
    match change:
        case SlideShown():
            conn.execute(
                "INSERT INTO lesson_progress (user_id, lesson_id, slide_id, furthest_slide_id, slides_read_at)"
                " VALUES (:user, :lesson, :slide, :furthest, CASE WHEN :last = 1 THEN :now END)"
                " ON CONFLICT (user_id, lesson_id) DO UPDATE SET slide_id = :slide, furthest_slide_id = :furthest,"
                " slides_read_at = coalesce(lesson_progress.slides_read_at, CASE WHEN :last = 1 THEN :now END)",
                {
                    "user": user_id,
                    "lesson": change.lesson_id,
                    "slide": change.slide_id,
                    "furthest": change.furthest_slide_id,
                    "last": int(change.last),
                    "now": now,
                },
            )
            conn.execute(
                "UPDATE learners SET lesson_id = ?, updated_at = ? WHERE user_id = ?",
                (change.lesson_id, now, user_id),
            )
        case ReaderAt():
            conn.execute(
                "UPDATE learners SET reader_message_id = ?, reader_view = ?, updated_at = ? WHERE user_id = ?",
                (change.message_id, change.view.value, now, user_id),
            )
        case DrillSaved():
            cursor = conn.execute(
                SAVE_DRILL,
                drill_params(user_id, change.lesson_id, change.drill_id, change.before, change.after, now),
            )
            if cursor.rowcount != 1:
                raise Precondition(change.drill_id)
        case AnswerRecorded():
            poll = change.poll
            cursor = conn.execute(
                "INSERT INTO quiz_answers"
                " (poll_id, user_id, lesson_id, question_id, option_index, option_id, correct, answered_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (poll_id) DO NOTHING",
                (
                    poll.poll_id,
                    user_id,
                    poll.lesson_id,
                    poll.question_id,
                    change.option_index,
                    change.option_id,
                    int(change.correct),
                    now,
                ),
            )
            if cursor.rowcount != 1:
                raise Precondition(poll.poll_id)
            if change.remaining is not None:
                remaining = " ".join(change.remaining)
                conn.execute(
                    "UPDATE learners SET quiz_queue = ?, quiz_poll_id = NULL,"
                    " quiz_lesson_id = CASE WHEN ? = '' THEN NULL ELSE quiz_lesson_id END,"
                    " updated_at = ? WHERE user_id = ? AND quiz_poll_id = ?",
                    (remaining, remaining, now, user_id, poll.poll_id),
                )
        case QuizStarted():
            conn.execute(
                "UPDATE learners SET quiz_lesson_id = ?, quiz_queue = ?, quiz_poll_id = NULL, quiz_seed = ?,"
                " updated_at = ? WHERE user_id = ?",
                (change.lesson_id, " ".join(change.question_ids), change.seed, now, user_id),
            )
        case PracticeStarted():
            conn.execute(
                "UPDATE learners SET practice_lesson_id = ?, hints_shown = 0, updated_at = ? WHERE user_id = ?",
                (change.lesson_id, now, user_id),
            )
        case PracticeLeft():
            conn.execute(
                "UPDATE learners SET practice_lesson_id = NULL, hints_shown = 0, updated_at = ? WHERE user_id = ?",
                (now, user_id),
            )
        case HintsShown():
            conn.execute(
                "UPDATE learners SET hints_shown = ?, updated_at = ? WHERE user_id = ?",
                (change.count, now, user_id),
            )
        case AttemptGraded():
            conn.execute(
                "INSERT INTO exercise_attempts (user_id, lesson_id, passed, attempted_at, update_id)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (user_id, change.lesson_id, int(change.passed), now, update_id),
            )
        case LanguageChosen():
            conn.execute(
                "UPDATE learners SET language = ?, updated_at = ? WHERE user_id = ?",
                (change.language, now, user_id),
            )
        case CardMet():
            # A card met before keeps its first review: only a card written now logs its answer.
            if conn.execute(MEET_CARD, card_params(change.card)).rowcount == 1:
                conn.execute(LOG_REVIEW, log_params(change.entry, update_id))
        case CardReviewed():
            cursor = conn.execute(REVIEW_CARD, {**card_params(change.card), "before": change.before})
            if cursor.rowcount != 1 and change.required:
                raise Precondition(f"card {change.card['card_id']} changed meanwhile")
            if cursor.rowcount == 1:
                conn.execute(LOG_REVIEW, log_params(change.entry, update_id))
        case StreakDay():
            conn.execute(STREAK_DAY, {"user": user_id, "day": change.day})
        case RemindersOffered():
            conn.execute(
                "UPDATE learners SET reminders = 'offered', remind_at = NULL, remind_snoozed = 0"
                " WHERE user_id = ? AND reminders = 'unasked'",
                (user_id,),
            )
        case CompletionCardClaimed():
            conn.execute(
                "UPDATE learners SET completion_card_at = ? WHERE user_id = ? AND completion_card_at IS NULL",
                (change.at, user_id),
            )
        case LessonCompleted() | ActivityNoted():
            raise ValueError(f"{change!r} is written by store itself")


def _event_params(user_id: int, event: Event, now: str, language: str, update_id: int | None) -> dict[str, object]:
    return {
        "user": user_id,
        "at": now,
        "language": language,
        "lesson": event.lesson_id,
        "kind": str(event.kind),
        "item": event.item_id,
        "option": event.option_id,
        "verdict": event.verdict,
        "check": event.failed_check,
        "seconds": None,
        "update": update_id,
    }
