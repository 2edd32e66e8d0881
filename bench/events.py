"""Learning events as the bot records them (the events table of the state helper's contract 3), and learners
simulated taking the course, for bench/stats.py and the stats tests.

The table is created here exactly as the contract states it, until the bot's own migration creates it; then
``create_table`` gives way to bot.storage's migrations, and the simulation writes through the same columns.
"""

from __future__ import annotations

import random
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.course.model import Course, Lesson
from bot.stats.query import moment
from bot.stats.report import option_id

# Contract 3: one row per event; the Telegram user id is the only personal datum.
SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL,
    at TEXT NOT NULL,
    language TEXT NOT NULL,
    lesson_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    item_id TEXT,
    option_id TEXT,
    verdict TEXT,
    failed_check TEXT,
    seconds REAL
);
CREATE INDEX IF NOT EXISTS events_by_lesson ON events (lesson_id, kind, at);
CREATE INDEX IF NOT EXISTS events_by_user ON events (user_id, at);
"""

COLUMNS = (
    "user_id",
    "at",
    "language",
    "lesson_id",
    "kind",
    "item_id",
    "option_id",
    "verdict",
    "failed_check",
    "seconds",
)
Row = tuple[int, str, str, str, str, str | None, str | None, str | None, str | None, float | None]


def create_table(conn: sqlite3.Connection) -> None:
    """Create the events table and its indexes as contract 3 states them."""
    conn.executescript(SCHEMA)


def write(conn: sqlite3.Connection, rows: Iterator[Row], batch: int = 50_000) -> int:
    """Insert ``rows`` in the order of their time, as the bot records events; return how many were written.

    The rows are staged in a temporary database first and copied in time order, so the table holds them the
    way a live database does: learners interleaved, not one learner after another.
    """
    columns = ", ".join(COLUMNS)
    count = 0
    with tempfile.TemporaryDirectory(prefix="coursebot-events-") as folder:
        conn.execute("ATTACH DATABASE ? AS staging", (str(Path(folder) / "staging.sqlite3"),))
        try:
            conn.execute(f"CREATE TABLE staging.events ({columns})")
            insert = f"INSERT INTO staging.events VALUES ({', '.join('?' * len(COLUMNS))})"
            with conn:
                chunk: list[Row] = []
                for row in rows:
                    chunk.append(row)
                    if len(chunk) >= batch:
                        conn.executemany(insert, chunk)
                        count += len(chunk)
                        chunk.clear()
                conn.executemany(insert, chunk)
                count += len(chunk)
            with conn:
                conn.execute(f"INSERT INTO main.events ({columns}) SELECT {columns} FROM staging.events ORDER BY at")
        finally:
            conn.execute("DETACH DATABASE staging")
    return count


def stamp(when: datetime) -> str:
    """Return a moment as the events table stores it: UTC ISO-8601 with milliseconds."""
    return moment(when.isoformat())


# Where learners of each language come from, roughly: most read English.
LANGUAGES = {"en": 45, "ru": 15, "es": 10, "pt_BR": 10, "de": 6, "fr": 6, "ja": 5, "ar": 3}


@dataclass(frozen=True)
class Behaviour:
    """How the simulated learners behave; the defaults give a realistic drop-off."""

    keep_reading: float = 0.985  # chance to go on to the next slide
    hard_slide_every: int = 5  # every n-th slide loses more readers ...
    keep_reading_hard: float = 0.93  # ... this many go on
    next_lesson: float = 0.8  # chance that a learner who finished a lesson starts the next
    back: float = 0.04  # chance to go back one slide (and then forward again)
    practise: float = 0.65  # chance to try the exercise after the Quick Check
    leave_practice: float = 0.25  # chance to leave after each failed run
    skip_quiz: float = 0.05  # chance to read every slide and leave before the Quick Check
    max_runs: int = 6


def simulate(course: Course, learners: int, seed: int = 7, behaviour: Behaviour | None = None) -> Iterator[Row]:
    """Yield the events of ``learners`` learners taking ``course``, in each learner's time order."""
    b = behaviour or Behaviour()
    rng = random.Random(seed)
    languages = list(LANGUAGES)
    weights = list(LANGUAGES.values())
    start = datetime(2026, 9, 1, tzinfo=UTC)
    # Per question: how likely a first answer is right, and how the wrong ones spread (one is never chosen).
    skill = {}
    for lesson in course.lessons:
        for index, question in enumerate(lesson.quiz):
            right = rng.choice((0.97, 0.8, 0.65, 0.5, 0.25))
            wrong = [o for o in range(len(question.options)) if o != question.correct]
            spread = [rng.random() + 0.1 for _ in wrong]
            spread[-1] = 0.0  # a distractor nobody falls for
            skill[(lesson.id, index)] = (right, wrong, spread)
    for user_id in range(1, learners + 1):
        language = rng.choices(languages, weights)[0]
        now = start + timedelta(seconds=rng.uniform(0, 90 * 86_400))
        for lesson in course.lessons:
            if lesson.number > 1 and rng.random() > b.next_lesson:
                break
            events, now, finished = _lesson(rng, b, lesson, user_id, language, now, skill)
            yield from events
            if not finished:
                break
            now += timedelta(hours=rng.uniform(1, 72))


def _lesson(
    rng: random.Random,
    b: Behaviour,
    lesson: Lesson,
    user: int,
    language: str,
    now: datetime,
    skill: dict[tuple[str, int], tuple[float, list[int], list[float]]],
) -> tuple[list[Row], datetime, bool]:
    rows: list[Row] = []

    def event(
        kind: str,
        item: str | None = None,
        option: str | None = None,
        verdict: str | None = None,
        check: str | None = None,
        seconds: float | None = None,
    ) -> None:
        rows.append((user, stamp(now), language, lesson.id, kind, item, option, verdict, check, seconds))

    previous: float | None = None
    index = 0
    slides = lesson.slides
    while index < len(slides):
        event("slide", slides[index].id, seconds=previous)
        spent = rng.lognormvariate(2.8 + 0.03 * len(slides[index].text) / 10, 0.6)
        now += timedelta(seconds=spent)
        previous = round(spent, 3)
        if index > 0 and rng.random() < b.back:
            # Back to the slide before, a look, and Next again: the slide shown anew counts the look.
            event("back", slides[index - 1].id)
            glance = rng.lognormvariate(2.0, 0.5)
            now += timedelta(seconds=glance)
            event("slide", slides[index].id, seconds=round(glance, 3))
            spent = rng.lognormvariate(1.5, 0.5)
            now += timedelta(seconds=spent)
            previous = round(spent, 3)
        keep = b.keep_reading_hard if (index + 1) % b.hard_slide_every == 0 else b.keep_reading
        if index < len(slides) - 1 and rng.random() > keep:
            return rows, now, False
        index += 1
    if rng.random() < b.skip_quiz:
        return rows, now, False
    for number, question in enumerate(lesson.quiz):
        right, wrong, spread = skill[(lesson.id, number)]
        ids = [option_id(question, index) for index in range(len(question.options))]
        while True:
            now += timedelta(seconds=rng.lognormvariate(2.5, 0.5))
            if rng.random() < right:
                event("answer", question.id, ids[question.correct], "right")
                break
            event("answer", question.id, ids[rng.choices(wrong, spread)[0]], "wrong")
            if rng.random() < 0.5:
                break  # moves on; may retake below
    if rng.random() < 0.3:
        event("retake")
        now += timedelta(seconds=rng.uniform(5, 60))
    event("done")
    exercise = lesson.exercise
    if exercise is not None and rng.random() < b.practise:
        checks = [c.id for c in exercise.checks]
        hints = 0
        for run in range(1, b.max_runs + 1):
            now += timedelta(seconds=rng.lognormvariate(4.0, 0.7))
            if rng.random() < 0.35 + 0.15 * run:
                event("run", "exercise", verdict="passed")
                break
            if rng.random() < 0.1:
                event("run", "exercise", verdict=rng.choice(("error", "timeout")))
            else:
                failed = rng.choices(checks, [len(checks) - i for i in range(len(checks))])[0]
                event("run", "exercise", verdict="failed", check=failed)
            if hints < len(exercise.hints) and rng.random() < 0.5:
                hints += 1
                event("hint", str(hints))
            if rng.random() < b.leave_practice:
                event("leave")
                break
    return rows, now, True
