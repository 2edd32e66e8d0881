"""The streak: a day counts when anything is finished, one missed day is forgiven, two end it."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from bot.retention.streak import Streak, streak

TODAY = dt.date(2026, 3, 10)


def ago(*offsets: int) -> list[dt.date]:
    return [TODAY - dt.timedelta(days=n) for n in offsets]


def walked(finished: set[dt.date], today: dt.date) -> int:
    """Count the streak by walking back from today, one day at a time: the test's own oracle."""
    count, missed, day = 0, 0, today
    if day not in finished:
        day -= dt.timedelta(days=1)  # today is not over yet
    while missed <= 1 and day >= min(finished, default=today):
        if day in finished:
            count, missed = count + 1, 0
        else:
            missed += 1
        day -= dt.timedelta(days=1)
    return count


def test_days_in_a_row_count() -> None:
    assert streak(ago(0, 1, 2), TODAY) == Streak(days=3, done_today=True, forgiven=0)


def test_today_not_done_yet_keeps_yesterdays_streak() -> None:
    assert streak(ago(1, 2), TODAY) == Streak(days=2, done_today=False, forgiven=0)


def test_one_missed_day_is_forgiven_automatically() -> None:
    assert streak(ago(0, 2, 3), TODAY) == Streak(days=3, done_today=True, forgiven=1)
    # Yesterday missed: the streak is still there to carry on today.
    assert streak(ago(2, 3), TODAY).alive


def test_one_missed_day_is_forgiven_every_time_it_happens() -> None:
    assert streak(ago(0, 2, 4, 6), TODAY).days == 4


def test_two_missed_days_in_a_row_start_a_new_streak() -> None:
    assert streak(ago(0, 3, 4, 5), TODAY) == Streak(days=1, done_today=True, forgiven=0)
    assert streak(ago(3, 4, 5), TODAY) == Streak(days=0, done_today=False, forgiven=0)
    assert not streak([], TODAY).alive


def test_days_after_today_are_ignored() -> None:
    assert streak([TODAY + dt.timedelta(days=1), *ago(0)], TODAY).days == 1


days_back = st.sets(st.integers(min_value=0, max_value=60), max_size=40)


@given(days_back)
def test_the_streak_matches_a_day_by_day_walk(offsets: set[int]) -> None:
    finished = set(ago(*offsets))
    result = streak(finished, TODAY)
    assert result.days == walked(finished, TODAY)
    assert result.done_today == (TODAY in finished)
    assert 0 <= result.forgiven <= result.days


@given(days_back)
def test_finishing_something_today_never_costs_a_day(offsets: set[int]) -> None:
    before = streak(ago(*offsets), TODAY)
    after = streak(ago(0, *offsets), TODAY)
    assert after.done_today
    if before.done_today:
        assert after == before
    elif before.alive:
        assert after.days == before.days + 1
    else:
        assert after.days >= 1
