"""Reminder timing: the learner's own hour, never in their night, once a local day, only when something waits."""

from __future__ import annotations

import collections
import datetime as dt
from datetime import timedelta

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from bot.retention import reminders
from bot.retention.reminders import Habit, QuietHours

NOW = dt.datetime(2026, 3, 10, 12, 0, tzinfo=dt.UTC)


def at(day: int, hour: int, minute: int = 0) -> dt.datetime:
    """A moment ``day`` days from NOW's date (negative: before), at hour:minute UTC."""
    return dt.datetime.combine(NOW.date() + timedelta(days=day), dt.time(hour, minute), dt.UTC)


def session(start: dt.datetime, minutes: int = 25) -> list[dt.datetime]:
    return [start + timedelta(minutes=m) for m in range(0, minutes, 5)]


def minute_of(moment: dt.datetime) -> int:
    return moment.hour * 60 + moment.minute


def evening_learner(days: int = 7) -> list[dt.datetime]:
    """Starts around 19:00 UTC every day, give or take a few minutes."""
    return [m for d in range(-days, 0) for m in session(at(d, 19, (d * 7) % 11))]


def test_activity_a_few_minutes_apart_is_one_session() -> None:
    activity = session(at(-1, 8)) + session(at(-1, 9)) + [at(-1, 9, 40)]
    assert reminders.sessions(activity) == [at(-1, 8), at(-1, 9)]


def test_a_daily_habit_sets_the_hour_shortly_before_it() -> None:
    habit = reminders.habit(evening_learner(), NOW)
    assert habit.usual_start is not None and abs(habit.usual_start - 19 * 60 - 5) <= 6
    planned = reminders.next_reminder(7, habit, waits_from=NOW, last_reminder=None, now=NOW)
    assert planned is not None and planned.date() == NOW.date()
    lead = habit.usual_start - minute_of(planned)
    assert 15 - 10 <= lead <= 15 + 10


def test_a_habit_needs_sessions_on_three_days() -> None:
    two_days = [m for d in (-2, -1) for m in session(at(d, 19))]
    assert reminders.habit(two_days, NOW).usual_start is None
    assert reminders.habit(two_days + session(at(-5, 19, 20)), NOW).usual_start is not None


def test_until_there_is_a_habit_the_reminder_comes_about_23_and_a_half_hours_after_the_last_session() -> None:
    habit = reminders.habit(session(at(0, 9)), NOW)
    assert habit.usual_start is None and habit.quiet is None and habit.last_session == at(0, 9)
    planned = reminders.next_reminder(7, habit, waits_from=NOW, last_reminder=None, now=NOW)
    assert planned is not None
    assert abs(planned - (at(0, 9) + timedelta(hours=23, minutes=30))) <= timedelta(minutes=10)


def test_a_habit_across_midnight_is_found_on_both_sides() -> None:
    activity = [m for d in range(-6, 0) for m in session(at(d, 23, 50) if d % 2 else at(d, 0, 5))]
    habit = reminders.habit(activity, NOW)
    assert habit.usual_start is not None
    assert min(habit.usual_start, 1440 - habit.usual_start) <= 15


def test_two_habits_a_day_pick_the_one_on_more_days() -> None:
    mornings = [m for d in range(-6, 0) for m in session(at(d, 7))]
    evenings = [m for d in range(-4, 0) for m in session(at(d, 20))]
    assert reminders.habit(mornings + evenings, NOW).usual_start == 7 * 60


def test_the_longest_daily_gap_becomes_quiet_hours() -> None:
    day = [at(0, 7), at(0, 11), at(0, 15), at(0, 18), at(0, 21)]
    activity = [m for d in range(-5, 0) for start in day for m in session(start + timedelta(days=d))]
    quiet = reminders.habit(activity, NOW).quiet
    assert quiet is not None
    # Last active at 21:20, first at 07:00: the night is 22:21 to 06:00, an hour left awake at each end.
    assert (quiet.start, quiet.minutes) == (22 * 60 + 21, 7 * 60 + 39)
    assert quiet.covers(at(0, 3)) and not quiet.covers(at(0, 7)) and not quiet.covers(at(0, 21, 30))


def test_a_very_long_gap_keeps_its_middle_ten_hours() -> None:
    quiet = reminders.habit(evening_learner(), NOW).quiet
    assert quiet is not None and quiet.minutes == reminders.QUIET_MAX
    assert not quiet.covers(at(0, 18, 45))


def test_a_reminder_due_in_quiet_hours_waits_until_they_end() -> None:
    quiet = QuietHours(start=22 * 60, minutes=8 * 60)
    habit = Habit(usual_start=2 * 60, quiet=quiet, last_session=at(-1, 2))
    planned = reminders.next_reminder(7, habit, waits_from=NOW, last_reminder=None, now=NOW)
    assert planned is not None and not quiet.covers(planned)
    assert minute_of(planned) == 6 * 60


def test_with_only_a_time_zone_the_night_is_local_and_so_is_the_day() -> None:
    tokyo = timedelta(hours=9)
    habit = reminders.habit(session(at(0, 9)), NOW, utc_offset=tokyo)
    assert habit.quiet == QuietHours(start=13 * 60, minutes=10 * 60)  # 22:00-08:00 in Tokyo
    assert reminders.local_day(at(0, 15, 30), habit) == NOW.date() + timedelta(days=1)
    assert reminders.local_day(at(0, 14, 30), habit) == NOW.date()


def test_the_local_day_turns_in_the_middle_of_the_night() -> None:
    habit = Habit(usual_start=None, quiet=QuietHours(start=22 * 60, minutes=8 * 60), last_session=None)
    assert reminders.local_day(at(0, 1, 59), habit) == NOW.date() - timedelta(days=1)
    assert reminders.local_day(at(0, 2, 0), habit) == NOW.date()
    assert reminders.reminder_key(7, at(0, 2), habit) == reminders.reminder_key(7, at(0, 23, 59), habit)
    assert reminders.reminder_key(7, at(0, 2), habit) != reminders.reminder_key(7, at(0, 2), habit, snoozed=True)


def test_nothing_waiting_means_no_reminder() -> None:
    habit = reminders.habit(evening_learner(), NOW)
    assert reminders.waiting_from(NOW, unfinished_lesson=False, cards_due_now=0, next_card_due=None) is None
    assert reminders.next_reminder(7, habit, waits_from=None, last_reminder=None, now=NOW) is None


def test_a_card_due_later_moves_the_reminder_to_that_days_hour() -> None:
    habit = reminders.habit(evening_learner(), NOW)
    due = at(3, 10)
    waits = reminders.waiting_from(NOW, unfinished_lesson=False, cards_due_now=0, next_card_due=due)
    assert waits == due
    assert reminders.waiting_from(NOW, unfinished_lesson=True, cards_due_now=0, next_card_due=due) == NOW
    assert reminders.waiting_from(NOW, unfinished_lesson=False, cards_due_now=2, next_card_due=due) == NOW
    planned = reminders.next_reminder(7, habit, waits_from=waits, last_reminder=None, now=NOW)
    assert planned is not None and planned.date() == due.date() and planned.hour == 18


def test_one_reminder_a_local_day() -> None:
    habit = reminders.habit(evening_learner(), NOW)
    sent = at(0, 18, 50)
    planned = reminders.next_reminder(7, habit, waits_from=sent, last_reminder=sent, now=sent + timedelta(minutes=5))
    assert planned is not None
    assert reminders.local_day(planned, habit) == reminders.local_day(sent, habit) + timedelta(days=1)


def test_ten_thousand_learners_with_one_habit_are_spread_over_twenty_minutes() -> None:
    habit = Habit(usual_start=19 * 60 + 15, quiet=None, last_session=at(-1, 19, 15))
    planned = [
        reminders.next_reminder(learner, habit, waits_from=NOW, last_reminder=None, now=NOW)
        for learner in range(10_000)
    ]
    anchor = at(0, 19)
    offsets = [(p - anchor).total_seconds() for p in planned if p is not None]
    assert len(offsets) == 10_000
    assert min(offsets) >= -600 and max(offsets) <= 600
    per_minute = collections.Counter(int(o // 60) for o in offsets)
    assert len(per_minute) >= 20
    # Evenly: about 500 a minute, never the whole crowd in one.
    assert max(per_minute.values()) < 650


def test_planning_again_gives_the_same_moment() -> None:
    habit = reminders.habit(evening_learner(), NOW)
    first = reminders.next_reminder(7, habit, waits_from=NOW, last_reminder=at(-1, 18, 47), now=NOW)
    assert first == reminders.next_reminder(7, habit, waits_from=NOW, last_reminder=at(-1, 18, 47), now=NOW)


def test_five_ignored_reminders_in_a_row_pause_them() -> None:
    sent = [at(d, 18, 45) for d in range(-6, 0)]
    answered_first = [at(-6, 19)]
    assert reminders.ignored_in_a_row(sent, answered_first, NOW) == 5
    assert reminders.should_pause(sent, answered_first, NOW)
    answered_last = [at(-6, 19), at(-1, 19)]
    assert reminders.ignored_in_a_row(sent, answered_last, NOW) == 0
    assert not reminders.should_pause(sent[-4:], [], NOW)


def test_a_snooze_comes_back_later_but_never_at_night() -> None:
    habit = Habit(usual_start=None, quiet=QuietHours(start=22 * 60, minutes=8 * 60), last_session=None)
    assert reminders.snoozed_until(habit, at(0, 12)) == at(0, 14)
    assert reminders.snoozed_until(habit, at(0, 21)) == at(1, 6)


def test_a_time_without_a_zone_is_refused() -> None:
    with pytest.raises(ValueError, match="no time zone"):
        reminders.habit([dt.datetime(2026, 3, 1, 9)], NOW)


moments = st.integers(min_value=-40 * 1440, max_value=0).map(lambda m: NOW + timedelta(minutes=m))


@st.composite
def habitual(draw: st.DrawFn) -> list[dt.datetime]:
    """A learner who mostly starts near one minute of the day, with stray activity besides."""
    base = draw(st.integers(min_value=0, max_value=1439))
    days = draw(st.lists(st.integers(min_value=1, max_value=30), unique=True, max_size=12))
    jitter = draw(st.lists(st.integers(min_value=-40, max_value=40), min_size=len(days), max_size=len(days)))
    starts = [at(-d, 0) + timedelta(minutes=base + j) for d, j in zip(days, jitter, strict=True)]
    return [m for start in starts for m in session(start)] + draw(st.lists(moments, max_size=30))


offsets = st.none() | st.integers(min_value=-12 * 4, max_value=14 * 4).map(lambda q: timedelta(minutes=15 * q))


@settings(max_examples=400)
@given(
    activity=st.lists(moments, max_size=80) | habitual(),
    learner=st.integers(min_value=1, max_value=2**40),
    utc_offset=offsets,
    last=st.none() | st.integers(min_value=-4 * 1440, max_value=0).map(lambda m: NOW + timedelta(minutes=m)),
    waits=st.none() | st.integers(min_value=-1440, max_value=6 * 1440).map(lambda m: NOW + timedelta(minutes=m)),
)
def test_every_planned_reminder_keeps_the_rules(
    activity: list[dt.datetime],
    learner: int,
    utc_offset: dt.timedelta | None,
    last: dt.datetime | None,
    waits: dt.datetime | None,
) -> None:
    habit = reminders.habit(activity, NOW, utc_offset)
    event("habit" if habit.usual_start is not None else "no habit")
    event("quiet hours" if habit.quiet is not None else "no quiet hours")
    planned = reminders.next_reminder(learner, habit, waits_from=waits, last_reminder=last, now=NOW)
    if waits is None:
        assert planned is None
        return
    assert planned is not None
    assert planned >= NOW and planned >= waits
    if habit.quiet is not None:
        assert not habit.quiet.covers(planned)
    if last is not None:
        assert planned - last >= reminders.MIN_GAP
        assert reminders.local_day(planned, habit) != reminders.local_day(last, habit)
    earliest = max(NOW, waits, last + reminders.MIN_GAP if last else NOW)
    assert planned - earliest <= timedelta(days=2, hours=11)
    if habit.usual_start is not None and planned > earliest:
        target = (habit.usual_start - 15) % 1440
        off = (minute_of(planned) - target + 720) % 1440 - 720
        quiet_end = None if habit.quiet is None else (habit.quiet.start + habit.quiet.minutes) % 1440
        assert abs(off) <= 11 or minute_of(planned) == quiet_end
