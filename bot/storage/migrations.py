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
    # 3: places, quiz options and rounds by id, never by position (issue 13), so an edit of the lessons moves
    # nobody. Positions written by schema 2 are converted here for the course as it shipped then (the
    # slide and option order below is that course's); those of other lessons are converted from the
    # lessons being served when the bot next starts (Database.adopt_course), which also keeps slide_order.
    """
    CREATE TABLE slide_order (
        lesson_id  TEXT NOT NULL,
        slide_id   TEXT NOT NULL,
        position   INTEGER,  -- 0-based place in the lesson as last served; NULL once the slide was removed
        successor  TEXT,     -- for a removed slide: the next slide that remained then (NULL: none did)
        PRIMARY KEY (lesson_id, slide_id)
    );
    INSERT INTO slide_order (lesson_id, position, slide_id) VALUES
        ('requires-grad', 0, 'what-autograd-does'), ('requires-grad', 1, 'off-by-default'),
        ('requires-grad', 2, 'tracking-spreads'), ('requires-grad', 3, 'grad-fn'), ('requires-grad', 4, 'leaf-tensors'),
        ('requires-grad', 5, 'untracked-are-leaves'), ('requires-grad', 6, 'graph-of-nodes'),
        ('requires-grad', 7, 'dynamic-graph'), ('requires-grad', 8, 'requires-grad-in-place'),
        ('requires-grad', 9, 'floats-only'), ('requires-grad', 10, 'not-differentiable'),
        ('requires-grad', 11, 'detach'), ('requires-grad', 12, 'parameters-track'),
        ('backward', 0, 'one-call'), ('backward', 1, 'check-by-hand'), ('backward', 2, 'chain-rule'),
        ('backward', 3, 'tiny-loss'), ('backward', 4, 'scalar-only'), ('backward', 5, 'reduce-first'),
        ('backward', 6, 'gradient-argument'), ('backward', 7, 'graph-freed'), ('backward', 8, 'retain-graph'),
        ('backward', 9, 'fresh-graph'), ('backward', 10, 'autograd-grad'), ('backward', 11, 'second-derivative'),
        ('backward', 12, 'nothing-to-differentiate'),
        ('grad', 0, 'grad-attribute'), ('grad', 1, 'none-at-first'), ('grad', 2, 'leaves-only'),
        ('grad', 3, 'retain-grad'), ('grad', 4, 'gradients-add-up'), ('grad', 5, 'why-accumulate'),
        ('grad', 6, 'scale-chunks'), ('grad', 7, 'stale-gradients'), ('grad', 8, 'optimizer-zero-grad'),
        ('grad', 9, 'zeros-instead'),
        ('grad', 10, 'clear-by-hand'), ('grad', 11, 'loop-order'), ('grad', 12, 'debug-with-grads'),
        ('no-grad', 0, 'recording-off'), ('no-grad', 1, 'why-it-helps'), ('no-grad', 2, 'evaluation'),
        ('no-grad', 3, 'decorator'), ('no-grad', 4, 'scope-ends'), ('no-grad', 5, 'no-backward'),
        ('no-grad', 6, 'manual-update'), ('no-grad', 7, 'in-place-error'), ('no-grad', 8, 'inference-mode'),
        ('no-grad', 9, 'inference-tensors'), ('no-grad', 10, 'eval-is-different'), ('no-grad', 11, 'enable-grad'),
        ('no-grad', 12, 'set-grad-enabled');
    CREATE TABLE legacy_options (lesson_id TEXT, question_id TEXT, options TEXT);
    INSERT INTO legacy_options (lesson_id, question_id, options) VALUES
        ('requires-grad', 'result-is-leaf', 'not-leaf leaf no-value raises'),
        ('requires-grad', 'which-raises', 'int-values float-values flag-in-place float64'),
        ('requires-grad', 'when-graph-built', 'during-ops at-backward at-definition at-import'),
        ('backward', 'square-grad', 'six nine three no-grad'),
        ('backward', 'second-backward', 'raises replaces nothing zeroes'),
        ('backward', 'vector-output', 'ones-like plain retain-graph grad-backward'),
        ('grad', 'zero-grad-default', 'to-none to-zeros reset-weights reset-lr'),
        ('grad', 'second-pass', 'twelve six zero no-grad'),
        ('grad', 'chunk-scaling', 'divide-loss zero-between scale-lr nothing'),
        ('no-grad', 'result-flag', 'not-tracked tracked like-w raises'),
        ('no-grad', 'what-eval-does', 'layer-modes no-recording freezes validation'),
        ('no-grad', 'why-no-grad-update', 'not-recorded gpu grad-cleared zeroes-after');

    ALTER TABLE lesson_progress ADD COLUMN slide_id TEXT;           -- the slide on screen
    ALTER TABLE lesson_progress ADD COLUMN furthest_slide_id TEXT;  -- the furthest slide reached
    -- slide and furthest_slide (positions) stay only for rows of lessons not converted yet.
    UPDATE lesson_progress SET
        slide_id = (SELECT o.slide_id FROM slide_order AS o WHERE o.lesson_id = lesson_progress.lesson_id
            AND o.position = min(lesson_progress.slide,
                (SELECT max(m.position) FROM slide_order AS m WHERE m.lesson_id = lesson_progress.lesson_id))),
        furthest_slide_id = (SELECT o.slide_id FROM slide_order AS o WHERE o.lesson_id = lesson_progress.lesson_id
            AND o.position = min(lesson_progress.furthest_slide,
                (SELECT max(m.position) FROM slide_order AS m WHERE m.lesson_id = lesson_progress.lesson_id)));

    -- option_index stays: the position tapped in the poll as shown.
    ALTER TABLE quiz_answers ADD COLUMN option_id TEXT;
    -- The nth word of a legacy_options row, n = option_index: the id of the option at that position.
    WITH RECURSIVE words (lesson_id, question_id, n, option_id, rest) AS (
        SELECT lesson_id, question_id, 0,
            CASE WHEN instr(options, ' ') > 0 THEN substr(options, 1, instr(options, ' ') - 1) ELSE options END,
            CASE WHEN instr(options, ' ') > 0 THEN substr(options, instr(options, ' ') + 1) ELSE '' END
        FROM legacy_options
        UNION ALL
        SELECT lesson_id, question_id, n + 1,
            CASE WHEN instr(rest, ' ') > 0 THEN substr(rest, 1, instr(rest, ' ') - 1) ELSE rest END,
            CASE WHEN instr(rest, ' ') > 0 THEN substr(rest, instr(rest, ' ') + 1) ELSE '' END
        FROM words WHERE rest != ''
    )
    UPDATE quiz_answers SET option_id = (SELECT w.option_id FROM words AS w WHERE w.lesson_id = quiz_answers.lesson_id
        AND w.question_id = quiz_answers.question_id AND w.n = quiz_answers.option_index);

    ALTER TABLE quiz_polls ADD COLUMN options TEXT;  -- the option ids in the order the poll showed them
    -- Schema 2 showed options in file order.
    UPDATE quiz_polls SET options = (SELECT o.options FROM legacy_options AS o
        WHERE o.lesson_id = quiz_polls.lesson_id AND o.question_id = quiz_polls.question_id);
    ALTER TABLE learners ADD COLUMN quiz_seed INTEGER NOT NULL DEFAULT 0;  -- the round's shuffle
    DROP TABLE legacy_options;
    -- What is left to convert at start, found without a scan (empty once converted, so they cost no writes).
    CREATE INDEX lesson_progress_by_position ON lesson_progress (lesson_id) WHERE slide_id IS NULL;
    CREATE INDEX quiz_answers_by_position ON quiz_answers (lesson_id, question_id) WHERE option_id IS NULL;
    CREATE INDEX quiz_polls_in_file_order ON quiz_polls (lesson_id, question_id) WHERE options IS NULL;
    """,
    # 4: learning events (issue 13): one row per thing a learner did, for `coursebot stats`. The Telegram user
    # id is the only personal datum; rows older than COURSEBOT_EVENTS_DAYS are purged (bot.events).
    """
    CREATE TABLE events (
        id            INTEGER PRIMARY KEY,
        user_id       INTEGER NOT NULL,
        at            TEXT NOT NULL,  -- UTC, ISO 8601 to the millisecond
        language      TEXT NOT NULL,  -- the course language shown
        lesson_id     TEXT NOT NULL,
        kind          TEXT NOT NULL,  -- slide, back, answer, retake, run, hint, leave, done, drill
        item_id       TEXT,           -- the slide, question, exercise, hint number or drill
        option_id     TEXT,           -- answer: the option chosen
        verdict       TEXT,           -- answer, drill: right or wrong; run: passed, failed, error, timeout...
        failed_check  TEXT,           -- run: the first check that failed
        seconds       REAL            -- slide: time on the learner's previous slide of this lesson
    );
    CREATE INDEX events_by_lesson ON events (lesson_id, kind, at);
    CREATE INDEX events_by_user ON events (user_id, at);
    """,
    # 5: the inbox: every update stored before Telegram is told it arrived, pending until handled, replayed at
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
    # 6: drills (Parsons, fill in the blank, predict the output): each learner's attempt at each drill.
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
    # 7: the indexes `coursebot stats` reads the learning events through (bot.stats.query): one covering index for
    # every count, one for the time learners spent on slides.
    """
    CREATE INDEX IF NOT EXISTS events_report
        ON events (kind, lesson_id, item_id, user_id, at, language, verdict, option_id, failed_check);
    CREATE INDEX IF NOT EXISTS events_slide_seconds
        ON events (lesson_id, item_id, seconds, at, language) WHERE kind = 'slide' AND seconds IS NOT NULL;
    """,
    # 8: quiz polls on their way out. A row is written before a poll is sent and deleted once the sent poll is
    # recorded, so a row left behind is a poll Telegram may have shown although the bot died (or lost the
    # reply) before recording it; an answer to an unknown poll is matched to it (Database.adopt_poll).
    """
    CREATE TABLE quiz_sends (
        id           INTEGER PRIMARY KEY,
        user_id      INTEGER NOT NULL REFERENCES learners(user_id) ON DELETE CASCADE,
        lesson_id    TEXT NOT NULL,
        question_id  TEXT NOT NULL,
        options      TEXT NOT NULL,  -- the option ids in the order the poll shows them
        started_at   TEXT NOT NULL
    );
    CREATE INDEX quiz_sends_by_user ON quiz_sends (user_id, id);
    """,
    # 9: the update that caused each learning event and graded attempt, so an update replayed after a crash stores
    # nothing twice (bot.storage.outcomes writes an update's outcome under its key). Rows from before have none.
    # An event is unique by (update, kind, lesson, item): one update records one slide, one answer, one run...
    """
    ALTER TABLE events ADD COLUMN update_id INTEGER;
    CREATE UNIQUE INDEX events_once ON events (user_id, update_id, kind, lesson_id, coalesce(item_id, ''))
        WHERE update_id IS NOT NULL;
    ALTER TABLE exercise_attempts ADD COLUMN update_id INTEGER;
    CREATE UNIQUE INDEX exercise_attempts_once ON exercise_attempts (user_id, update_id, lesson_id)
        WHERE update_id IS NOT NULL;
    """,
    # 10: what brings a learner back (issue 18). Review cards as plain columns (bot.retention.review), the review
    # log appended to and never changed, the reminder schedule as data (the next reminder's time, indexed, and one
    # row per reminder keyed by learner and local day, so none is sent twice), activity for the learner's habit,
    # and the days that count in the streak. Times are whole seconds since the Unix epoch, UTC.
    """
    CREATE TABLE review_cards (
        card_id      INTEGER PRIMARY KEY,  -- bot.retention.review.card_id: from the learner and the item
        user_id      INTEGER NOT NULL REFERENCES learners(user_id) ON DELETE CASCADE,
        lesson_id    TEXT NOT NULL,
        kind         TEXT NOT NULL,        -- question or drill
        item_id      TEXT NOT NULL,
        state        INTEGER NOT NULL,     -- fsrs.State: 1 learning, 2 review, 3 relearning
        step         INTEGER,
        stability    REAL,
        difficulty   REAL,
        due          INTEGER NOT NULL,
        last_review  INTEGER
    );
    CREATE UNIQUE INDEX review_cards_by_item ON review_cards (user_id, lesson_id, kind, item_id);
    CREATE INDEX review_cards_due ON review_cards (user_id, due);
    CREATE TABLE review_log (
        id           INTEGER PRIMARY KEY,
        card_id      INTEGER NOT NULL,
        user_id      INTEGER NOT NULL,
        rating       INTEGER NOT NULL,     -- fsrs.Rating: 1 Again, 3 Good
        reviewed_at  INTEGER NOT NULL,
        duration_ms  INTEGER,
        update_id    INTEGER               -- the update that answered: a replay appends nothing twice
    );
    CREATE UNIQUE INDEX review_log_once ON review_log (card_id, update_id) WHERE update_id IS NOT NULL;
    CREATE TABLE review_polls (
        poll_id   TEXT PRIMARY KEY,
        user_id   INTEGER NOT NULL REFERENCES learners(user_id) ON DELETE CASCADE,
        card_id   INTEGER NOT NULL,
        options   TEXT NOT NULL,           -- the option ids in the order the poll showed them
        sent_at   INTEGER NOT NULL
    );
    ALTER TABLE learners ADD COLUMN review_seed INTEGER NOT NULL DEFAULT 0;  -- this review's shuffle
    ALTER TABLE learners ADD COLUMN reminders TEXT NOT NULL DEFAULT 'unasked';  -- unasked offered on off paused blocked
    ALTER TABLE learners ADD COLUMN remind_at INTEGER;       -- the next reminder (UTC); NULL: none planned
    ALTER TABLE learners ADD COLUMN remind_snoozed INTEGER NOT NULL DEFAULT 0;  -- remind_at is a snoozed one
    ALTER TABLE learners ADD COLUMN reminder_shift INTEGER NOT NULL DEFAULT 0;  -- minutes moved with /settings
    ALTER TABLE learners ADD COLUMN reminders_ignored INTEGER NOT NULL DEFAULT 0;  -- in a row, no activity since
    ALTER TABLE learners ADD COLUMN last_reminder INTEGER;
    ALTER TABLE learners ADD COLUMN utc_offset INTEGER;      -- minutes, from the web chat's time zone
    ALTER TABLE learners ADD COLUMN completion_card_at INTEGER;  -- when the completion card went out (once)
    CREATE INDEX learners_remind_at ON learners (remind_at) WHERE remind_at IS NOT NULL;
    CREATE TABLE reminders_sent (
        user_id     INTEGER NOT NULL,
        day         TEXT NOT NULL,         -- the learner's local day (bot.retention.reminders.local_day)
        snoozed     INTEGER NOT NULL DEFAULT 0,
        claimed_at  INTEGER NOT NULL,
        outcome     TEXT,                  -- sent, blocked, failed, paused; NULL while on its way
        PRIMARY KEY (user_id, day, snoozed)
    ) WITHOUT ROWID;
    CREATE INDEX reminders_on_their_way ON reminders_sent (claimed_at) WHERE outcome IS NULL;
    CREATE TABLE activity (
        user_id  INTEGER NOT NULL,
        at       INTEGER NOT NULL,         -- at most one row per ACTIVITY_STEP; kept reminders.HISTORY
        PRIMARY KEY (user_id, at)
    ) WITHOUT ROWID;
    CREATE TABLE streak_days (
        user_id  INTEGER NOT NULL,
        day      TEXT NOT NULL,            -- a local day on which the learner finished something
        PRIMARY KEY (user_id, day)
    ) WITHOUT ROWID;
    """,
    # 11: claims on pending updates (issue 17): the process handling an update and until when its lease runs; it
    # renews the lease while it runs. A replay takes only updates nobody holds, or whose lease ran out: a replica
    # starting on a shared database leaves alone what a live replica is handling. NULL: claimed by nobody.
    """
    ALTER TABLE inbox ADD COLUMN owner TEXT;
    ALTER TABLE inbox ADD COLUMN lease_until TEXT;
    """,
    # 12: activity noted in the update's own write (bot.changes.ActivityNoted), keyed by the update that noted it:
    # a replay of that update, however late, notes nothing again. NULL: noted before, or by no inbox update.
    """
    ALTER TABLE activity ADD COLUMN update_id INTEGER;
    CREATE UNIQUE INDEX activity_once ON activity (user_id, update_id) WHERE update_id IS NOT NULL;
    """,
    # 13: the outbox (issue 17): the replies an update shows, stored in its one transaction with what it changes and
    # sent after the commit, each marked once sent. A replay of an update that stored replies sends those not marked
    # sent and never decides again (the state it was decided over has moved on). Kept as long as the inbox keeps
    # the update's id (bot.storage.inbox.forget_updates).
    """
    CREATE TABLE outbox (
        update_id   INTEGER NOT NULL,
        position    INTEGER NOT NULL,      -- the order the update shows them in
        user_id     INTEGER NOT NULL,
        chat_id     INTEGER NOT NULL,
        kind        TEXT NOT NULL,         -- send (a new message), edit (text and buttons), retire (buttons off)
        message_id  INTEGER,               -- edit, retire: the message changed; once sent: the message showing it
        text        TEXT,                  -- HTML
        buttons     TEXT,                  -- the inline keyboard as Telegram's JSON; NULL: none
        reader      TEXT,                  -- the message showing it becomes the one edited in place, showing this
        supersedes  INTEGER NOT NULL DEFAULT 0,  -- takes the buttons off the last screen that superseded
        stored_at   TEXT NOT NULL,
        sent_at     TEXT,                  -- NULL: not known to be sent
        PRIMARY KEY (update_id, position)
    );
    CREATE INDEX outbox_stored ON outbox (stored_at);
    """,
)
