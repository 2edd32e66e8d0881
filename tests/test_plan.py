"""A learner's reminder schedule as data (bot.retention.plan): planned only when on and something waits, decided once
per local day, paused after five ignored, moved by /settings within bounds."""

from __future__ import annotations

import datetime as dt

from bot.retention import plan
from bot.retention.plan import Action, ReminderState, Status

NOW = dt.datetime(2026, 3, 10, 8, 0, tzinfo=dt.UTC)


def state(**changes: object) -> ReminderState:
    base: dict[str, object] = {
        "user_id": 7,
        "status": Status.ON,
        "activity": (NOW - dt.timedelta(hours=23, minutes=30),),
        "utc_offset": None,
        "shift": dt.timedelta(),
        "last_reminder": None,
        "ignored": 0,
        "snoozed": False,
        "cards_due": 2,
        "next_card_due": NOW - dt.timedelta(hours=1),
        "unfinished_lesson": None,
    }
    base.update(changes)
    return ReminderState(**base)  # type: ignore[arg-type]


def test_nothing_is_planned_unless_reminders_are_on_and_something_waits():
    assert plan.next_at(state(status=Status.OFF), NOW) is None
    assert plan.next_at(state(status=Status.OFFERED), NOW) is None
    assert plan.next_at(state(cards_due=0, next_card_due=None), NOW) is None
    assert plan.next_at(state(), NOW) is not None


def test_a_due_learner_with_something_waiting_gets_a_reminder_keyed_by_their_day_and_the_next_a_day_on():
    decision = plan.decide(state(), NOW)
    assert decision.action is Action.SEND
    assert decision.key is not None and decision.key.learner == 7
    assert decision.next_at is not None and decision.next_at - NOW >= dt.timedelta(hours=16)


def test_nothing_waiting_sends_nothing_and_plans_for_when_the_next_card_is_due():
    later = NOW + dt.timedelta(days=3)
    decision = plan.decide(state(cards_due=0, next_card_due=later), NOW)
    assert decision.action is Action.NOTHING and decision.key is None
    assert decision.next_at is not None and decision.next_at >= later - dt.timedelta(minutes=10)


def test_five_ignored_in_a_row_pause_instead_of_a_sixth():
    assert plan.decide(state(ignored=4), NOW).action is Action.SEND
    paused = plan.decide(state(ignored=5), NOW)
    assert (paused.action, paused.status, paused.next_at) == (Action.PAUSE, Status.PAUSED, None)


def test_settings_moves_the_hour_by_whole_hours_within_twelve():
    shift = dt.timedelta()
    for _ in range(20):
        shift = plan.shifted(shift, 1)
    assert shift == dt.timedelta(hours=12)
    assert plan.shifted(dt.timedelta(hours=-12), -1) == dt.timedelta(hours=-12)
    base = plan.next_at(state(), NOW)
    moved = plan.next_at(state(shift=dt.timedelta(hours=1)), NOW)
    assert base is not None and moved == base + dt.timedelta(hours=1)
