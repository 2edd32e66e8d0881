"""`coursebot stats` on PostgreSQL: the same learning events in an SQLite file and in PostgreSQL (a throwaway
cluster, tests/pg.py) give the same report, text and page, under every filter; a bad URL, an unreachable server
and a database without the bot's schema each get one line."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import psycopg
import pytest

from bench import events
from bot.cli import main
from bot.stats import html, query, report, text
from bot.stats.query import StatsError
from bot.storage.db import Database
from tests.pg import free_port
from tests.test_stats import CONTENT, LESSON, Log

# Learners simulated taking the course (slides, time, answers and retakes, runs, hints, lessons done), and drill
# answers written by hand: the simulation gives none.
LEARNERS = 300


def course_events() -> list[events.Row]:
    log = Log()
    first, second, _ = LESSON.drills
    for user, verdicts in ((1, ["right"]), (2, ["wrong", "right", "right"]), (3, ["wrong"]), (4, ["wrong", "wrong"])):
        for verdict in verdicts:
            log.add(10_000 + user, "drill", first.id, verdict=verdict, language="ru" if user % 2 else "en")
    log.add(10_001, "drill", second.id, verdict="wrong")
    return [*events.simulate(CONTENT.english, LEARNERS, seed=11), *log.rows]


def in_sqlite(path: Path, rows: list[events.Row]) -> Path:
    with sqlite3.connect(path) as conn:
        events.create_table(conn)
        events.write(conn, iter(rows))
        conn.executescript(query.INDEXES)
    conn.close()
    return path


def in_postgresql(url: str, rows: list[events.Row]) -> str:
    """Write ``rows`` into a database the bot has migrated (its events table and the report's indexes)."""

    async def migrate() -> None:
        await (await Database.open(url)).close()

    asyncio.run(migrate())
    columns = ", ".join(events.COLUMNS)
    with psycopg.connect(url) as conn, conn.cursor() as cursor:
        # In time order, as the bot records them.
        cursor.executemany(
            f"INSERT INTO events ({columns}) VALUES ({', '.join(['%s'] * len(events.COLUMNS))})",
            sorted(rows, key=lambda row: row[1]),
        )
    return url


@pytest.fixture(scope="module")
def rows() -> list[events.Row]:
    return course_events()


def stats(capsys: pytest.CaptureFixture[str], page: Path, *args: str) -> tuple[str, str]:
    """Run `coursebot stats` with ``args``; return what it printed (less the line naming the page) and the page."""
    assert main(["stats", *args, "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert out.endswith(f"wrote the report as a page to {page}\n")
    return out.removesuffix(f"wrote the report as a page to {page}\n"), page.read_text(encoding="utf-8")


LESSONS = CONTENT.english.lessons
FILTERS = [
    query.Filters(),
    query.Filters(lessons=(LESSONS[0].id, LESSONS[2].id)),
    query.Filters(since=query.moment("2026-10-01")),
    query.Filters(language="ru"),
    query.Filters(lessons=(LESSONS[1].id,), since=query.moment("2026-09-20T12:00:00+02:00"), language="en"),
]


def test_the_same_events_give_the_same_report_from_sqlite_and_from_postgresql(
    rows, pg_url, tmp_path, capsys, monkeypatch
):
    file = in_sqlite(tmp_path / "events.sqlite3", rows)
    url = in_postgresql(pg_url, rows)
    for chosen in FILTERS:
        # The whole report, figure by figure (the text rounds shares): the same from either engine, and so the
        # same text and page.
        on_file = report.build(CONTENT, query.read(file, chosen), chosen)
        on_postgresql = report.build(CONTENT, query.read(url, chosen), chosen)
        assert on_postgresql == on_file and on_postgresql.missing_indexes == (), chosen
        assert text.render(on_postgresql) == text.render(on_file) and html.render(on_postgresql) == html.render(on_file)
    # The command, given the URL with --db or in COURSEBOT_DB, prints what it prints for the file.
    filters = ("--lesson", "2", "--since", "2026-09-20T12:00:00+02:00", "--language", "en")
    from_file = stats(capsys, tmp_path / "file.html", "--db", str(file), *filters)
    assert stats(capsys, tmp_path / "pg.html", "--db", url, *filters) == from_file
    monkeypatch.setenv("COURSEBOT_DB", url)
    assert stats(capsys, tmp_path / "env.html", *filters) == from_file
    on_file = report.build(CONTENT, query.read(file, FILTERS[0]), FILTERS[0])
    # The report is about something: every kind of figure is there.
    lesson = on_file.lessons[0]
    assert lesson.started > 50 and lesson.finished > 0 and lesson.questions[0].learners > 0
    assert lesson.exercise is not None and lesson.exercise.learners > 0 and any(lesson.exercise.hints)
    assert (lesson.drills[0].learners, lesson.drills[0].right_first, lesson.drills[0].solved) == (4, 1, 2)
    assert any(slide.median_seconds for slide in lesson.slides)


def test_stats_on_postgresql_says_in_one_line_what_stops_it(pg_url, capsys):
    unreachable = f"postgresql://coursebot:secret@127.0.0.1:{free_port()}/coursebot"
    assert main(["stats", "--db", unreachable]) == 1
    err = capsys.readouterr().err
    assert err.startswith("coursebot: cannot reach the database postgresql://coursebot:***@127.0.0.1:"), err
    assert err.count("\n") == 1 and "secret" not in err
    cases = [
        (
            "postgresql://coursebot:secret@[::1/coursebot",
            "postgresql://coursebot:***@[::1/coursebot is not a PostgreSQL URL",
        ),
        # A database the bot never started on: no schema, so no events.
        (pg_url, f"{pg_url} has no learning events table: the bot creates it when it starts"),
    ]
    for url, message in cases:
        with pytest.raises(StatsError) as refused:
            query.read(url, query.Filters())
        said = str(refused.value)
        assert said.startswith(message) and "\n" not in said and "secret" not in said, said
