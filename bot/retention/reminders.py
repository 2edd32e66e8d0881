"""When to remind a learner: at their own hour, never at night, once a day at most, and only with something waiting.

The bot never asks for a time zone. It learns from when the learner is active:

- **Their hour.** Activity less than ``SESSION_GAP`` apart is one session. The densest hour of the day (UTC) in
  which their sessions start, over the last ``HISTORY``, is their habit once sessions on ``HABIT_DAYS``
  different days started in it; the reminder comes ``LEAD`` before it. Until then it comes ``FIRST_DELAY``
  (about 23.5 hours) after their last session started: a little before the same time the next day.
- **Quiet hours.** The longest stretch of the day in which they were never active, trimmed by
  ``QUIET_MARGIN`` at each end and at most ``QUIET_MAX`` long (kept around its middle), is their night. A
  reminder that would fall in it waits until it ends. With a time zone from the web chat and no history yet,
  the night is ``DEFAULT_QUIET`` local time.
- **Their day.** A learner's local day runs from the middle of their night (or from local midnight when the
  time zone is known, else from UTC midnight). At most one reminder per local day: ``ReminderKey`` is the
  key a store makes unique, so no restart or second process can send a second one. Reminders are also at
  least ``MIN_GAP`` apart, in case the learned night moves.
- **Only when something waits** (cards due, or a lesson not finished): ``waiting_from`` says from when.
- **Spread.** Thousands of learners with the same habit would be due in the same minute; each reminder is
  moved by a fixed amount within ``SPREAD`` (drawn from the learner and the day, so a replay plans the same
  moment).
- **Pause.** After ``IGNORED_LIMIT`` reminders in a row with no activity after them, reminders pause.

Every function is pure: activity, the time now and the learner's record are passed in.
"""

from __future__ import annotations

import bisect
import datetime as dt
import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MINUTES_PER_DAY = 24 * 60
DAY = dt.timedelta(days=1)

SESSION_GAP = dt.timedelta(minutes=30)  # activity closer than this is one session
HISTORY = dt.timedelta(days=28)  # only the last four weeks shape the habit and the night
HABIT_WINDOW = 60  # minutes: sessions starting within an hour of each other are the same habit
HABIT_DAYS = 3  # sessions on this many different days make a habit
LEAD = dt.timedelta(minutes=15)  # remind this much before the usual start
FIRST_DELAY = dt.timedelta(hours=23, minutes=30)  # with no habit yet: after the last session started
QUIET_MARGIN = 60  # minutes of the longest inactive stretch left awake at each end
QUIET_MIN = 4 * 60  # minutes: a shorter inactive stretch is not a night
QUIET_MAX = 10 * 60  # minutes: a longer one keeps its middle ten hours
DEFAULT_QUIET = (22 * 60, 10 * 60)  # local start minute and length: 22:00-08:00 when only the time zone is known
MIN_GAP = dt.timedelta(hours=16)  # between two daily reminders, whatever the days say
SPREAD = dt.timedelta(minutes=10)  # a reminder moves by up to this much either way
SNOOZE = dt.timedelta(hours=2)
IGNORED_LIMIT = 5  # reminders in a row with no activity after them, then a pause


def _minute(moment: dt.datetime) -> int:
    """Return the minute of the UTC day of ``moment``."""
    utc = moment.astimezone(dt.UTC)
    return utc.hour * 60 + utc.minute


def _aware(moment: dt.datetime) -> dt.datetime:
    if moment.tzinfo is None:
        raise ValueError(f"{moment!r} has no time zone: pass an aware datetime (the clock's, in UTC)")
    return moment.astimezone(dt.UTC)


@dataclass(frozen=True)
class QuietHours:
    """A stretch of every day, in UTC minutes, in which the learner is asleep or busy: no reminder then."""

    start: int  # minute of the UTC day it begins
    minutes: int  # how long it lasts, less than a day

    def covers(self, moment: dt.datetime) -> bool:
        """Whether ``moment`` falls inside the quiet hours."""
        return (_minute(moment) - self.start) % MINUTES_PER_DAY < self.minutes

    def after(self, moment: dt.datetime) -> dt.datetime:
        """Return ``moment``, or the end of the quiet hours it falls in."""
        if not self.covers(moment):
            return moment
        moment = _aware(moment)
        into = (_minute(moment) - self.start) % MINUTES_PER_DAY
        return moment.replace(second=0, microsecond=0) + dt.timedelta(minutes=self.minutes - into)

    @property
    def middle(self) -> int:
        """Return the minute of the UTC day in the middle of the quiet hours."""
        return (self.start + self.minutes // 2) % MINUTES_PER_DAY


@dataclass(frozen=True)
class Habit:
    """What the bot knows of a learner's day: their usual start, their night, their last session, their zone."""

    usual_start: int | None  # minute of the UTC day their sessions usually start; None until there is a habit
    quiet: QuietHours | None  # None until there is enough history (and no time zone is known)
    last_session: dt.datetime | None  # when their last session started
    utc_offset: dt.timedelta | None = None  # from the web chat's browser, when it sent one


def sessions(activity: Iterable[dt.datetime]) -> list[dt.datetime]:
    """Return when each session started: activity less than SESSION_GAP after the previous is the same session."""
    starts: list[dt.datetime] = []
    previous: dt.datetime | None = None
    for moment in sorted(_aware(m) for m in activity):
        if previous is None or moment - previous >= SESSION_GAP:
            starts.append(moment)
        previous = moment
    return starts


def _usual_start(starts: Sequence[dt.datetime]) -> int | None:
    """Return the circular mean start minute of the densest HABIT_WINDOW, if it holds HABIT_DAYS days."""
    by_minute = sorted(starts, key=_minute)
    minutes = [_minute(s) for s in by_minute]
    best: tuple[int, dt.datetime, list[dt.datetime]] | None = None
    for i, first in enumerate(minutes):
        # Sessions starting within the hour from this one, wrapping past midnight.
        window = [
            by_minute[j % len(minutes)]
            for j in range(i, i + len(minutes))
            if (minutes[j % len(minutes)] - first) % MINUTES_PER_DAY < HABIT_WINDOW
        ]
        days = len({s.date() for s in window})
        if days < HABIT_DAYS:
            continue
        rank = (days, max(window), window)  # more days first; on a tie, the habit seen most recently
        if best is None or rank[:2] > best[:2]:
            best = rank
    if best is None:
        return None
    angles = [2 * math.pi * _minute(s) / MINUTES_PER_DAY for s in best[2]]
    mean = math.atan2(sum(map(math.sin, angles)), sum(map(math.cos, angles)))
    return round(mean / (2 * math.pi) * MINUTES_PER_DAY) % MINUTES_PER_DAY


def _quiet(activity: Sequence[dt.datetime]) -> QuietHours | None:
    """Return the longest stretch of the day with no activity, trimmed and bounded, if there is enough history."""
    if len({m.date() for m in activity}) < HABIT_DAYS:
        return None
    minutes = sorted({_minute(m) for m in activity})
    following = [*minutes[1:], minutes[0]]
    gaps = [((b - a) % MINUTES_PER_DAY or MINUTES_PER_DAY, a) for a, b in zip(minutes, following, strict=True)]
    gap, after = max(gaps)  # the longest gap; on a tie, the one starting latest in the day
    start, length = (after + 1 + QUIET_MARGIN) % MINUTES_PER_DAY, gap - 1 - 2 * QUIET_MARGIN
    if length < QUIET_MIN:
        return None
    if length > QUIET_MAX:
        start, length = (start + (length - QUIET_MAX) // 2) % MINUTES_PER_DAY, QUIET_MAX
    return QuietHours(start, length)


def _default_quiet(utc_offset: dt.timedelta) -> QuietHours:
    local_start, length = DEFAULT_QUIET
    offset = round(utc_offset.total_seconds() / 60)
    return QuietHours((local_start - offset) % MINUTES_PER_DAY, length)


def habit(activity: Iterable[dt.datetime], now: dt.datetime, utc_offset: dt.timedelta | None = None) -> Habit:
    """Return what the learner's activity over the last HISTORY says about their day."""
    now = _aware(now)
    recent = sorted(m for m in map(_aware, activity) if now - HISTORY <= m <= now)
    starts = sessions(recent)
    quiet = _quiet(recent)
    if quiet is None and utc_offset is not None:
        quiet = _default_quiet(utc_offset)
    return Habit(_usual_start(starts), quiet, starts[-1] if starts else None, utc_offset)


def local_day(moment: dt.datetime, habit: Habit) -> dt.date:
    """Return the learner's local day of ``moment``: from local midnight, else from the middle of their night."""
    moment = _aware(moment)
    if habit.utc_offset is not None:
        return (moment + habit.utc_offset).date()
    if habit.quiet is not None:
        return (moment - dt.timedelta(minutes=habit.quiet.middle)).date()
    return moment.date()


@dataclass(frozen=True, order=True)
class ReminderKey:
    """The unique key of a reminder: one per learner and local day (and one snoozed one)."""

    learner: int
    day: dt.date
    snoozed: bool = False


def reminder_key(learner: int, moment: dt.datetime, habit: Habit, snoozed: bool = False) -> ReminderKey:
    """Return the key of a reminder sent at ``moment``; a store that keeps keys unique sends it at most once."""
    return ReminderKey(learner, local_day(moment, habit), snoozed)


def waiting_from(
    now: dt.datetime, *, unfinished_lesson: bool, cards_due_now: int, next_card_due: dt.datetime | None
) -> dt.datetime | None:
    """Return from when something waits for the learner (a lesson to finish, cards due), or None if nothing will."""
    if unfinished_lesson or cards_due_now > 0:
        return _aware(now)
    return None if next_card_due is None else max(_aware(now), _aware(next_card_due))


def _spread(learner: int, day: dt.date) -> dt.timedelta:
    """Return the learner's fixed offset for ``day``, evenly drawn from -SPREAD to +SPREAD, to the second."""
    digest = hashlib.blake2b(f"{learner}:{day.isoformat()}".encode(), digest_size=8).digest()
    span = 2 * int(SPREAD.total_seconds())
    return dt.timedelta(seconds=int.from_bytes(digest, "big") % (span + 1) - span // 2)


def _anchors(habit: Habit, earliest: dt.datetime) -> Iterable[dt.datetime]:
    """Yield the moments a reminder is anchored to, one a day, from about ``earliest`` on."""
    if habit.usual_start is not None:
        minute = (habit.usual_start - int(LEAD.total_seconds()) // 60) % MINUTES_PER_DAY
        first = dt.datetime.combine(earliest.date() - DAY, dt.time(minute // 60, minute % 60), dt.UTC)
    elif habit.last_session is not None:
        first = _aware(habit.last_session) + FIRST_DELAY
        if first < earliest - DAY:
            first += (earliest - first) // DAY * DAY
    else:
        first = earliest
    for n in range(4):  # a day's anchor can be taken (the last reminder's day) or quiet-bound: a few suffice
        yield first + n * DAY


def next_reminder(
    learner: int,
    habit: Habit,
    *,
    waits_from: dt.datetime | None,
    last_reminder: dt.datetime | None,
    now: dt.datetime,
) -> dt.datetime | None:
    """Return when to send the learner's next daily reminder (UTC), or None when nothing waits for them."""
    if waits_from is None:
        return None
    earliest = max(_aware(now), _aware(waits_from))
    if last_reminder is not None:
        earliest = max(earliest, _aware(last_reminder) + MIN_GAP)
    taken = None if last_reminder is None else local_day(last_reminder, habit)
    for anchor in _anchors(habit, earliest):
        if anchor + SPREAD < earliest:
            continue
        moment = max(anchor + _spread(learner, local_day(anchor, habit)), earliest)
        if habit.quiet is not None:
            moment = habit.quiet.after(moment)
        if local_day(moment, habit) != taken:
            return moment
    raise AssertionError("unreachable: four daily anchors always leave one day free")


def snoozed_until(habit: Habit, now: dt.datetime) -> dt.datetime:
    """Return when a snoozed reminder comes back: SNOOZE later, or when the learner's quiet hours end."""
    moment = _aware(now) + SNOOZE
    return moment if habit.quiet is None else habit.quiet.after(moment)


def ignored_in_a_row(reminders_sent: Iterable[dt.datetime], activity: Iterable[dt.datetime], now: dt.datetime) -> int:
    """Return how many of the latest reminders, in a row, had no activity after them (before the next, or now)."""
    sent = sorted(map(_aware, reminders_sent))
    moments = sorted(map(_aware, activity))
    ignored = 0
    for start, end in reversed(list(zip(sent, [*sent[1:], _aware(now)], strict=True))):
        first_after = bisect.bisect_right(moments, start)
        if first_after < len(moments) and moments[first_after] < end:
            break
        ignored += 1
    return ignored


def should_pause(reminders_sent: Iterable[dt.datetime], activity: Iterable[dt.datetime], now: dt.datetime) -> bool:
    """Whether reminders pause instead of sending another: IGNORED_LIMIT in a row went unanswered."""
    return ignored_in_a_row(reminders_sent, activity, now) >= IGNORED_LIMIT
