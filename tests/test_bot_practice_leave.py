"""Leaving the practice, without the runner: the answer comes where the learner looks, with the ways on;
going to another lesson leaves too; in every shipped language."""

from __future__ import annotations

import pytest

from bot.i18n import I18n, _
from bot.states import Practice, practice_state
from tests.conftest import LOCALES, course_content
from tests.journey import button_texts, open_practice, send_and_wait, tap_and_wait_edit, tap_and_wait_message

CONTENT = course_content()
I18N = I18n(LOCALES)
SHIPPED = I18N.languages
TELEGRAM_CODE = {"pt_BR": "pt-br"}
LESSON = CONTENT.english.lesson("grad")


@pytest.mark.parametrize("language", SHIPPED)
async def test_leave_on_a_hint_answers_below_it_with_the_way_back_and_the_way_on(bot, standin, language):
    course = CONTENT.course(language)
    lesson = course.lesson(LESSON.id)
    learner = standin.learner(
        user_id=8400 + SHIPPED.index(language), language_code=TELEGRAM_CODE.get(language, language)
    )
    intro = await open_practice(learner, LESSON.id)
    with I18N.use(language):
        leave = _("Leave the practice")
        left_text = _("You left the practice: messages are no longer checked as answers. /run still runs code.")
        back = _("💻 Back to the practice: {title}").format(title=lesson.exercise.title)
        onward = _("Next lesson: {title} ▶").format(title=course.next_lesson(lesson).title)
        lessons = _("☰ Lessons")
    hint = await tap_and_wait_message(learner, intro, "💡")
    before = dict(learner.message(hint["message_id"]))
    notice = await tap_and_wait_message(learner, hint, leave)
    # A new message at the bottom; the hint the learner tapped, and the task above it, say what they said, and
    # only the newest screen keeps buttons: old ones do not pile up (issue 20).
    assert notice["message_id"] > hint["message_id"]
    assert learner.message(hint["message_id"])["text"] == before["text"]
    assert learner.message(intro["message_id"])["text"] == intro["text"]
    assert "reply_markup" not in learner.message(hint["message_id"])
    assert "reply_markup" not in learner.message(intro["message_id"])
    assert notice["text"].replace("\u2066", "").replace("\u2069", "") == left_text
    assert [t.replace("\u2066", "").replace("\u2069", "") for t in button_texts(notice)] == [back, onward, lessons]
    # The ways on are one tap each: back into the practice, or on to the next lesson.
    again = await tap_and_wait_message(learner, notice, back[:6])
    assert lesson.exercise.starter.splitlines()[0] in again["text"]
    await standin.settle()
    assert standin.errors() == []


async def test_leaving_twice_says_there_is_no_practice_to_leave(bot, standin):
    ada = standin.learner(user_id=8410)
    intro = await open_practice(ada, LESSON.id)
    await tap_and_wait_message(ada, intro, "Leave the practice")
    since = ada.cursor()
    # (The intro's buttons are gone now; a client still showing them taps the same data.)
    answer = await ada.wait_callback_answer(await ada.tap(intro, callback_data=f"e:{LESSON.id}"))
    assert answer["text"] == "You are not in a practice right now."
    await standin.settle()
    assert ada.cursor() == since


async def test_opening_another_lesson_leaves_the_practice(bot, standin):
    ada = standin.learner(user_id=8411)
    await open_practice(ada, LESSON.id)
    menu = await send_and_wait(ada, "/lessons")
    await tap_and_wait_edit(ada, menu, "1. ")
    await standin.settle()
    learner = await bot.db.find_learner(8411)
    assert practice_state(learner) is Practice.OFF
    # Code sent now is not an answer to lesson 3's exercise: it is a message like any other.
    reply = await send_and_wait(ada, "x = 1")
    assert "/lessons" in reply["text"]
    # Going to the exercise's own lesson does not leave a practice under way.
    await open_practice(ada, LESSON.id)
    menu = await send_and_wait(ada, "/lessons")
    await tap_and_wait_edit(ada, menu, "3. ")
    await standin.settle()
    assert practice_state(await bot.db.find_learner(8411)) is Practice.ON
