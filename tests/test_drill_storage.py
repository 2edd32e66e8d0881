"""Drill attempts in a real SQLite file and a real PostgreSQL database: saved with their update's outcome
(Database.store, a DrillSaved change), stored per learner and drill, guarded by their turn (a stale one drops the
whole outcome), read back with their lesson's state, reset with the rest."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.changes import DrillSaved, Event
from bot.learner import FRESH, DrillProgress, EventKind
from bot.storage.db import Database
from tests.conftest import peek
from tests.outcomes import stored

USER, CHAT = 1101, 2101


@pytest.fixture
async def db(store: Path | str) -> AsyncIterator[Database]:
    """The database, once on each engine (tests/conftest.py: store)."""
    database = await Database.open(store)
    await database.learner(USER, CHAT, "en")
    yield database
    await database.close()


async def save(db: Database, drill: str, before: DrillProgress, after: DrillProgress, user: int = USER) -> bool:
    """Save an attempt as the drill flow does when a check is answered: with its event, in one outcome."""
    event = Event(EventKind.DRILL, "grad", item_id=drill, verdict="right")
    return await stored(db, user, DrillSaved("grad", drill, before, after), events=(event,))


async def attempts(db: Database, lesson: str = "grad", user: int = USER) -> dict[str, DrillProgress]:
    return (await db.lesson_state(user, lesson)).drills


async def test_an_attempt_is_stored_and_read_back_as_it_was(db):
    attempt = DrillProgress(placed=(2, 0, 1), ruled_out=frozenset({1, 3}), turn=4, tries=2, checked=True)
    assert await save(db, "step-order", FRESH, attempt)
    assert await attempts(db) == {"step-order": attempt}
    assert await attempts(db, "backward") == {}


async def test_a_change_from_an_outdated_attempt_is_refused_with_its_whole_outcome(db):
    first = DrillProgress(placed=(0,), turn=1)
    assert await save(db, "step-order", FRESH, first)
    # A second writer that read the attempt before the first change loses: nothing of its outcome is written.
    assert not await save(db, "step-order", FRESH, DrillProgress(placed=(1,), turn=1))
    assert (await attempts(db))["step-order"] == first
    assert await peek(db, "SELECT count(*) FROM events") == [(1,)]
    second = DrillProgress(placed=(0, 1), turn=2)
    assert await save(db, "step-order", first, second)
    assert (await attempts(db))["step-order"] == second
    assert await peek(db, "SELECT count(*) FROM events") == [(2,)]


async def test_solved_counts_once_solved_even_after_starting_again(db):
    solved = DrillProgress(turn=1, solved=True, done=True)
    assert await save(db, "clear-guard", FRESH, solved)
    again = DrillProgress(turn=2, solved=True)
    assert await save(db, "clear-guard", solved, again)
    assert await save(db, "no-clear", FRESH, DrillProgress(turn=1, tries=1, ruled_out=frozenset({0})))
    assert await db.drills_solved(USER) == {"grad": {"clear-guard"}}
    assert (await attempts(db))["clear-guard"] == again


async def test_reset_forgets_every_attempt(db):
    assert await save(db, "clear-guard", FRESH, DrillProgress(turn=1, solved=True, done=True))
    await db.reset(USER)
    assert await attempts(db) == {}
    assert await db.drills_solved(USER) == {}


async def test_each_learner_has_their_own_attempts(db):
    await db.learner(USER + 1, CHAT + 1, "en")
    assert await save(db, "clear-guard", FRESH, DrillProgress(turn=1, solved=True, done=True))
    assert await db.drills_solved(USER + 1) == {}
    assert await attempts(db, user=USER + 1) == {}
    # The other learner's first attempt is theirs: it does not race with this learner's stored one.
    assert await save(db, "clear-guard", FRESH, DrillProgress(placed=(1,), turn=1), user=USER + 1)
    assert (await attempts(db, user=USER + 1))["clear-guard"].placed == (1,)
    assert (await attempts(db))["clear-guard"].solved
