"""No dead ends (issue 20), through the bot's real HTTP stack against the stand-in, without the runner: a sentence
sent in a practice, code pasted outside one, old buttons, a cancelled reset, a Quick Check taken up again."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bot.changes import AttemptGraded, PracticeLeft
from bot.i18n import I18n, _
from tests.conftest import LOCALES, answers_recorded, course_content
from tests.journey import button_texts, open_practice, send_and_wait, tap_and_wait_edit, tap_and_wait_message
from tests.outcomes import stored

CONTENT = course_content()
I18N = I18n(LOCALES)
SHIPPED = I18N.languages
TELEGRAM_CODE = {"pt_BR": "pt-br"}
LESSON = CONTENT.english.lesson("grad")
# What a learner typed to the bot in the middle of a practice, in each language (issue 20's was the English one).
QUESTIONS = {
    "en": "I don't understand why my loss goes up",
    "de": "Ich verstehe nicht, warum mein Loss wieder steigt",
    "es": "No entiendo por qué mi pérdida sube",
    "fr": "Je ne comprends pas pourquoi ma perte remonte",
    "pt_BR": "Não entendo por que minha perda sobe",
    "ru": "Не понимаю, почему функция потерь растёт",
    "ja": "なぜ損失が上がるのか分かりません",
    "ar": "لا أفهم لماذا ترتفع الخسارة",
}


def _plain(text: str) -> str:
    return text.replace("\u2066", "").replace("\u2069", "")


@pytest.mark.parametrize("language", SHIPPED)
async def test_a_sentence_in_a_practice_is_answered_with_hint_and_leave_not_run_nor_counted(bot, standin, language):
    learner = standin.learner(
        user_id=8600 + SHIPPED.index(language), language_code=TELEGRAM_CODE.get(language, language)
    )
    await open_practice(learner, LESSON.id)
    answer = await send_and_wait(learner, QUESTIONS[language])
    with I18N.use(language):
        said = _(
            "That reads like a sentence, not Python, so I did not run it and it does not count as an attempt. "
            "Stuck? Tap 💡 Hint for a nudge, or Leave the practice to go back to the course. "
            "When your code is ready, send it as a message."
        )
        hint = _("💡 Hint ({n} of {total})").format(n=1, total=3)
        leave = _("Leave the practice")
    assert _plain(answer["text"]) == said
    labels = [_plain(t) for t in button_texts(answer)]
    assert hint in labels and leave in labels, labels
    # Not an attempt, not a run: nothing recorded, and the practice goes on.
    await standin.settle()
    assert _runs(bot.config.db_path, learner.user_id) == 0
    assert standin.errors() == []


def _runs(db_path: Path, user_id: int) -> int:
    """Return how many runs (graded attempts) the database file records for ``user_id``: events and attempts."""
    with sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True) as conn:
        (events,) = conn.execute(
            "SELECT count(*) FROM events WHERE user_id = ? AND kind = 'run'", (user_id,)
        ).fetchone()
        (attempts,) = conn.execute("SELECT count(*) FROM exercise_attempts WHERE user_id = ?", (user_id,)).fetchone()
    conn.close()
    return int(events) + int(attempts)


async def test_code_pasted_outside_a_practice_is_told_about_run(bot, standin):
    ada = standin.learner(user_id=8610)
    reply = await send_and_wait(ada, "import torch\nx = torch.ones(2, requires_grad=True)\nprint(x)")
    assert "/run" in reply["text"] and "I work with buttons" not in reply["text"], reply["text"]
    chat = await send_and_wait(ada, "hello there")
    assert "I work with buttons" in chat["text"]


async def test_an_old_hint_button_after_passing_says_so_and_practice_screens_keep_one_set_of_buttons(bot, standin):
    ada = standin.learner(user_id=8611)
    intro = await open_practice(ada, LESSON.id)
    hint = await tap_and_wait_message(ada, intro, "💡")
    # The hint supersedes the task's buttons: only the newest practice screen offers Hint and Leave.
    assert "reply_markup" not in ada.message(intro["message_id"]) and button_texts(hint)
    second = await tap_and_wait_message(ada, hint, "💡")
    assert "reply_markup" not in ada.message(hint["message_id"]) and button_texts(second)
    # The learner passes (as a graded pass stores it: the attempt, and the practice left, in one outcome).
    assert await stored(bot.db, 8611, AttemptGraded(LESSON.id, passed=True), PracticeLeft())
    # A client still showing "Hint (3 of 3)" (or one from before a restart) taps it: no "open the practice".
    answer = await ada.wait_callback_answer(await ada.tap(second, callback_data=f"h:{LESSON.id}"))
    assert answer["text"] == "You passed this practice already: no hints needed. ✅", answer
    other = await ada.wait_callback_answer(await ada.tap(second, callback_data="h:backward"))
    assert other["text"] == "This practice is closed now. Open it again from /lessons to see its hints.", other


async def test_cancelling_reset_leaves_the_way_on(bot, standin):
    ada = standin.learner(user_id=8612)
    question = await send_and_wait(ada, "/reset")
    cancelled = await tap_and_wait_edit(ada, question, "Cancel")
    assert cancelled["text"] == "Nothing was changed. Your progress is safe."
    assert button_texts(cancelled) == ["▶ Continue where I left off", "☰ Lessons"]
    menu = await tap_and_wait_edit(ada, cancelled, "☰ Lessons")
    assert "1." in menu["text"]


async def test_a_quick_check_taken_up_again_says_how_many_questions_are_left(bot, standin):
    from tests.journey import correct_option, read_slides

    ada = standin.learner(user_id=8613)
    first = CONTENT.english.lessons[0]
    start = await send_and_wait(ada, "/start")
    opened = await tap_and_wait_edit(ada, start, "▶") if "reply_markup" in start else start
    last = await read_slides(ada, opened, first)
    poll = await tap_and_wait_message(ada, last, "Quick Check", lambda m: "poll" in m)
    intro = ada.message(last["message_id"])
    assert f"{len(first.quiz)} questions." in intro["text"], intro["text"]
    since = ada.cursor()
    await ada.answer_poll(poll, correct_option(poll))
    await ada.wait_message(lambda m: "poll" in m, since=since)
    assert answers_recorded(bot.config.db_path, 8613) == 1
    # Taken up again (the poll asked for once more): what is left of the round, not "2 questions" for 3.
    since = ada.cursor()
    await ada.tap(ada.message(last["message_id"]), "Send the question again")
    resumed = await ada.wait_edit(last["message_id"])
    left = len(first.quiz) - 1
    assert f"{left} questions left." in resumed["text"], resumed["text"]
    await ada.wait_message(lambda m: "poll" in m, since=since)
