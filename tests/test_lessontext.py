"""Lesson markup: `code` and **bold** become Telegram HTML; everything else is escaped literally."""

from __future__ import annotations

import pytest

from bot import bidi, lessontext
from bot.lessontext import MarkupError


def test_angle_brackets_and_ampersands_are_escaped():
    assert lessontext.to_html("a < b && c > d") == "a &lt; b &amp;&amp; c &gt; d"


def test_quotes_are_left_as_written():
    assert lessontext.to_html('say "hi" it\'s') == 'say "hi" it\'s'


def test_html_the_author_wrote_is_shown_not_interpreted():
    assert lessontext.to_html("<b>not bold</b>") == "&lt;b&gt;not bold&lt;/b&gt;"


def test_backticks_render_inline_code():
    assert lessontext.to_html("call `backward()` now") == "call <code>backward()</code> now"


def test_double_asterisks_render_bold():
    assert lessontext.to_html("it **adds** up") == "it <b>adds</b> up"


def test_text_inside_code_and_bold_is_escaped():
    assert lessontext.to_html("`a<b & c>d`") == "<code>a&lt;b &amp; c&gt;d</code>"
    assert lessontext.to_html("**x < y**") == "<b>x &lt; y</b>"


def test_asterisks_inside_code_stay_literal():
    assert lessontext.to_html("`f(**kwargs)` and **bold**") == "<code>f(**kwargs)</code> and <b>bold</b>"


def test_backticks_inside_bold_stay_literal():
    assert lessontext.to_html("**use `x`**") == "<b>use `x`</b>"


def test_single_asterisk_is_literal():
    assert lessontext.to_html("2 * 3 * x") == "2 * 3 * x"


def test_parse_splits_text_into_runs():
    assert lessontext.parse("a `b` **c** d") == [
        ("plain", "a "),
        ("code", "b"),
        ("plain", " "),
        ("bold", "c"),
        ("plain", " d"),
    ]


def test_to_plain_drops_the_marks():
    assert lessontext.to_plain("call `backward()` **twice** & <see>") == "call backward() twice & <see>"


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
        lessontext.parse(text)
    assert (caught.value.mark, caught.value.offset) == (mark, offset)
    assert str(caught.value) == f"unclosed {mark} (opened at character {offset + 1})"


def test_a_backtick_cannot_appear_inside_code():
    # The first backtick after an opening one closes it, so a third one opens a new, unclosed span.
    with pytest.raises(MarkupError) as caught:
        lessontext.parse("`a`b`")
    assert (caught.value.mark, caught.value.offset) == ("`", 4)


def test_to_html_raises_on_unclosed_marks_too():
    with pytest.raises(MarkupError):
        lessontext.to_html("**never closed")


@pytest.mark.parametrize("text", ["``", "****", "x `` y"])
def test_empty_marks_are_refused(text):
    with pytest.raises(MarkupError):
        lessontext.parse(text)


# Right to left: inline code, numbers and Latin runs isolated so they keep their order.

LRI, PDI = "\u2066", "\u2069"


def test_inline_code_in_right_to_left_text_is_isolated_whole():
    text = "استدعِ `loss.backward()` مرة واحدة ثم اقرأ `x.grad`."
    assert lessontext.to_html(text, rtl=True) == (
        f"استدعِ {LRI}<code>loss.backward()</code>{PDI} مرة واحدة ثم اقرأ {LRI}<code>x.grad</code>{PDI}."
    )


def test_left_to_right_text_is_left_alone():
    assert (
        lessontext.to_html("Call `backward()` once, 3 / 13.", rtl=False) == "Call <code>backward()</code> once, 3 / 13."
    )


def test_numbers_and_latin_words_in_right_to_left_prose_are_isolated():
    assert (
        lessontext.to_html("الشريحة 3 / 13 في PyTorch 2.x.", rtl=True)
        == f"الشريحة {LRI}3 / 13{PDI} في {LRI}PyTorch 2.x{PDI}."
    )


def test_bold_in_right_to_left_text_keeps_its_tags_outside_the_isolates():
    assert lessontext.to_html("**يجمع** القيم", rtl=True) == "<b>يجمع</b> القيم"
    assert lessontext.to_html("**القيمة 4**", rtl=True) == f"<b>القيمة {LRI}4{PDI}</b>"


def test_plain_right_to_left_text_for_polls_and_buttons_is_isolated():
    assert bidi.isolate_runs("ماذا يطبع print(x.grad) الآن؟") == f"ماذا يطبع {LRI}print(x.grad){PDI} الآن؟"
    assert bidi.isolate_runs("tensor(6.)") == f"{LRI}tensor(6.){PDI}"
    assert bidi.isolate_runs("بلا أرقام") == "بلا أرقام"


def test_the_isolated_text_reads_the_same_once_the_marks_are_removed():
    text = "يحسب `backward()` التدرجات: 2 / 3 من x.grad و None."
    for rendered, shown in (
        (lessontext.to_plain(text, rtl=True), text.replace("`", "")),
        (bidi.isolate_runs(text), text),
    ):
        assert rendered.replace(LRI, "").replace(PDI, "") == shown
        assert rendered.count(LRI) == rendered.count(PDI) > 0
