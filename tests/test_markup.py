"""Lesson markup: `code` and **bold** become Telegram HTML; everything else is escaped literally."""

from __future__ import annotations

import pytest

from bot import markup
from bot.markup import MarkupError


def test_angle_brackets_and_ampersands_are_escaped():
    assert markup.to_html("a < b && c > d") == "a &lt; b &amp;&amp; c &gt; d"


def test_quotes_are_left_as_written():
    assert markup.to_html('say "hi" it\'s') == 'say "hi" it\'s'


def test_html_the_author_wrote_is_shown_not_interpreted():
    assert markup.to_html("<b>not bold</b>") == "&lt;b&gt;not bold&lt;/b&gt;"


def test_backticks_render_inline_code():
    assert markup.to_html("call `backward()` now") == "call <code>backward()</code> now"


def test_double_asterisks_render_bold():
    assert markup.to_html("it **adds** up") == "it <b>adds</b> up"


def test_text_inside_code_and_bold_is_escaped():
    assert markup.to_html("`a<b & c>d`") == "<code>a&lt;b &amp; c&gt;d</code>"
    assert markup.to_html("**x < y**") == "<b>x &lt; y</b>"


def test_asterisks_inside_code_stay_literal():
    assert markup.to_html("`f(**kwargs)` and **bold**") == "<code>f(**kwargs)</code> and <b>bold</b>"


def test_backticks_inside_bold_stay_literal():
    assert markup.to_html("**use `x`**") == "<b>use `x`</b>"


def test_single_asterisk_is_literal():
    assert markup.to_html("2 * 3 * x") == "2 * 3 * x"


def test_parse_splits_text_into_runs():
    assert markup.parse("a `b` **c** d") == [
        ("plain", "a "), ("code", "b"), ("plain", " "), ("bold", "c"), ("plain", " d"),
    ]


def test_to_plain_drops_the_marks():
    assert markup.to_plain("call `backward()` **twice** & <see>") == "call backward() twice & <see>"


@pytest.mark.parametrize(
    ("text", "mark", "offset"),
    [
        ("call `backward() now", "`", 5),
        ("it **adds up", "**", 3),
        ("`ok` then **open", "**", 10),
        ("`ok` and ` open", "`", 9),
    ],
)
def test_unclosed_mark_raises_with_its_offset(text, mark, offset):
    with pytest.raises(MarkupError) as caught:
        markup.parse(text)
    assert (caught.value.mark, caught.value.offset) == (mark, offset)
    assert str(caught.value) == f"unclosed {mark} (opened at character {offset + 1})"


def test_a_backtick_cannot_appear_inside_code():
    # The first backtick after an opening one closes it, so a third one opens a new, unclosed span.
    with pytest.raises(MarkupError) as caught:
        markup.parse("`a`b`")
    assert (caught.value.mark, caught.value.offset) == ("`", 4)


def test_to_html_raises_on_unclosed_marks_too():
    with pytest.raises(MarkupError):
        markup.to_html("**never closed")


@pytest.mark.parametrize("text", ["``", "****", "x `` y"])
def test_empty_marks_are_refused(text):
    with pytest.raises(MarkupError):
        markup.parse(text)


def test_code_block_is_escaped_and_tagged_python():
    assert markup.code_block("if a < b:\n    x = a & b") == (
        '<pre><code class="language-python">if a &lt; b:\n    x = a &amp; b</code></pre>'
    )
