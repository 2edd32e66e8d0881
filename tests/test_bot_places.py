"""Places survive content changes: a learner mid-lesson, then an author's edit of the lesson files, then a
restart or a reload; the learner is on the slide they were on, and a button on an old message lands on the slide it
named.

Each test runs the real bot against the stand-in on a copy of the English lessons, edits the copy between
two runs of the bot (the stand-in, and so the learner's chat, lives on across both), and checks where the
learner is, as they see it and as the database has it.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.errors import StorageError
from bot.i18n import I18n, _
from bot.library.load import load_valid
from tests.conftest import LESSONS, LOCALES, course_content, running, with_lessons
from tests.journey import (
    answer_quiz,
    button_texts,
    position,
    read_slides,
    send_and_wait,
    solve_drills,
    tap_and_wait_edit,
)

ENGLISH = course_content().english
FIRST, SECOND = ENGLISH.lessons[0], ENGLISH.lessons[1]
NEW_SLIDE = {"id": "a-new-slide", "title": "A slide the author added", "text": "Inserted after the learner began."}


@pytest.fixture
def lessons(tmp_path: Path) -> Path:
    target = tmp_path / "lessons"
    shutil.copytree(LESSONS / "en", target / "en")
    return target


def edit(lessons: Path, name: str, change: Callable[[dict[str, Any]], object]) -> None:
    """Load a lesson file (or course.yaml) of the copy, let ``change`` edit it, and write it back."""
    path = lessons / "en" / f"{name}.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")


def slide_ids(data: dict[str, Any]) -> list[str]:
    return [slide["id"] for slide in data["slides"]]


def title_of(lesson_id: str, slide_id: str) -> str:
    lesson = ENGLISH.lesson(lesson_id)
    return lesson.slides[lesson.slide_index(slide_id)].title


async def _on_slide(learner, number: int) -> dict:
    """Open the course and turn to slide ``number`` (1-based) of the first lesson."""
    menu = await send_and_wait(learner, "/start")
    slide = await tap_and_wait_edit(learner, menu, "Start the course")
    for _turn in range(number - 1):
        slide = await tap_and_wait_edit(learner, slide, "Next")
    return slide


async def _continue(learner) -> tuple[dict, dict]:
    menu = await send_and_wait(learner, "/lessons")
    return menu, await tap_and_wait_edit(learner, menu, "Continue")


async def test_a_slide_inserted_before_the_learner_leaves_them_on_the_same_slide(config, standin, lessons):
    config = with_lessons(config, lessons)
    ada = standin.learner(user_id=8101)
    async with running(config):
        old = await _on_slide(ada, 6)  # untracked-are-leaves
    edit(lessons, "01-requires-grad", lambda d: d["slides"].insert(1, NEW_SLIDE))
    async with running(config) as bot:
        menu, resumed = await _continue(ada)
        assert button_texts(menu)[0] == "▶ Continue: lesson 1, slide 7"  # one more slide before it now
        assert title_of(FIRST.id, "untracked-are-leaves") in resumed["text"]
        assert position(resumed) == (7, 14)
        # The buttons of the message from before the edit name slides by id: Back lands on the slide before.
        back = await tap_and_wait_edit(ada, old, "Back")
        assert title_of(FIRST.id, "leaf-tensors") in back["text"]
        await standin.settle()
        progress = (await bot.db.progress(8101))[FIRST.id]
        assert (progress.slide_id, progress.furthest_slide_id) == ("leaf-tensors", "untracked-are-leaves")
    assert standin.errors() == []


async def test_a_slide_moved_leaves_the_learner_on_it_and_its_old_buttons_name_the_same_slides(
    config, standin, lessons
):
    config = with_lessons(config, lessons)
    ada = standin.learner(user_id=8102)
    async with running(config):
        old = await _on_slide(ada, 4)  # grad-fn; Next names leaf-tensors
    edit(lessons, "01-requires-grad", lambda d: d["slides"].insert(10, d["slides"].pop(3)))  # grad-fn to 11th
    async with running(config):
        _, resumed = await _continue(ada)
        assert title_of(FIRST.id, "grad-fn") in resumed["text"]
        assert position(resumed)[0] == 11
        nxt = await tap_and_wait_edit(ada, old, "Next")
        assert title_of(FIRST.id, "leaf-tensors") in nxt["text"]  # the slide the button named, now the 4th
        assert position(nxt)[0] == 4
    assert standin.errors() == []


async def test_the_learners_slide_removed_sends_them_to_the_next_that_remains_and_so_does_its_button(
    config, standin, lessons
):
    config = with_lessons(config, lessons)
    ada = standin.learner(user_id=8103)
    async with running(config):
        before = await _on_slide(ada, 5)  # leaf-tensors; its Next names untracked-are-leaves
        await tap_and_wait_edit(ada, before, "Next")  # now on untracked-are-leaves
    removed = {"untracked-are-leaves", "graph-of-nodes"}  # the learner's slide and the one after it
    edit(lessons, "01-requires-grad", lambda d: d.update(slides=[s for s in d["slides"] if s["id"] not in removed]))
    async with running(config) as bot:
        assert (await bot.db.progress(8103))[FIRST.id].slide_id == "dynamic-graph"
        _, resumed = await _continue(ada)
        assert title_of(FIRST.id, "dynamic-graph") in resumed["text"]
        assert position(resumed) == (6, 11)
        # The stale message (edited since, so take it as Telegram kept it) still holds a button to the removed slide.
        query = await ada.tap(before, callback_data=f"s:{FIRST.id}:untracked-are-leaves")
        answer = await ada.wait_callback_answer(query)
        assert "taken out of the lesson" in answer["text"]
        await standin.settle()
        assert title_of(FIRST.id, "dynamic-graph") in ada.message(before["message_id"])["text"]
    assert standin.errors() == []


async def test_a_lesson_removed_leaves_a_menu_and_continue_that_make_sense(config, standin, lessons):
    config = with_lessons(config, lessons)
    ada = standin.learner(user_id=8104)
    async with running(config):
        slide = await _on_slide(ada, 1)
        last = await read_slides(ada, slide, FIRST)
        result = await answer_quiz(ada, last, FIRST)
        solved = await solve_drills(ada, result, FIRST)
        in_second = await tap_and_wait_edit(ada, solved, "Next lesson")
        in_second = await tap_and_wait_edit(ada, in_second, "Next")
    edit(lessons, "course", lambda d: d["lessons"].remove("02-backward"))
    (lessons / "en" / "02-backward.yaml").unlink()
    async with running(config):
        menu, resumed = await _continue(ada)
        assert "1. " in menu["text"] and "3. " in menu["text"] and "4. " not in menu["text"]
        assert SECOND.title not in menu["text"]
        # Lesson 1 is done, the lesson she was in is gone: Continue starts what is now lesson 2.
        assert button_texts(menu)[0] == "▶ Continue: lesson 2, slide 1"
        assert ENGLISH.lessons[2].slides[0].title in resumed["text"]
        query = await ada.tap(in_second, "Next")
        answer = await ada.wait_callback_answer(query)
        assert "no longer in the course" in answer["text"]
    assert standin.errors() == []


async def test_lessons_reordered_keep_the_learner_in_their_lesson_under_its_new_number(config, standin, lessons):
    config = with_lessons(config, lessons)
    ada = standin.learner(user_id=8105)
    async with running(config):
        slide = await _on_slide(ada, 1)
        await tap_and_wait_edit(ada, await tap_and_wait_edit(ada, slide, "Next"), "Next")  # lesson 1, slide 3
    edit(lessons, "course", lambda d: d["lessons"].reverse())
    async with running(config):
        menu, resumed = await _continue(ada)
        assert button_texts(menu)[0] == "▶ Continue: lesson 4, slide 3"
        assert FIRST.slides[2].title in resumed["text"]
        assert "Lesson 4 of 4" in resumed["text"]
    assert standin.errors() == []


async def test_a_question_removed_or_changed_leaves_the_other_answers_standing(config, standin, lessons):
    config = with_lessons(config, lessons)
    ada = standin.learner(user_id=8106)
    async with running(config):
        last = await read_slides(ada, await _on_slide(ada, 1), FIRST)
        result = await answer_quiz(ada, last, FIRST, wrong={1})  # which-raises wrong, the others right
        await solve_drills(ada, result, FIRST)

    def change(data: dict[str, Any]) -> None:
        data["quiz"] = [q for q in data["quiz"] if q["id"] != "result-is-leaf"]
        data["quiz"][-1]["question"] = "When is the graph recorded?"  # same id, reworded

    edit(lessons, "01-requires-grad", change)
    async with running(config) as bot:
        report = await send_and_wait(ada, "/progress")
        assert "1 of 4 lessons done" in report["text"]
        # Of the 2 questions met that are left, the reworded one still counts as right, which-raises as wrong.
        assert "Quick Check score: 1 of 2 questions correct" in report["text"]
        menu = await send_and_wait(ada, "/lessons")
        retake_from = await tap_and_wait_edit(ada, menu, "1. ")
        assert position(retake_from) == (len(FIRST.slides), len(FIRST.slides))
        # The lesson is done: its last slide offers the way on, the practice and the next lesson, one tap each.
        assert [t.split(":")[0] for t in button_texts(retake_from)] == [
            "◀ Back",
            "Quick Check ▶",
            "🧩 Code drills ▶",
            "💻 Practice",
            "Next lesson",
            "☰ Lessons",
        ]
        answers = await bot.db.latest_answers(8106)
        assert answers[(FIRST.id, "when-graph-built")].option_id == "during-ops"
    assert standin.errors() == []


async def test_a_question_removed_mid_round_is_skipped_and_the_round_ends(config, standin, lessons):
    config = with_lessons(config, lessons)
    ada = standin.learner(user_id=8107)
    async with running(config):
        last = await read_slides(ada, await _on_slide(ada, 1), FIRST)
        poll = await tap_and_wait_edit_poll(ada, last)
        since = ada.cursor()
        await ada.answer_poll(poll, poll["poll"]["correct_option_ids"][0])
        second = await ada.wait_message(lambda m: "poll" in m, since=since)
    edit(lessons, "01-requires-grad", lambda d: d.update(quiz=d["quiz"][:2]))  # when-graph-built goes
    async with running(config) as bot:
        since = ada.cursor()
        await ada.answer_poll(second, second["poll"]["correct_option_ids"][0])
        result = await ada.wait_message(lambda m: "reply_markup" in m, since=since)
        assert "2 of 2 correct" in result["text"]
        await solve_drills(ada, result, FIRST)
        assert (await bot.db.progress(8107))[FIRST.id].completed
    assert standin.errors() == []


async def tap_and_wait_edit_poll(learner, last_slide: dict) -> dict:
    since = learner.cursor()
    await learner.tap(last_slide, "Quick Check")
    return await learner.wait_message(lambda m: "poll" in m, since=since)


# The same, with the bot reloading its lessons while it runs (no restart).


async def test_a_reload_moves_a_learner_off_a_removed_slide_and_shows_them_where_they_are(config, standin, lessons):
    config = with_lessons(config, lessons)
    ada = standin.learner(user_id=8108)
    async with running(config) as bot:
        before = await _on_slide(ada, 5)  # leaf-tensors
        reading = await tap_and_wait_edit(ada, before, "Next")  # untracked-are-leaves, in the same message

        def change(data: dict[str, Any]) -> None:
            data["slides"] = [s for s in data["slides"] if s["id"] != "untracked-are-leaves"]
            data["slides"].insert(0, NEW_SLIDE)

        edit(lessons, "01-requires-grad", change)
        refreshed = asyncio.ensure_future(ada.wait_edit(reading["message_id"]))
        outcome = await bot.reload()
        assert outcome.accepted
        # Reading it when it went: the message turns to the next slide that remains, at its new position.
        shown = await refreshed
        assert title_of(FIRST.id, "graph-of-nodes") in shown["text"]
        assert position(shown) == (7, 13)
        await standin.settle()
        progress = (await bot.db.progress(8108))[FIRST.id]
        assert (progress.slide_id, progress.furthest_slide_id) == ("graph-of-nodes", "leaf-tensors")
        nxt = await tap_and_wait_edit(ada, shown, "Next")
        assert title_of(FIRST.id, "dynamic-graph") in nxt["text"]
    assert standin.errors() == []


async def test_a_reload_the_database_cannot_follow_is_refused_and_the_lessons_in_use_stay(
    config, standin, lessons, monkeypatch
):
    config = with_lessons(config, lessons)
    async with running(config) as bot:
        serving = bot.library.current

        async def fails(course: object) -> None:
            raise StorageError("the database is locked")

        monkeypatch.setattr(bot.db, "adopt_course", fails)
        edit(lessons, "01-requires-grad", lambda d: d["slides"].insert(0, NEW_SLIDE))
        outcome = await bot.reload()
        assert not outcome.accepted
        assert "progress database: the database is locked" in outcome.lines()[0]
        assert bot.library.current is serving


async def test_a_button_naming_a_removed_slide_says_so_in_every_shipped_language(config, standin, lessons):
    shutil.copytree(LESSONS, lessons, dirs_exist_ok=True)  # every translation, for learners who read them
    config = with_lessons(config, lessons)
    i18n = I18n(LOCALES)
    learners, stale = {}, {}
    async with running(config):
        for number, language in enumerate(i18n.languages):
            learner = learners[language] = standin.learner(user_id=8500 + number, language_code=language.lower())
            menu = await send_and_wait(learner, "/start")
            first = await tap_and_wait_edit(learner, menu, menu["reply_markup"]["inline_keyboard"][0][0]["text"])
            stale[language] = first  # its Next names off-by-default
    for language in i18n.languages:
        path = lessons / language / "01-requires-grad.yaml"
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        data["slides"] = [s for s in data["slides"] if s["id"] != "off-by-default"]
        data.get("sources", {}).pop("slide/off-by-default", None)
        path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    async with running(config):
        for language, learner in learners.items():
            with i18n.use(language):
                expected = _("That slide was taken out of the lesson. Here is the one that follows it.")
            query = await learner.tap(stale[language], callback_data=f"s:{FIRST.id}:off-by-default")
            answer = await learner.wait_callback_answer(query)
            assert answer["text"].replace("\u2066", "").replace("\u2069", "") == expected, language
            await standin.settle()
            shown = learner.message(stale[language]["message_id"])
            course = load_valid(lessons, LOCALES).course(language)
            assert course.lesson(FIRST.id).slides[1].title in shown["text"].replace("\u2066", "").replace("\u2069", "")
    assert standin.errors() == []
