"""The progress schema as numbered migrations; PRAGMA user_version records the last one applied."""

from __future__ import annotations

# Append only: a migration that has shipped is never edited, a new number fixes it.
MIGRATIONS: tuple[str, ...] = (
    # 1: learners, their place in each lesson, every quiz poll and answer, seen updates.
    """
    CREATE TABLE learners (
        user_id            INTEGER PRIMARY KEY,
        chat_id            INTEGER NOT NULL,
        language           TEXT,              -- chosen with /language; NULL follows Telegram
        telegram_language  TEXT,              -- the last language_code Telegram sent
        lesson_id          TEXT,              -- the lesson the learner is in, NULL before the first
        reader_message_id  INTEGER,           -- the message edited in place as slides turn
        reader_view        TEXT,              -- what it shows: slide, quiz, result or menu
        quiz_lesson_id     TEXT,              -- the lesson whose Quick Check is under way
        quiz_queue         TEXT NOT NULL DEFAULT '',  -- question ids still to ask, space-separated
        quiz_poll_id       TEXT,              -- the poll awaiting an answer
        created_at         TEXT NOT NULL,
        updated_at         TEXT NOT NULL
    );
    CREATE TABLE lesson_progress (
        user_id         INTEGER NOT NULL REFERENCES learners(user_id) ON DELETE CASCADE,
        lesson_id       TEXT NOT NULL,
        slide           INTEGER NOT NULL DEFAULT 0,  -- the slide on screen, 0-based
        furthest_slide  INTEGER NOT NULL DEFAULT 0,  -- the furthest slide reached
        slides_read_at  TEXT,                        -- when the last slide was reached
        completed_at    TEXT,                        -- slides read and every question answered
        PRIMARY KEY (user_id, lesson_id)
    );
    CREATE TABLE quiz_polls (
        poll_id      TEXT PRIMARY KEY,
        user_id      INTEGER NOT NULL REFERENCES learners(user_id) ON DELETE CASCADE,
        lesson_id    TEXT NOT NULL,
        question_id  TEXT NOT NULL,
        message_id   INTEGER,
        sent_at      TEXT NOT NULL
    );
    CREATE TABLE quiz_answers (
        poll_id       TEXT PRIMARY KEY REFERENCES quiz_polls(poll_id) ON DELETE CASCADE,
        user_id       INTEGER NOT NULL REFERENCES learners(user_id) ON DELETE CASCADE,
        lesson_id     TEXT NOT NULL,
        question_id   TEXT NOT NULL,
        option_index  INTEGER NOT NULL,
        correct       INTEGER NOT NULL,
        answered_at   TEXT NOT NULL
    );
    CREATE INDEX quiz_answers_by_learner ON quiz_answers (user_id, lesson_id, question_id, answered_at);
    CREATE TABLE processed_updates (
        update_id     INTEGER PRIMARY KEY,
        processed_at  TEXT NOT NULL
    );
    """,
    # 2: practice exercises: the one in progress, hints shown, and every graded attempt.
    """
    ALTER TABLE learners ADD COLUMN practice_lesson_id TEXT;   -- the exercise the learner is on
    ALTER TABLE learners ADD COLUMN hints_shown INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE exercise_attempts (
        id            INTEGER PRIMARY KEY,
        user_id       INTEGER NOT NULL REFERENCES learners(user_id) ON DELETE CASCADE,
        lesson_id     TEXT NOT NULL,
        passed        INTEGER NOT NULL,
        attempted_at  TEXT NOT NULL
    );
    CREATE INDEX exercise_attempts_by_learner ON exercise_attempts (user_id, lesson_id, passed);
    """,
    # 3: drills (Parsons, fill in the blank, predict the output): each learner's attempt at each drill.
    # Lessons completed before drills existed keep their completed_at: nothing here touches it.
    """
    CREATE TABLE drill_progress (
        user_id     INTEGER NOT NULL REFERENCES learners(user_id) ON DELETE CASCADE,
        lesson_id   TEXT NOT NULL,
        drill_id    TEXT NOT NULL,
        placed      TEXT NOT NULL DEFAULT '',  -- Parsons: piece numbers in the order tapped, space-separated
        ruled_out   TEXT NOT NULL DEFAULT '',  -- choices tried and wrong in this attempt, space-separated
        turn        INTEGER NOT NULL DEFAULT 0,  -- counts every change; buttons carry it, so stale taps are known
        tries       INTEGER NOT NULL DEFAULT 0,  -- wrong answers, over every attempt
        done        INTEGER NOT NULL DEFAULT 0,  -- this attempt is answered right
        checked     INTEGER NOT NULL DEFAULT 0,  -- Parsons: the arrangement was checked and is wrong
        solved_at   TEXT,                        -- first answered right: what progress counts
        updated_at  TEXT NOT NULL,
        PRIMARY KEY (user_id, lesson_id, drill_id)
    );
    """,
)
