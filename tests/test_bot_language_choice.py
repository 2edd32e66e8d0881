"""Choosing the language: /language shows own names, the choice is stored and wins, the place is kept."""

from __future__ import annotations

from bot.i18n import I18n, _, own_name
from bot.lessontext import plain
from tests.conftest import LOCALES, course_content
from tests.journey import button_texts, position, send_and_wait, tap_and_wait_edit

CONTENT = course_content()
I18N = I18n(LOCALES)


def _say(language: str, message: str) -> str:
    with I18N.use(language):
        return _(message)


async def test_switching_language_mid_lesson_keeps_the_place_and_wins_over_telegram(bot, standin):
    ivan = standin.learner(user_id=8001, language_code="ru-RU")
    menu = await send_and_wait(ivan, "/start")
    assert CONTENT.course("ru").title in menu["text"]
    await ivan.tap(menu, callback_data="l:grad")
    slide = await ivan.wait_edit(menu["message_id"])
    for _turn in range(3):
        slide = await tap_and_wait_edit(ivan, slide, _say("ru", "Next ▶"))
    assert position(slide) == (4, len(CONTENT.english.lesson("grad").slides))
    assert CONTENT.course("ru").lesson("grad").slides[3].title in slide["text"]

    picker = await send_and_wait(ivan, "/language")
    names = button_texts(picker)
    assert names[:-1] == [own_name(code) for code in I18N.languages]
    assert {"Русский", "Español", "日本語", "العربية", "English"} <= set(names)
    assert names[-1] == "✓ " + _say("ru", "Follow my Telegram setting")
    chosen = await tap_and_wait_edit(ivan, picker, "Español")
    assert chosen["text"] == _say("es", "From now on I speak English.")
    assert chosen["text"] != "From now on I speak English."
    assert (await bot.db.find_learner(8001)).language == "es"

    resumed = await tap_and_wait_edit(ivan, chosen, _say("es", "▶ Continue where I left off"))
    assert position(resumed) == (4, len(CONTENT.english.lesson("grad").slides))
    assert CONTENT.course("es").lesson("grad").slides[3].title in resumed["text"]
    again = await send_and_wait(ivan, "/lessons")  # Telegram still says ru-RU: the stored choice wins
    assert CONTENT.course("es").title in again["text"]

    picker = await send_and_wait(ivan, "/language")
    assert "✓ Español" in button_texts(picker)
    back = await tap_and_wait_edit(ivan, picker, _say("es", "Follow my Telegram setting"))
    assert back["text"] == _say("ru", "From now on I follow your Telegram language setting.")
    assert (await bot.db.find_learner(8001)).language is None
    assert standin.errors() == []


async def test_a_forged_language_button_is_refused_and_changes_nothing(bot, standin):
    ada = standin.learner(user_id=8002, language_code="en")
    picker = await send_and_wait(ada, "/language")
    query = await ada.tap(picker, callback_data="g:xx")
    answer = await ada.wait_callback_answer(query)
    assert "not valid" in answer["text"]
    assert (await bot.db.find_learner(8002)).language is None
    await standin.settle()
    # Answered once: a second answer is refused by Telegram (and fails the test through the stand-in fixture).
    answers = [c for c in standin.calls_to("answerCallbackQuery") if c.params["callback_query_id"] == query]
    assert len(answers) == 1 and standin.errors() == []


async def test_the_command_menu_is_published_in_every_shipped_language(bot, standin):
    english = [c["description"] for c in standin.commands[("default", "")]]
    for language in I18N.languages[1:]:
        published = standin.commands[("default", language.split("_")[0])]
        assert [c["command"] for c in published] == [c["command"] for c in standin.commands[("default", "")]]
        descriptions = [c["description"] for c in published]
        with I18N.use(language):  # in Arabic, code in a description is isolated: '/run print(1)' reads left to right
            assert descriptions == [plain(_(text)) for text in english]
        assert not set(descriptions) & set(english), language
