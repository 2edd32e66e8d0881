"""A progress database as coursebot wrote it at schema 2 (main before places by id): made by running the
migrations of that time, and filled by the very statements that code ran (copied from its storage/db.py).

Used to prove migration 3 and Database.adopt_course on real rows: learners mid-lesson, lessons done, a
Quick Check round awaiting a poll, answers recorded by the position tapped.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bot.storage.migrations import MIGRATIONS

SCHEMA = 2
NOW = "2026-01-05T12:00:00.000+00:00"


def create(path: Path) -> sqlite3.Connection:
    """Create a database at schema 2, the way Database._migrate applied migrations 1 and 2."""
    conn = sqlite3.connect(path, isolation_level=None)
    for number in range(1, SCHEMA + 1):
        conn.executescript(f"BEGIN IMMEDIATE;\n{MIGRATIONS[number - 1]};\nPRAGMA user_version = {number};\nCOMMIT;")
    return conn


def learner(conn: sqlite3.Connection, user_id: int, language: str = "en") -> None:
    conn.execute(
        "INSERT INTO learners (user_id, chat_id, telegram_language, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (user_id) DO UPDATE SET chat_id = excluded.chat_id,"
        " telegram_language = excluded.telegram_language, updated_at = excluded.updated_at",
        (user_id, user_id, language, NOW, NOW),
    )


def show_slide(conn: sqlite3.Connection, user_id: int, lesson_id: str, slide: int, last_slide: int = 12) -> None:
    conn.execute(
        "INSERT INTO lesson_progress (user_id, lesson_id, slide, furthest_slide, slides_read_at)"
        " VALUES (:user, :lesson, :slide, :slide, CASE WHEN :slide >= :last THEN :now END)"
        " ON CONFLICT (user_id, lesson_id) DO UPDATE SET slide = :slide,"
        " furthest_slide = max(furthest_slide, :slide),"
        " slides_read_at = coalesce(slides_read_at, CASE WHEN :slide >= :last THEN :now END)",
        {"user": user_id, "lesson": lesson_id, "slide": slide, "last": last_slide, "now": NOW},
    )
    conn.execute(
        "UPDATE learners SET lesson_id = ?, reader_message_id = coalesce(?, reader_message_id),"
        " reader_view = 'slide', updated_at = ? WHERE user_id = ?",
        (lesson_id, None, NOW, user_id),
    )


def complete_lesson(conn: sqlite3.Connection, user_id: int, lesson_id: str) -> None:
    conn.execute(
        "UPDATE lesson_progress SET completed_at = ? WHERE user_id = ? AND lesson_id = ?"
        " AND completed_at IS NULL AND slides_read_at IS NOT NULL",
        (NOW, user_id, lesson_id),
    )


def start_quiz(conn: sqlite3.Connection, user_id: int, lesson_id: str, question_ids: list[str]) -> None:
    conn.execute(
        "UPDATE learners SET quiz_lesson_id = ?, quiz_queue = ?, quiz_poll_id = NULL, updated_at = ? WHERE user_id = ?",
        (lesson_id, " ".join(question_ids), NOW, user_id),
    )


def poll_sent(conn: sqlite3.Connection, poll_id: str, user_id: int, lesson_id: str, question_id: str) -> None:
    conn.execute(
        "INSERT INTO quiz_polls (poll_id, user_id, lesson_id, question_id, message_id, sent_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (poll_id, user_id, lesson_id, question_id, 900, NOW),
    )
    conn.execute("UPDATE learners SET quiz_poll_id = ?, updated_at = ? WHERE user_id = ?", (poll_id, NOW, user_id))


def record_answer(
    conn: sqlite3.Connection, poll_id: str, user_id: int, lesson_id: str, question_id: str, index: int, correct: bool
) -> None:
    """Record an answer by the position tapped, popping its question as schema 2 did when it was awaited."""
    conn.execute(
        "INSERT OR IGNORE INTO quiz_answers"
        " (poll_id, user_id, lesson_id, question_id, option_index, correct, answered_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (poll_id, user_id, lesson_id, question_id, index, int(correct), NOW),
    )
    row = conn.execute(
        "SELECT quiz_queue FROM learners WHERE user_id = ? AND quiz_poll_id = ?", (user_id, poll_id)
    ).fetchone()
    if row is None:
        return
    remaining = " ".join(q for q in row[0].split() if q != question_id)
    conn.execute(
        "UPDATE learners SET quiz_queue = ?, quiz_poll_id = NULL,"
        " quiz_lesson_id = CASE WHEN ? = '' THEN NULL ELSE quiz_lesson_id END,"
        " updated_at = ? WHERE user_id = ?",
        (remaining, remaining, NOW, user_id),
    )
