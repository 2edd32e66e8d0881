"""Migration 3 on a database made by schema 2 with real rows: places and answers kept by position become ids.

The database is built by running migrations 1 and 2 and the statements schema-2 coursebot ran
(tests/schema2.py): learners mid-lesson, a lesson done, a Quick Check round awaiting its poll, answers
by the position tapped, and a learner in a lesson the migration does not know. Then it is opened by
today's code, migrated, and checked; and the real bot is started on it.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from bot.course.model import Question, Slide
from bot.storage.db import Database
from bot.storage.migrations import MIGRATIONS
from tests import schema2
from tests.conftest import LESSONS, course_content, running, with_lessons
from tests.journey import button_texts, position, send_and_wait, tap_and_wait_edit
from tests.test_storage import rows

ENGLISH = course_content().english
ADA, BOB, CYD, DEE = 9001, 9002, 9003, 9004


def _fill(path: Path) -> None:
    """Four learners, as schema-2 coursebot left them."""
    conn = schema2.create(path)
    for user in (ADA, BOB, CYD, DEE):
        schema2.learner(conn, user)
    # Ada read up to the 6th slide of lesson 1, then went back to the 3rd.
    for slide in (0, 1, 2, 3, 4, 5, 2):
        schema2.show_slide(conn, ADA, "requires-grad", slide)
    # Bob finished lesson 2 and is on the 8th slide of lesson 3.
    for slide in range(13):
        schema2.show_slide(conn, BOB, "backward", slide)
    schema2.complete_lesson(conn, BOB, "backward")
    for slide in range(8):
        schema2.show_slide(conn, BOB, "grad", slide)
    # Cyd answered lesson 1 (two wrong) and is in lesson 4's Quick Check, its second poll awaited.
    for question, index, correct in (
        ("result-is-leaf", 0, True),
        ("which-raises", 1, False),
        ("when-graph-built", 3, False),
    ):
        schema2.poll_sent(conn, f"p-{question}", CYD, "requires-grad", question)
        schema2.record_answer(conn, f"p-{question}", CYD, "requires-grad", question, index, correct)
    schema2.show_slide(conn, CYD, "no-grad", 12)
    schema2.start_quiz(conn, CYD, "no-grad", ["result-flag", "what-eval-does", "why-no-grad-update"])
    schema2.poll_sent(conn, "p-flag", CYD, "no-grad", "result-flag")
    schema2.record_answer(conn, "p-flag", CYD, "no-grad", "result-flag", 0, True)
    schema2.poll_sent(conn, "p-eval", CYD, "no-grad", "what-eval-does")
    # Dee is in a lesson of her operator's own, which the migration has never heard of.
    for slide in (0, 1, 2, 3, 1):
        schema2.show_slide(conn, DEE, "extra", slide, last_slide=9)
    schema2.poll_sent(conn, "p-extra", DEE, "extra", "extra-q")
    schema2.record_answer(conn, "p-extra", DEE, "extra", "extra-q", 1, False)
    conn.close()


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "coursebot.sqlite3"
    path.parent.mkdir()
    _fill(path)
    assert rows(path, "PRAGMA user_version") == [(2,)]
    return path


async def test_schema_2_places_and_answers_become_ids_of_the_course_as_it_shipped(old_db):
    db = await Database.open(old_db)
    try:
        assert await db.schema_version() == len(MIGRATIONS)
        ada = (await db.progress(ADA))["requires-grad"]
        assert (ada.slide_id, ada.furthest_slide_id, ada.slides_read) == (
            "tracking-spreads",
            "untracked-are-leaves",
            False,
        )
        bob = await db.progress(BOB)
        assert (bob["backward"].slide_id, bob["backward"].completed) == ("nothing-to-differentiate", True)
        assert (bob["grad"].slide_id, bob["grad"].furthest_slide_id) == ("stale-gradients", "stale-gradients")
        answers = await db.latest_answers(CYD)
        # By the file order of schema 2: "at-import" is an option this release replaced, and stays what was chosen.
        assert {q: (a.option_id, a.correct) for (_, q), a in answers.items()} == {
            "result-is-leaf": ("not-leaf", True),
            "which-raises": ("float-values", False),
            "when-graph-built": ("at-import", False),
            "result-flag": ("not-tracked", True),
        }
        cyd = await db.find_learner(CYD)
        assert (cyd.quiz_lesson_id, cyd.quiz_queue, cyd.quiz_poll_id) == (
            "no-grad",
            ("what-eval-does", "why-no-grad-update"),
            "p-eval",
        )
        awaited, answered, _superseded = await db.answered_poll("p-eval")
        assert not answered
        assert awaited.options == ("layer-modes", "no-recording", "freezes", "validation")  # as it was shown
        # A lesson the migration does not know keeps its positions until the bot adopts the lessons it serves.
        assert (await db.progress(DEE))["extra"].slide_id is None
        assert (await db.latest_answers(DEE))[("extra", "extra-q")].option_id is None
        assert rows(old_db, "SELECT count(*) FROM events") == [(0,)]
        assert rows(old_db, "SELECT count(*) FROM sqlite_master WHERE name = 'legacy_options'") == [(0,)]
    finally:
        await db.close()


async def test_positions_of_a_lesson_the_migration_did_not_know_are_converted_from_the_lessons_served(old_db):
    extra = replace(
        ENGLISH.lessons[0],
        id="extra",
        slides=tuple(Slide(f"x{i}", f"X {i}", "Text.") for i in range(10)),
        quiz=(Question("extra-q", "Which?", ("a", "b", "c"), 0, "Because.", option_ids=("ay", "bee", "sea")),),
    )
    db = await Database.open(old_db)
    try:
        adopted = await db.adopt_course(replace(ENGLISH, lessons=(*ENGLISH.lessons, extra)))
        assert adopted.rows_converted == 3  # Dee's place, her answer, her poll
        dee = (await db.progress(DEE))["extra"]
        assert (dee.slide_id, dee.furthest_slide_id) == ("x1", "x3")
        assert (await db.latest_answers(DEE))[("extra", "extra-q")].option_id == "bee"
        assert (await db.answered_poll("p-extra"))[0].options == ("ay", "bee", "sea")
        # Adopting the same lessons again changes nothing.
        assert await db.adopt_course(replace(ENGLISH, lessons=(*ENGLISH.lessons, extra))) == type(adopted)()
    finally:
        await db.close()


async def test_after_the_upgrade_the_bot_resumes_each_learner_where_they_were_even_with_a_slide_added(
    config, standin, old_db, tmp_path
):
    # The release that brings migration 3 may also change the lessons: here a slide is added in front.
    lessons = tmp_path / "lessons"
    shutil.copytree(LESSONS / "en", lessons / "en")
    path = lessons / "en" / "01-requires-grad.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["slides"].insert(0, {"id": "welcome", "title": "Welcome back", "text": "A slide added in this release."})
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    config = with_lessons(replace(config, db_path=old_db), lessons)
    ada, cyd = standin.learner(user_id=ADA), standin.learner(user_id=CYD)
    async with running(config) as bot:
        menu = await send_and_wait(ada, "/start")
        assert button_texts(menu)[0] == "▶ Continue: lesson 1, slide 4"
        resumed = await tap_and_wait_edit(ada, menu, "Continue")
        assert ENGLISH.lessons[0].slides[2].title in resumed["text"]  # tracking-spreads, one further down now
        assert position(resumed) == (4, 14)
        # Cyd's round resumes: the poll awaited before the upgrade comes again, and her answers go on by id.
        menu = await send_and_wait(cyd, "/lessons")
        since = cyd.cursor()
        await cyd.tap(menu, "Continue")
        lesson = ENGLISH.lesson("no-grad")
        for question_id in ("what-eval-does", "why-no-grad-update"):
            poll = await cyd.wait_message(lambda m: "poll" in m, since=since)
            assert poll["poll"]["question"] == lesson.question(question_id).question
            since = cyd.cursor()
            await cyd.answer_poll(poll, poll["poll"]["correct_option_ids"][0])
        result = await cyd.wait_message(lambda m: "reply_markup" in m, since=since)
        assert "3 of 3 correct" in result["text"]
        answers = await bot.db.latest_answers(CYD)
        assert answers[("no-grad", "what-eval-does")].option_id == "layer-modes"
        assert answers[("no-grad", "why-no-grad-update")].option_id == "not-recorded"
    # The only refusal: the old poll's message, which this stand-in never saw, could not be deleted; it was
    # deleted so that one poll per question is left to answer, and the bot went on without it.
    assert [(c.method, c.params["message_id"]) for c in standin.errors()] == [("deleteMessage", 900)]
