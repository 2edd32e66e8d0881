"""bot.library.screens: how much of a phone screen a rendered screen takes (lint refuses drills that overflow it)."""

from __future__ import annotations

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from bot.library.screens import phone_lines
from bot.render import Screen
from bot.safehtml import Html


def test_the_phone_screen_counts_wrapped_text_code_lines_and_rows_of_buttons():
    text = Html("a" * 81 + "\n\n" + '<pre><code class="language-python">x = 1\ny = 2</code></pre>')
    rows = InlineKeyboardMarkup([[InlineKeyboardButton("a", callback_data="m:course")]] * 3)
    assert phone_lines(Screen(text, rows)) == 3 + 1 + 2 + 2 * 3


def test_a_line_of_entities_counts_as_the_characters_it_shows():
    # 50 visible characters, over 150 of HTML: two phone lines of 40, not four.
    text = Html("<b>" + "&lt;" * 25 + "</b>" + "<i>" + "x" * 25 + "</i>")
    assert phone_lines(Screen(text, None)) == 2
