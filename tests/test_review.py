"""Spaced review with FSRS: cards for what was met, pass/fail ratings, a chat course's schedule, stored as rows."""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
from datetime import timedelta

import fsrs.card
import fsrs.scheduler
import pytest
from fsrs import Rating, Scheduler, State

from bot.course.model import ChoiceDrill, ParsonsDrill
from bot.retention import review
from bot.retention.review import CardKey, ItemKind, ReviewCard, ReviewEntry
from tests.conftest import course_content

T0 = dt.datetime(2026, 3, 2, 18, 30, 15, tzinfo=dt.UTC)
KEY = CardKey("backward", ItemKind.QUESTION, "what-backward-does")
DAY = 86_400


def days(card: ReviewCard, since: dt.datetime) -> float:
    return (card.due_at - since).total_seconds() / DAY


def test_every_quick_check_question_and_every_drill_of_the_course_is_a_card() -> None:
    english = course_content().english
    for lesson in english.lessons:
        keys = review.lesson_cards(lesson)
        assert [k.item for k in keys if k.kind == ItemKind.QUESTION] == [q.id for q in lesson.quiz]
        assert [k.item for k in keys if k.kind == ItemKind.DRILL] == [d.id for d in lesson.drills]
        assert {k.lesson for k in keys} == {lesson.id}
    drills = [d for lesson in english.lessons for d in lesson.drills]
    # Parsons, fill-in and predict all become cards.
    assert {d.kind for d in drills} == {"parsons", "fill", "predict"}
    assert any(isinstance(d, ParsonsDrill) for d in drills) and any(isinstance(d, ChoiceDrill) for d in drills)


def test_a_card_id_is_stable_distinct_and_fits_sqlite() -> None:
    assert review.card_id(7, KEY) == review.card_id(7, KEY)
    others = {
        review.card_id(learner, CardKey(lesson, kind, item))
        for learner in range(50)
        for lesson in ("a", "b")
        for kind in ItemKind
        for item in ("x", "y", "z")
    }
    assert len(others) == 50 * 2 * 2 * 3
    assert all(0 <= i < 2**63 for i in others)


def test_right_on_the_first_try_is_good_and_anything_else_is_again() -> None:
    assert review.rating(True) == Rating.Good
    assert review.rating(False) == Rating.Again
    # Never Easy automatically, never Hard (FSRS counts Hard as a pass) for a failure.
    assert {review.rating(b) for b in (True, False)}.isdisjoint({Rating.Hard, Rating.Easy})


def test_the_schedule_suits_a_chat_course() -> None:
    assert review.SCHEDULER.learning_steps == ()
    assert review.SCHEDULER.relearning_steps == ()
    assert review.SCHEDULER.maximum_interval == 365
    assert review.SCHEDULER.enable_fuzzing


def test_a_card_met_right_comes_back_in_days_and_one_met_wrong_tomorrow() -> None:
    right, entry = review.meet(7, KEY, True, T0)
    assert right.state == State.Review and right.step is None
    assert right.last_review == entry.reviewed_at == int(T0.timestamp())
    assert 1 <= days(right, T0) <= 3
    wrong, wrong_entry = review.meet(7, KEY, False, T0)
    assert wrong.state == State.Review
    assert days(wrong, T0) == 1  # no 1- or 10-minute step: tomorrow, never later today
    assert (entry.rating, wrong_entry.rating) == (Rating.Good, Rating.Again)
    assert wrong.stability is not None and right.stability is not None and wrong.stability < right.stability


def test_a_failed_review_brings_the_card_back_much_sooner_without_a_relearning_step() -> None:
    card, _ = review.meet(7, KEY, True, T0)
    for _ in range(4):
        card, _ = review.review(card, True, card.due_at)
    when = card.due_at + timedelta(hours=3)
    lapsed, entry = review.review(card, False, when)
    assert lapsed.state == State.Review
    previous = (card.due - (card.last_review or 0)) / DAY
    assert 1 <= days(lapsed, when) < previous / 10
    assert entry.rating == Rating.Again


def test_making_a_card_never_sleeps(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_sleep(seconds: float) -> None:
        raise AssertionError(f"fsrs slept {seconds} s: a card was made without a card_id")

    monkeypatch.setattr(fsrs.card.time, "sleep", no_sleep)
    card, _ = review.meet(7, KEY, True, T0)
    review.review(card, False, card.due_at)


def test_intervals_grow_with_right_answers_and_never_pass_a_year() -> None:
    card, _ = review.meet(7, KEY, True, T0)
    intervals = []
    for _ in range(15):
        reviewed_at = card.due_at
        card, _ = review.review(card, True, reviewed_at)
        intervals.append(days(card, reviewed_at))
    assert intervals[:5] == sorted(intervals[:5])
    assert max(intervals) == 365


def test_the_same_review_schedules_the_same_day_so_a_replay_changes_nothing() -> None:
    first = review.meet(7, KEY, True, T0)
    assert review.meet(7, KEY, True, T0) == first
    card = first[0]
    later = card.due_at + timedelta(days=1)
    assert review.review(card, True, later) == review.review(card, True, later)


def test_fuzz_spreads_cards_met_together_within_the_librarys_range() -> None:
    plain = Scheduler(learning_steps=(), relearning_steps=(), maximum_interval=365, enable_fuzzing=False)
    spread = set()
    for n in range(40):
        key = CardKey("grad", ItemKind.DRILL, f"drill-{n}")
        card, _ = review.meet(7, key, True, T0)
        for _ in range(2):
            card, _ = review.review(card, True, card.due_at)
        reviewed_at = card.due_at
        fuzzed, _ = review.review(card, True, reviewed_at)
        unfuzzed, _ = plain.review_card(card.fsrs_card(), Rating.Good, reviewed_at)
        interval = (unfuzzed.due - reviewed_at).days
        assert interval >= 7  # long enough for the library to fuzz
        # The library's fuzz range: 2.5-7 days at 15%, 7-20 days at 10%, then 5%, plus one day.
        delta = 1 + 0.15 * 4.5 + 0.1 * (min(interval, 20) - 7) + 0.05 * max(interval - 20, 0)
        assert abs(days(fuzzed, reviewed_at) - interval) <= round(delta) + 1
        spread.add((fuzzed.due_at - reviewed_at).days)
    assert len(spread) >= 3


def test_the_librarys_own_random_is_left_as_it_was() -> None:
    before = fsrs.scheduler.random  # type: ignore[attr-defined]
    card, _ = review.meet(7, KEY, True, T0)
    review.review(card, True, card.due_at)
    assert fsrs.scheduler.random is before is random.random  # type: ignore[attr-defined]


def test_a_card_round_trips_through_an_indexed_sqlite_table() -> None:
    cards = []
    for n, right in enumerate([True, False, True, True]):
        key = CardKey("backward", ItemKind.QUESTION if n % 2 else ItemKind.DRILL, f"item-{n}")
        card, _ = review.meet(7, key, right, T0 + timedelta(minutes=n))
        cards.append(card)
    reviewed, _ = review.review(cards[0], True, cards[0].due_at)
    cards[0] = reviewed
    conn = sqlite3.connect(":memory:")
    conn.row_factory = sqlite3.Row
    conn.execute(
        "CREATE TABLE review_cards (card_id INTEGER PRIMARY KEY, learner INTEGER NOT NULL, lesson TEXT NOT NULL,"
        " kind TEXT NOT NULL, item TEXT NOT NULL, state INTEGER NOT NULL, step INTEGER, stability REAL,"
        " difficulty REAL, due INTEGER NOT NULL, last_review INTEGER)"
    )
    conn.execute("CREATE INDEX review_cards_due ON review_cards (learner, due)")
    conn.executemany(
        "INSERT INTO review_cards VALUES (:card_id, :learner, :lesson, :kind, :item, :state, :step, :stability,"
        " :difficulty, :due, :last_review)",
        [card.columns() for card in cards],
    )
    now = T0 + timedelta(days=2)
    rows = conn.execute(
        "SELECT * FROM review_cards WHERE learner = ? AND due <= ? ORDER BY due", (7, int(now.timestamp()))
    ).fetchall()
    assert [ReviewCard.from_columns(row) for row in rows] == review.due_now(cards, now)
    assert {ReviewCard.from_columns(row) for row in conn.execute("SELECT * FROM review_cards")} == set(cards)
    plan = " ".join(
        str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN SELECT * FROM review_cards WHERE learner = 7 AND due <= 0")
    )
    assert "review_cards_due" in plan


def test_the_review_log_is_enough_for_fsrs_to_rebuild_the_card() -> None:
    card, entry = review.meet(7, KEY, True, T0)
    log = [entry]
    for right in (True, False, True, True):
        card, entry = review.review(card, right, card.due_at + timedelta(hours=5), duration_ms=4200)
        log.append(entry)
    assert [e.reviewed_at for e in log] == sorted(e.reviewed_at for e in log)
    assert log[-1].columns()["duration_ms"] == 4200
    rebuilt = review.SCHEDULER.reschedule_card(card.fsrs_card(), [e.fsrs_log() for e in log])
    assert rebuilt.stability == pytest.approx(card.stability)
    assert rebuilt.difficulty == pytest.approx(card.difficulty)
    assert ReviewEntry(**{**log[0].__dict__}) == log[0]


def test_what_is_due_comes_most_overdue_first_and_the_next_due_is_known() -> None:
    keys = [CardKey("grad", ItemKind.QUESTION, f"q{n}") for n in range(5)]
    cards = [review.meet(7, key, n % 2 == 0, T0 - timedelta(days=n)) for n, key in enumerate(keys)]
    now = T0 + timedelta(hours=1)
    due = review.due_now([c for c, _ in cards], now)
    assert due == sorted(due, key=lambda c: c.due)
    assert all(c.due_at <= now for c in due)
    assert {c.key for c in due} == {c.key for c, _ in cards if c.due_at <= now}
    assert review.next_due([c for c, _ in cards]) == min(c.due_at for c, _ in cards)
    assert review.next_due([]) is None
    summary = review.summary([c for c, _ in cards], now)
    assert (summary.due, summary.total, summary.learned) == (len(due), 5, 0)


def test_a_card_is_learned_once_it_holds_for_weeks() -> None:
    card, _ = review.meet(7, KEY, True, T0)
    assert not card.learned
    while not card.learned:
        card, _ = review.review(card, True, card.due_at)
    assert card.stability is not None and card.stability >= review.LEARNED_STABILITY_DAYS
    assert review.summary([card], T0).learned == 1


def test_a_time_without_a_zone_is_refused() -> None:
    with pytest.raises(ValueError, match="no time zone"):
        review.meet(7, KEY, True, dt.datetime(2026, 3, 2, 18, 30))
