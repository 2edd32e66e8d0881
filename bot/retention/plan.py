"""A learner's reminder schedule as data: when the next one is due, and what the sweep does when it comes.

``next_at`` plans the next reminder from what the store knows of the learner (``ReminderState``), through the
pure rules of ``reminders``; the learner's own move (``shift``, from /settings) is added last. ``decide`` is
what the sweep does with a learner whose reminder time has come: send one, pause after too many ignored, or
send nothing because nothing waits (and plan again). Pure: the time and the learner's record are passed in.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum

from bot.retention import reminders
from bot.retention.reminders import ReminderKey
from bot.storage.retention import ReminderRow

# Activity closer than this to the last noted is not noted again: a session leaves a few rows, not one per tap.
ACTIVITY_STEP = dt.timedelta(minutes=5)
# How far /settings moves the reminder, each tap, and at most.
SHIFT_STEP = dt.timedelta(hours=1)
SHIFT_MAX = dt.timedelta(hours=12)


class Status(StrEnum):
    """Whether a learner gets reminders; only the learner turns them on, and only ``ON`` gets any."""

    UNASKED = "unasked"  # no lesson finished yet: not offered
    OFFERED = "offered"  # offered once, not answered (or declined): never offered again
    ON = "on"
    OFF = "off"  # the learner stopped them
    PAUSED = "paused"  # IGNORED_LIMIT in a row went unanswered; /settings turns them back on
    BLOCKED = "blocked"  # the learner blocked the bot: for good, until they turn them on again


@dataclass(frozen=True)
class ReminderState:
    """What the store knows of a learner when planning their reminder."""

    user_id: int
    status: Status
    activity: tuple[dt.datetime, ...]  # the last reminders.HISTORY of it
    utc_offset: dt.timedelta | None
    shift: dt.timedelta
    last_reminder: dt.datetime | None
    ignored: int  # reminders in a row with no activity after them
    snoozed: bool  # the reminder due is a snoozed one
    cards_due: int  # cards due now
    next_card_due: dt.datetime | None
    unfinished_lesson: str | None  # a lesson started and not finished, if any

    def habit(self, now: dt.datetime) -> reminders.Habit:
        """Return what the learner's activity says about their day."""
        return reminders.habit(self.activity, now, self.utc_offset)

    def waits_from(self, now: dt.datetime) -> dt.datetime | None:
        """Return from when something waits for the learner, or None."""
        return reminders.waiting_from(
            now,
            unfinished_lesson=self.unfinished_lesson is not None,
            cards_due_now=self.cards_due,
            next_card_due=self.next_card_due,
        )


def next_at(
    state: ReminderState,
    now: dt.datetime,
    *,
    last_reminder: dt.datetime | None = None,
    habit: reminders.Habit | None = None,
) -> dt.datetime | None:
    """Return when the learner's next reminder is due (UTC), or None: reminders off, or nothing will wait."""
    if state.status is not Status.ON:
        return None
    last = last_reminder or state.last_reminder
    planned = reminders.next_reminder(
        state.user_id, habit or state.habit(now), waits_from=state.waits_from(now), last_reminder=last, now=now
    )
    if planned is None:
        return None
    moved = planned + state.shift
    # A move back may land before now (or before the day's gap is over): then it is now, or that day's end.
    floor = now if last is None else max(now, last + reminders.MIN_GAP)
    return max(moved, floor)


def _moment(seconds: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


def reminder_state(row: ReminderRow) -> ReminderState:
    """Return what the plan needs of a stored row."""
    try:
        status = Status(row.status)
    except ValueError:
        status = Status.OFF
    return ReminderState(
        user_id=row.user_id,
        status=status,
        activity=tuple(_moment(at) for at in row.activity),
        utc_offset=None if row.utc_offset_minutes is None else dt.timedelta(minutes=row.utc_offset_minutes),
        shift=dt.timedelta(minutes=row.shift_minutes),
        last_reminder=None if row.last_reminder is None else _moment(row.last_reminder),
        ignored=row.ignored,
        snoozed=row.snoozed,
        cards_due=row.cards_due,
        next_card_due=None if row.next_card_due is None else _moment(row.next_card_due),
        unfinished_lesson=row.unfinished_lesson,
    )


class Action(StrEnum):
    """What the sweep does for a learner whose reminder time came."""

    SEND = "send"  # a reminder saying what waits
    PAUSE = "pause"  # the note that reminders pause, instead of another reminder
    NOTHING = "nothing"  # nothing waits (or reminders are off): plan again, send nothing


@dataclass(frozen=True)
class Decision:
    """The sweep's decision for one learner: what to send under which key, and the reminder after it."""

    action: Action
    key: ReminderKey | None  # unique per learner and local day: claimed before sending
    next_at: dt.datetime | None
    status: Status


def decide(state: ReminderState, now: dt.datetime) -> Decision:
    """Decide what the sweep does for a learner whose reminder is due at ``now``."""
    if state.status is not Status.ON:
        return Decision(Action.NOTHING, None, None, state.status)
    waits = state.waits_from(now)
    if waits is None or waits > now:
        return Decision(Action.NOTHING, None, next_at(state, now), state.status)
    habit = state.habit(now)
    key = reminders.reminder_key(state.user_id, now, habit, state.snoozed)
    if state.ignored >= reminders.IGNORED_LIMIT:
        return Decision(Action.PAUSE, key, None, Status.PAUSED)
    return Decision(Action.SEND, key, next_at(state, now, last_reminder=now, habit=habit), state.status)


def shifted(shift: dt.timedelta, step: int) -> dt.timedelta:
    """Return the learner's move of their reminder after ``step`` taps earlier (-1) or later (+1), bounded."""
    moved = shift + step * SHIFT_STEP
    return max(-SHIFT_MAX, min(SHIFT_MAX, moved))
