"""A replay stores nothing twice: the bot dies at each fault point (bot.faults) of a slide tap, a drill tap, a quiz
answer and a graded run, comes back, handles the update again, and then every table holds exactly what one clean
run holds, and `coursebot stats` counts each event once. The learner sees what one clean run shows: an update killed
after it stored its outcome, before its replies went out, sends its stored replies (the outbox), so a graded run that
passed shows its verdict, where deciding again over the stored state showed "(no output)"; a reply sent just before
the kill may come twice, never more.

Each case runs twice against the stand-in, each time on its own database: once clean, once killed at the point (the
hook raises CancelledError, which leaves the update pending as kill -9 does) and started again. The real bot, the real
SQLite file, the real runner for graded runs.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import shutil
import sqlite3
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from bot.app import CourseBot
from bot.config import Config
from bot.stats.query import Filters, read
from bot.storage.engine import utc_now
from tests.conftest import course_content, running
from tests.journey import (
    answer_quiz,
    correct_option,
    data_button,
    drill_move,
    open_practice,
    read_slides,
    send_and_wait,
    solve_drill,
    tap_and_wait_edit,
    tap_and_wait_message,
    tap_data_and_wait_edit,
)

COURSE = course_content().english
LESSON = COURSE.lessons[0]

# The tables a learner's updates write, and the columns that differ between two clean runs (ids Telegram or the
# clock hands out, the round's shuffle): for those only whether they are set is compared.
TABLES = (
    "learners",
    "lesson_progress",
    "drill_progress",
    "quiz_polls",
    "quiz_sends",
    "quiz_answers",
    "exercise_attempts",
    "events",
    "activity",  # noted in the update's one write, keyed by the update (bot.changes.ActivityNoted)
    "outbox",
)
VOLATILE = {
    "id",
    "user_id",
    "chat_id",
    "poll_id",
    "quiz_poll_id",
    "message_id",
    "reader_message_id",
    "quiz_seed",
    "options",
    "option_index",
    "seconds",
    "update_id",
    "at",
    "created_at",
    "updated_at",
    "started_at",
    "sent_at",
    "answered_at",
    "attempted_at",
    "solved_at",
    "slides_read_at",
    "completed_at",
    "stored_at",
    "text",  # a reply's text and buttons: a drill's pieces are shuffled by learner
    "buttons",
    "position",  # a reply's place after the buttons taken off, which only one run may have (COMPARED)
}


# Rows left out of the comparison: the buttons a new practice screen takes off the last one are known in memory only
# (bot.context.Services.superseded_keyboards), so a process started after the crash has none to take off.
COMPARED = {"outbox": "kind != 'retire'"}


def select(table: str) -> str:
    """Return the query reading ``table``'s compared rows (table names are this module's constants)."""
    return f"SELECT * FROM {table} WHERE {COMPARED.get(table, 'TRUE')}"


def tables(path: Path) -> dict[str, list[tuple]]:
    """Return every learner table's rows, volatile columns reduced to whether they are set, sorted."""
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as conn:
        conn.row_factory = sqlite3.Row
        dump = {}
        for table in TABLES:
            rows = conn.execute(select(table)).fetchall()
            dump[table] = sorted(
                (tuple((k, row[k] is not None) if k in VOLATILE else (k, row[k]) for k in row.keys()) for row in rows),
                key=repr,
            )
    conn.close()
    return dump


def seen(ada) -> Counter[str]:
    """Return what the learner's chat shows: each of the bot's messages (edits applied) by its text or poll, numbers
    left out (a run prints its random tensors)."""
    texts = (m.get("text") or m.get("caption") or f"poll: {m.get('poll', {}).get('question')}" for m in ada.messages)
    return Counter(re.sub(r"\d+", "#", text) for text in texts)


def assert_seen_as_in_one_clean_run(clean: Counter[str], crashed: Counter[str], point: str) -> None:
    """Every message of one clean run is in the chat after the crash and replay; at most one more (a reply sent just
    before the kill, sent again: Telegram's methods are not idempotent)."""
    missing, extra = clean - crashed, crashed - clean
    assert not missing, f"after a crash at {point} the learner never saw {sorted(missing)} (saw {sorted(extra)})"
    assert sum(extra.values()) <= 1, f"after a crash at {point} the learner saw more than one reply twice: {extra}"


def stats(path: Path) -> dict[str, object]:
    """Return what `coursebot stats` counts (every figure but the timing of slides)."""
    figures = read(path, Filters())
    return {
        "reached": figures.reached,
        "first_tries": figures.first_tries,
        "chosen": figures.chosen,
        "attempts": figures.attempts,
        "failed_checks": figures.failed_checks,
        "hints": figures.hints,
        "finished": figures.finished,
        "drills": figures.drills,
        "slide_events": {key: count for key, (count, _median) in figures.seconds.items()},
    }


# A case: how to bring a learner to the update, and the update (sent without waiting for the bot).
Step = Callable[[object], Awaitable[object]]


@dataclass(frozen=True)
class Case:
    setup: Callable[[object], Awaitable[object]]  # returns what act needs (a message to tap, a poll to answer)
    act: Callable[[object, object], Awaitable[None]]
    points: tuple[str, ...]  # the fault points the update passes, in order
    runner: bool = False


async def _first_slide(ada) -> dict:
    menu = await send_and_wait(ada, "/start")
    return await tap_and_wait_edit(ada, menu, "Start the course")


async def _tap_next(ada, slide) -> None:
    ada.tap_nowait(slide, "Next")


async def _before_last_drill(ada) -> dict:
    last = await read_slides(ada, await _first_slide(ada), LESSON)
    result = await answer_quiz(ada, last, LESSON)
    since = ada.cursor()
    await ada.tap(result, data_button(result, f"dl:{LESSON.id}")["text"])
    screen = await ada.wait_message(since=since)
    for index, drill in enumerate(LESSON.drills[:-1]):
        screen = await solve_drill(ada, screen, LESSON, drill)
        screen = await tap_data_and_wait_edit(ada, screen, f"dv:{LESSON.id}:{LESSON.drills[index + 1].id}")
    return screen


async def _right_choice(ada, screen) -> None:
    final = LESSON.drills[-1]
    assert final.kind != "parsons"  # one tap answers it
    ada.tap_nowait(screen, data_button(screen, drill_move(LESSON, final.id, "c", final.correct))["text"])


async def _polls_up_to(ada, answered: int) -> dict:
    """Read the slides, solve the drills, start the Quick Check and answer ``answered`` questions; return the poll."""
    from tests.journey import solve_drills

    last = await read_slides(ada, await _first_slide(ada), LESSON)
    await solve_drills(ada, last, LESSON)
    poll = await tap_and_wait_message(ada, last, "Quick Check", lambda m: "poll" in m)
    for _ in range(answered):
        since = ada.cursor()
        await ada.answer_poll(poll, correct_option(poll))
        poll = await ada.wait_message(lambda m: "poll" in m, since=since)
    return poll


async def _answer(ada, poll) -> None:
    await ada.answer_poll(poll, correct_option(poll))


async def _in_practice(ada) -> None:
    await open_practice(ada, LESSON.id, lambda m: "Practice" in m.get("text", ""), timeout=10)


def _send(code: str) -> Callable[[object, object], Awaitable[None]]:
    async def act(ada, _setup) -> None:
        await ada.send(f"```python\n{code}\n```")

    return act


CASES = {
    "slide tap": Case(_first_slide, _tap_next, ("slide:stored", "slide:shown", "button:answered")),
    "right drill choice that finishes the lesson": Case(
        _before_last_drill, _right_choice, ("drill:stored", "drill:shown", "button:answered")
    ),
    "first quiz answer": Case(lambda ada: _polls_up_to(ada, 0), _answer, ("quiz:stored", "quiz:asked")),
    "last quiz answer that finishes the lesson": Case(
        lambda ada: _polls_up_to(ada, len(LESSON.quiz) - 1), _answer, ("quiz:stored", "quiz:shown")
    ),
    "graded run that fails": Case(
        _in_practice, _send(LESSON.exercise.starter), ("run:ran", "run:stored", "run:shown"), runner=True
    ),
    "graded run that passes": Case(
        _in_practice, _send(LESSON.exercise.solution), ("run:ran", "run:stored", "run:shown"), runner=True
    ),
}


async def _run(config: Config, standin, ada, case: Case, die_at: str | None) -> set[str]:
    """Take ``ada`` through the case on the bot of ``config``; with ``die_at``, kill it there and start it again.

    Returns the fault points the update passed (before the kill).
    """
    passed: set[str] = set()
    async with running(config) as bot:
        ready = await case.setup(ada)
        await standin.settle()
        services = bot.app.bot_data.services

        def hook(point: str) -> None:
            passed.add(point)
            if point == die_at:
                services.faults.hook = None
                raise asyncio.CancelledError  # nothing after this point runs: the update stays pending

        services.faults.hook = hook
        await case.act(ada, ready)
        await standin.settle(quiet=0.5 if case.runner else 0.15, timeout=60)
        if case.runner:
            # A graded run goes on in a task after its handler returned: wait for it to end (or die).
            for _ in range(600):
                if "run:shown" in passed or (die_at is not None and die_at in passed):
                    break
                await asyncio.sleep(0.05)
            await standin.settle()
    if die_at is not None:
        # The update left pending is handled again at start. On a shared database the dead process's claim holds it
        # for one lease, so that no live replica's update is taken: this start comes after that lease.
        later = config.inbox_lease + 1 if config.db_url is not None else 0.0
        async with CourseBot(config, clock=lambda: utc_now() + dt.timedelta(seconds=later)):
            await standin.settle(quiet=0.5 if case.runner else 0.15, timeout=60)
            if case.runner:
                await asyncio.sleep(0.5)
                await standin.settle(quiet=1.0, timeout=60)
    return passed


CASE_POINTS = [(name, point) for name, case in CASES.items() for point in case.points]


@pytest.mark.parametrize(("name", "point"), CASE_POINTS, ids=[f"{n}, dies at {p}" for n, p in CASE_POINTS])
async def test_a_replay_after_a_crash_at_each_fault_point_stores_what_one_clean_run_stores(
    name, point, config, standin, tmp_path
):
    case = CASES[name]
    if case.runner and shutil.which("bwrap") is None:
        pytest.skip("the graded run needs the runner's sandbox, which needs bubblewrap")
    if case.runner:
        config = replace(config, runner="embedded")
    clean = replace(config, db_path=tmp_path / "clean" / "coursebot.sqlite3")
    crashed = replace(config, db_path=tmp_path / "crashed" / "coursebot.sqlite3")

    clean_ada, crashed_ada = standin.learner(user_id=7101), standin.learner(user_id=7102)
    passed = await _run(clean, standin, clean_ada, case, None)
    assert set(case.points) <= passed, f"the clean run passed {sorted(passed)}, not every point of {case.points}"
    died = await _run(crashed, standin, crashed_ada, case, point)
    assert point in died, "the bot never reached the point it was to die at: the test proves nothing"
    assert_seen_as_in_one_clean_run(seen(clean_ada), seen(crashed_ada), point)

    want, got = tables(clean.db_path), tables(crashed.db_path)
    for table in TABLES:
        assert got[table] == want[table], f"{table} after a crash at {point} differs from one clean run"
    assert stats(crashed.db_path) == stats(clean.db_path)
    with sqlite3.connect(crashed.db_path) as conn:
        pending = conn.execute("SELECT count(*) FROM inbox WHERE state != 'handled'").fetchone()[0]
    conn.close()
    assert pending == 0, "the update left pending by the crash was not handled at the next start"
    if point == "button:answered":
        # The tap was answered before the crash; its replay answers it again, which Telegram refuses (the bot takes
        # the refusal as an expired tap). That one refusal is the crash's doing, not a bug the stand-in should flag.
        assert len(standin.answered_again) == 1
        standin.answered_again.clear()
