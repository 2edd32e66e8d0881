"""What the handlers share: an edit that would change nothing is not sent.

``shows`` compares a message as Telegram keeps it (text, entities, buttons) with a screen read the way
Telegram reads HTML; every screen the course renders, in every shipped language, is checked both ways.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Message

from bot import render
from bot.handlers.common import shows
from bot.i18n import I18n
from bot.localapi.text import format_text
from bot.navigation import Place
from bot.safehtml import Html
from tests.conftest import LOCALES, course_content

CONTENT = course_content()
I18N = I18n(LOCALES)


def as_telegram_keeps_it(screen: render.Screen) -> Message:
    """The message Telegram would hold after showing ``screen``."""
    text, entities = format_text(screen.text, "HTML")
    data = {"message_id": 7, "date": 0, "chat": {"id": 1, "type": "private"}, "text": text, "entities": entities}
    if screen.buttons is not None:
        data["reply_markup"] = screen.buttons.to_dict()
    return Message.de_json(data, None)


def screens(language: str) -> list[render.Screen]:
    course = CONTENT.course(language)
    lesson = course.lessons[2]
    found = [render.slide(course, lesson, i, done=done) for i in range(len(lesson.slides)) for done in (False, True)]
    found += [
        render.menu(course, {}, Place(lesson, 3), welcome=True),
        render.quiz_intro(lesson, 3, retake=False),
        render.quiz_intro(lesson, 1, retake=True, sent=False),
        render.quiz_result(course, lesson, 2, 1),
        render.practice_intro(course, lesson),
        render.hint(lesson, course, 1),
        render.practice_left(course, lesson),
        render.help_text(),
    ]
    return found


@pytest.mark.parametrize("language", I18N.languages)
def test_a_message_already_showing_a_screen_shows_it_and_any_difference_is_seen(language):
    with I18N.use(language):
        for screen in screens(language):
            message = as_telegram_keeps_it(screen)
            assert shows(message, screen), screen.text[:60]
            plain = Html(screen.text.replace("<b>", "").replace("</b>", "")) if "<b>" in screen.text else None
            if plain is not None:
                assert not shows(message, replace(screen, text=plain)), "bold lost, same characters"
            assert not shows(message, replace(screen, text=Html(screen.text + "!")))
            extra = InlineKeyboardMarkup([*(screen.buttons.inline_keyboard if screen.buttons else ()), [_button()]])
            assert not shows(message, replace(screen, buttons=extra))


def _button() -> InlineKeyboardButton:
    return InlineKeyboardButton("☰", callback_data="m:course")


def test_a_message_with_no_text_or_html_telegram_would_refuse_never_shows_a_screen():
    screen = render.notice("Hello")
    photo = Message.de_json({"message_id": 1, "date": 0, "chat": {"id": 1, "type": "private"}}, None)
    assert not shows(photo, screen)
    assert not shows(as_telegram_keeps_it(screen), replace(screen, text=Html("<b>Hello")))
