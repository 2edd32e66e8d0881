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
    # 3: the inbox: every update stored before Telegram is told it arrived, pending until handled, replayed at
    # start after a crash; its handled rows drop Telegram's redeliveries, which processed_updates did.
    """
    CREATE TABLE inbox (
        update_id    INTEGER PRIMARY KEY,
        payload      TEXT,                 -- the update as Telegram sent it (JSON); NULL once handled
        received_at  TEXT NOT NULL,
        state        TEXT NOT NULL DEFAULT 'pending',  -- pending, handled, or abandoned: it crashed the bot
        replays      INTEGER NOT NULL DEFAULT 0,       -- starts that found it pending and handled it again
        alone        INTEGER NOT NULL DEFAULT 0,       -- 1 while a start handles it alone, watching it
        crashes      INTEGER NOT NULL DEFAULT 0,       -- times the bot died while handling it alone
        handled_at   TEXT
    );
    CREATE INDEX inbox_pending ON inbox (update_id) WHERE state = 'pending';
    INSERT INTO inbox (update_id, received_at, state, handled_at)
        SELECT update_id, processed_at, 'handled', processed_at FROM processed_updates;
    DROP TABLE processed_updates;
    """,
)
