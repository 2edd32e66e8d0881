"""A learner takes the whole course through the bot's real HTTP stack, against the loopback stand-in."""

from __future__ import annotations

import datetime as dt
import io

from PIL import Image, ImageChops

from bot.retention.completion_card import draw_card
from tests.conftest import answers_recorded, course_content
from tests.journey import (
    answer_quiz,
    button_texts,
    position,
    read_slides,
    send_and_wait,
    solve_drills,
    tap_and_wait_edit,
)

COURSE = course_content().english


async def test_a_learner_takes_all_four_lessons_and_progress_shows_the_course_complete(bot, standin):
    ada = standin.learner(user_id=1001, language_code="en")
    menu = await send_and_wait(ada, "/start")
    assert COURSE.title in menu["text"]
    for lesson in COURSE.lessons:
        assert f"{lesson.number}. " in menu["text"]
    assert menu["text"].count("not started") == 4
    assert button_texts(menu)[0] == "▶ Start the course"

    message = await tap_and_wait_edit(ada, menu, "Start the course")
    for lesson in COURSE.lessons:
        assert position(message) == (1, len(lesson.slides))
        assert lesson.slides[0].title in message["text"]
        last = await read_slides(ada, message, lesson)
        assert "Quick Check" in " ".join(button_texts(last))
        result = await answer_quiz(ada, last, lesson)
        assert f"{len(lesson.quiz)} of {len(lesson.quiz)} correct" in result["text"]
        assert "Recap" in result["text"]
        # The lesson is done once its drills are solved too (the runner is off: the author's orders).
        solved = await solve_drills(ada, result, lesson)
        assert "Every drill of this lesson is solved." in solved["text"]
        following = COURSE.next_lesson(lesson)
        if following is None:
            assert not any(t.startswith("Next lesson") for t in button_texts(result))
            break
        message = await tap_and_wait_edit(ada, result, "Next lesson")
        assert following.slides[0].title in message["text"]

    report = await send_and_wait(ada, "/progress")
    assert "4 of 4 lessons done" in report["text"]
    assert f"{COURSE.question_count} of {COURSE.question_count} questions correct (100%)" in report["text"]
    drills = sum(len(lesson.drills) for lesson in COURSE.lessons)
    assert f"{drills} of {drills} drills solved." in report["text"]
    assert "The course is complete" in report["text"]
    # The completion card: the image drawn for Ada, today, in English, with the link to the bot under its caption.
    [card] = [m for m in ada.messages if "photo" in m]
    link = f"https://t.me/{standin.bot_user['username']}"
    assert card["caption"] == f"You finished the course! Here is your card to save or forward. Share the course: {link}"
    sent = standin.files.by_id[card["photo"][-1]["file_id"]].data
    expected, _ = draw_card(COURSE.title, "Ada", dt.datetime.now(dt.UTC).date(), len(COURSE.lessons), link)
    assert ImageChops.difference(Image.open(io.BytesIO(sent)).convert("RGB"), expected).getbbox() is None
    assert standin.errors() == []


async def test_slides_show_code_as_a_python_code_block(bot, standin):
    ada = standin.learner(user_id=1002)
    menu = await send_and_wait(ada, "/start")
    slide = await tap_and_wait_edit(ada, menu, "Start the course")
    pre = [e for e in slide["entities"] if e["type"] == "pre"]
    assert pre and pre[0]["language"] == "python"
    assert COURSE.lessons[0].slides[0].code.splitlines()[0] in slide["text"]
    assert button_texts(slide) == ["Next ▶", "☰ Lessons"]
    second = await tap_and_wait_edit(ada, slide, "Next")
    assert button_texts(second) == ["◀ Back", "Next ▶", "☰ Lessons"]
    back = await tap_and_wait_edit(ada, second, "Back")
    assert position(back) == (1, len(COURSE.lessons[0].slides))


async def test_a_missed_question_can_be_retaken_alone(bot, standin):
    ada = standin.learner(user_id=1003)
    lesson = COURSE.lessons[0]
    menu = await send_and_wait(ada, "/start")
    last = await read_slides(ada, await tap_and_wait_edit(ada, menu, "Start the course"), lesson)
    result = await answer_quiz(ada, last, lesson, wrong={1})
    assert f"{len(lesson.quiz) - 1} of {len(lesson.quiz)} correct" in result["text"]
    assert "↻ Retake the question I missed" in button_texts(result)

    since = ada.cursor()
    await ada.tap(result, "Retake")
    poll = await ada.wait_message(lambda m: "poll" in m, since=since)
    assert poll["poll"]["question"] == lesson.quiz[1].question
    since = ada.cursor()
    await ada.answer_poll(poll, poll["poll"]["correct_option_ids"][0])
    again = await ada.wait_message(since=since)
    assert f"{len(lesson.quiz)} of {len(lesson.quiz)} correct" in again["text"]
    assert not any("Retake" in t for t in button_texts(again))
    # Every answer is recorded: the wrong one and the retake.
    assert answers_recorded(bot.db.path, 1003) == len(lesson.quiz) + 1


async def test_the_lesson_list_shows_each_lessons_state(bot, standin):
    ada = standin.learner(user_id=1004)
    lesson = COURSE.lessons[0]
    menu = await send_and_wait(ada, "/start")
    slide = await tap_and_wait_edit(ada, menu, "Start the course")
    slide = await tap_and_wait_edit(ada, slide, "Next")
    slide = await tap_and_wait_edit(ada, slide, "Next")
    menu = await send_and_wait(ada, "/lessons")
    assert f"in progress, slide 3 of {len(lesson.slides)}" in menu["text"]
    assert button_texts(menu)[0] == "▶ Continue: lesson 1, slide 3"
    resumed = await tap_and_wait_edit(ada, menu, "Continue")
    assert position(resumed) == (3, len(lesson.slides))
