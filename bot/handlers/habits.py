"""What every update tells about the learner's habit: activity (for the reminder's hour) and the streak's days.

Called from the shared handler wrappers (common.for_learner and common.record), so no feature handler
needs to remember it. Activity is noted at most once per ``plan.ACTIVITY_STEP``; when a new row is noted and
reminders are on, the next reminder is planned again from the habit as it now stands.
"""

from __future__ import annotations

import datetime as dt

from bot.context import CourseContext
from bot.learner import EventKind
from bot.retention import plan, reminders
from bot.retention.plan import reminder_state
from bot.retention.streak import Streak, streak
from bot.storage.retention import RetentionStore

# Learning events that finish something: they count the day in the streak (a review answer counts too).
FINISHING = frozenset({EventKind.DONE})
FINISHING_WHEN_RIGHT = frozenset({EventKind.DRILL, EventKind.RUN})
STREAK_LOOKBACK = dt.timedelta(days=400)


def _epoch(moment: dt.datetime) -> int:
    return int(moment.timestamp())


def _moment(seconds: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


async def note_activity(context: CourseContext) -> None:
    """Note that the learner did something now; plan their next reminder again when that changes their habit."""
    store = RetentionStore(context.services.db)
    now = context.services.db.clock()
    user_id = context.learner.user_id
    if not await store.note_activity(user_id, _epoch(now), int(plan.ACTIVITY_STEP.total_seconds())):
        return
    row = await store.reminder_row(user_id, _epoch(now))
    if row is None or row.status != plan.Status.ON:
        return
    next_at = plan.next_at(reminder_state(row), now)
    await store.plan(user_id, None if next_at is None else _epoch(next_at))


async def local_day(context: CourseContext, now: dt.datetime) -> dt.date:
    """Return the learner's local day at ``now`` (from their time zone, or from their night)."""
    store = RetentionStore(context.services.db)
    row = await store.reminder_row(context.learner.user_id, _epoch(now))
    if row is None:
        return now.date()
    return reminders.local_day(now, reminder_state(row).habit(now))


async def finished_something(context: CourseContext) -> None:
    """Count today in the learner's streak."""
    now = context.services.db.clock()
    day = await local_day(context, now)
    await RetentionStore(context.services.db).note_finished(context.learner.user_id, day.isoformat())


async def on_event(context: CourseContext, kind: EventKind, verdict: str | None) -> None:
    """Count the day in the streak when a learning event finishes something."""
    if kind in FINISHING or (kind in FINISHING_WHEN_RIGHT and verdict in ("right", "passed")):
        await finished_something(context)


async def current_streak(context: CourseContext) -> Streak:
    """Return the learner's streak as of today."""
    now = context.services.db.clock()
    today = await local_day(context, now)
    days = await RetentionStore(context.services.db).streak_days(
        context.learner.user_id, (today - STREAK_LOOKBACK).isoformat()
    )
    return streak((dt.date.fromisoformat(day) for day in days), today)
