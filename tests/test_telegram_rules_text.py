"""bot.telegram_rules.text: a message as Telegram stores it, and the one visible length the bot measures."""

from __future__ import annotations

import pytest

from bot.safehtml import bold, code_block, join
from bot.telegram_rules.html import HtmlError
from bot.telegram_rules.text import stored, trim, visible_length, visible_text
from bot.telegram_rules.units import utf8_len, utf16_len


def test_lengths_count_utf16_code_units_and_utf8_bytes():
    assert utf16_len("abc") == 3
    assert utf16_len("ё") == 1
    assert utf16_len("🔥") == 2
    assert utf8_len("ё") == 2 and utf8_len("🔥") == 4


def test_the_visible_text_is_what_telegram_shows():
    assert visible_text(join([bold("1 < 2"), code_block("a & b")])) == "1 < 2\n\na & b"


def test_the_visible_length_ignores_tags_and_counts_entities_once():
    assert visible_length("<b>a &lt; b</b>") == 5


def test_the_visible_length_counts_after_trimming_as_telegram_checks_limits():
    assert visible_length("\n\n  <b>hi</b>  \n") == 2


def test_the_visible_text_knows_only_telegrams_character_references():
    # Telegram decodes &lt; &gt; &amp; &quot; and numeric references; &nbsp; is not one of them (an html.unescape
    # would take it), so in the strict parse mode the bot is held to, its "&" is refused as unescaped.
    assert visible_text("a&#32;b&#x41;") == "a bA"
    with pytest.raises(HtmlError):
        visible_text("a&nbsp;b")


def test_a_stored_message_has_its_entities_at_utf16_offsets():
    assert stored("🔥 <b>x</b>") == ("🔥 x", [{"type": "bold", "offset": 3, "length": 1}])


def test_trimming_shifts_and_clips_entities():
    bold = {"type": "bold", "offset": 2, "length": 4}
    assert trim("  ab  ", [bold]) == (
        "ab",
        [{"type": "bold", "offset": 0, "length": 2}],
    )
