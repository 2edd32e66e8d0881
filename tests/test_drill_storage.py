"""Drill attempts in a real SQLite file and a real PostgreSQL database: stored per learner and drill, guarded by
their turn, reset with the rest."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.learner import FRESH, DrillProgress
from bot.storage.db import Database

USER, CHAT = 1101, 2101


@pytest.fixture
async def db(store: Path | str) -> AsyncIterator[Database]:
    """The database, once on each engine (tests/conftest.py: store)."""
    database = await Database.open(store)
    await database.learner(USER, CHAT, "en")
    yield database
    await database.close()


async def test_an_attempt_is_stored_and_read_back_as_it_was(db):
    attempt = DrillProgress(placed=(2, 0, 1), ruled_out=frozenset({1, 3}), turn=4, tries=2, checked=True)
    assert await db.save_drill(USER, "grad", "step-order", FRESH, attempt)
    assert await db.drill_progress(USER, "grad") == {"step-order": attempt}
    assert await db.drill_progress(USER, "backward") == {}


async def test_a_change_from_an_outdated_attempt_is_refused(db):
    first = DrillProgress(placed=(0,), turn=1)
    assert await db.save_drill(USER, "grad", "step-order", FRESH, first)
    # A second writer that read the attempt before the first change loses: nothing is overwritten.
    assert not await db.save_drill(USER, "grad", "step-order", FRESH, DrillProgress(placed=(1,), turn=1))
    assert (await db.drill_progress(USER, "grad"))["step-order"] == first
    second = DrillProgress(placed=(0, 1), turn=2)
    assert await db.save_drill(USER, "grad", "step-order", first, second)
    assert (await db.drill_progress(USER, "grad"))["step-order"] == second


async def test_solved_counts_once_solved_even_after_starting_again(db):
    solved = DrillProgress(turn=1, solved=True, done=True)
    await db.save_drill(USER, "grad", "clear-guard", FRESH, solved)
    again = DrillProgress(turn=2, solved=True)
    await db.save_drill(USER, "grad", "clear-guard", solved, again)
    await db.save_drill(USER, "grad", "no-clear", FRESH, DrillProgress(turn=1, tries=1, ruled_out=frozenset({0})))
    assert await db.drills_solved(USER) == {"grad": {"clear-guard"}}
    assert (await db.drill_progress(USER, "grad"))["clear-guard"] == again


async def test_reset_forgets_every_attempt(db):
    await db.save_drill(USER, "grad", "clear-guard", FRESH, DrillProgress(turn=1, solved=True, done=True))
    await db.reset(USER)
    assert await db.drill_progress(USER, "grad") == {}
    assert await db.drills_solved(USER) == {}


async def test_each_learner_has_their_own_attempts(db):
    await db.learner(USER + 1, CHAT + 1, "en")
    await db.save_drill(USER, "grad", "clear-guard", FRESH, DrillProgress(turn=1, solved=True, done=True))
    assert await db.drills_solved(USER + 1) == {}
    assert await db.drill_progress(USER + 1, "grad") == {}
