"""Html: plain text is escaped once, where it meets HTML, and HTML already made is never escaped again."""

from __future__ import annotations

from bot.safehtml import Html, bold, code, code_block, escape, fill, italic, join, pre


def test_plain_text_is_escaped_and_quotes_are_left_alone():
    assert escape('a < b && c > d, "it\'s"') == 'a &lt; b &amp;&amp; c &gt; d, "it\'s"'
    assert isinstance(escape("x"), Html)


def test_html_is_never_escaped_twice():
    once = escape("<b>")
    assert escape(once) == "&lt;b&gt;"
    assert escape(bold("x")) == "<b>x</b>"


def test_tags_escape_plain_text_and_keep_html():
    assert bold("1 < 2") == "<b>1 &lt; 2</b>"
    assert italic(bold("&")) == "<i><b>&amp;</b></i>"
    assert code("a<b") == "<code>a&lt;b</code>"
    assert pre("x & y") == "<pre>x &amp; y</pre>"


def test_a_code_block_is_escaped_and_tagged_python():
    assert code_block("if a < b:\n    x = a & b") == (
        '<pre><code class="language-python">if a &lt; b:\n    x = a &amp; b</code></pre>'
    )


def test_fill_escapes_the_template_and_plain_values_but_not_html_values():
    filled = fill("{name} <{count}> {title}", name="A & B", count="3", title=bold("Q&A"))
    assert filled == "A &amp; B &lt;3&gt; <b>Q&amp;A</b>"
    assert isinstance(filled, Html)


def test_join_escapes_plain_parts_and_keeps_html_parts():
    assert join(["a<b", bold("c")]) == "a&lt;b\n\n<b>c</b>"
    assert join(["x", "y"], " & ") == "x &amp; y"
