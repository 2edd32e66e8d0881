"""Arabic reads right to left: code, numbers and 'n / N' keep their order, and every line starts Arabic.

These tests read the text the bot produces from the real Arabic lessons and catalog.
"""

from __future__ import annotations

import re
import unicodedata

import pytest

from bot import render
from bot.bidi import LRI, PDI
from bot.i18n import I18n
from tests.conftest import LOCALES, course_content

CONTENT = course_content()
I18N = I18n(LOCALES)
ARABIC = CONTENT.course("ar")
LESSON = ARABIC.lesson("grad")
_ISOLATED = re.compile(f"{LRI}[^{PDI}]*{PDI}")
_TAG = re.compile(r"<[^>]+>")


def _first_strong(line: str) -> str | None:
    """The bidi class of a line's first strong character, skipping isolated runs as the algorithm does."""
    for char in _ISOLATED.sub("", line):
        kind = unicodedata.bidirectional(char)
        if kind in ("L", "R", "AL"):
            return kind
    return None


def _prose_lines(html_text: str) -> list[str]:
    without_code_blocks = re.sub(r"<pre>.*?</pre>", "", html_text, flags=re.DOTALL)
    return [line for line in _TAG.sub("", without_code_blocks).splitlines() if line.strip()]


def test_inline_code_in_every_arabic_slide_is_isolated_whole():
    with I18N.use("ar"):
        for lesson in ARABIC.lessons:
            for index, slide in enumerate(lesson.slides):
                text = render.slide(ARABIC, lesson, index).text
                prose = re.sub(r"<pre>.*?</pre>", "", text, flags=re.DOTALL)
                codes = re.findall(r"(.)<code>[^<]*</code>(.)", prose)
                assert codes == [(LRI, PDI)] * len(codes), slide.id
                assert prose.count("<code>") == len(codes)


def test_the_slide_position_is_isolated_and_reads_n_of_total():
    with I18N.use("ar"):
        text = render.slide(ARABIC, LESSON, 2).text
    assert text.endswith(f"{LRI}3 / {len(LESSON.slides)}{PDI}")


def test_every_prose_line_arabic_shows_starts_right_to_left():
    with I18N.use("ar"):
        screens = [render.slide(ARABIC, lesson, i) for lesson in ARABIC.lessons for i in range(len(lesson.slides))]
        screens += [
            render.help_text(),
            render.practice_intro(ARABIC, LESSON),
            render.hint(LESSON, ARABIC, 1),
            render.quiz_result(ARABIC, LESSON, 2, 1),
        ]
    for screen in screens:
        for line in _prose_lines(screen.text):
            assert _first_strong(line) in ("R", "AL", None), line  # None: only numbers, like "3 / 13"


def test_latin_runs_in_arabic_polls_are_isolated_and_the_poll_still_fits():
    with I18N.use("ar"):
        polls = [render.poll(q) for lesson in ARABIC.lessons for q in lesson.quiz]
    for poll in polls:
        for text in (poll.question, *poll.options, poll.explanation):
            outside = _ISOLATED.sub("", text)
            assert not re.search(r"[A-Za-z0-9]", outside), text
            assert text.count(LRI) == text.count(PDI)
        assert len(poll.question) <= 300 and all(len(o) <= 100 for o in poll.options) and len(poll.explanation) <= 200


@pytest.mark.parametrize("language", ["ru", "ja", "de"])
def test_left_to_right_languages_get_no_isolates(language):
    course = CONTENT.course(language)
    with I18N.use(language):
        text = render.slide(course, course.lesson("grad"), 2).text + render.help_text().text
    assert LRI not in text and PDI not in text
