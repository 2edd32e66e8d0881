"""Lesson 3's drills in a real browser at phone size (390x844), through the web chat, served by the real bot.

Each drill screen, with its buttons, must fit the chat's visible area without scrolling: the claim
lint makes from its line count (bot.library.screens.PHONE_LINES), measured here in Chromium.
Screenshots are saved under tests/artifacts/.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot import lessontext
from bot.i18n import I18n, _, ngettext, number
from bot.render import piece_label
from bot.webchat.local import LocalCourse, local_course
from tests.browser import Phone, needs_chromium
from tests.conftest import LOCALES, course_content, web_chat_config

CONTENT = course_content()
I18N = I18n(LOCALES)
TIMEOUT = 10_000  # ms for the bot to answer a tap

pytestmark = needs_chromium


@pytest.fixture
async def course(tmp_path: Path) -> AsyncIterator[LocalCourse]:
    # The runner is off: the author's orders are what this test taps, and it is about the screen.
    async with local_course(web_chat_config(tmp_path)) as running:
        yield running


async def _tap(page, label: str) -> None:
    await page.locator(".row.in .keyboard button", has_text=label).last.click()


async def _fits(page, row) -> tuple[float, float]:
    """Return the height of a message with its buttons, and the height of the chat's visible area."""
    # Measured in the page: an edit may redraw the message, and the locator waits for it to be there.
    height = await row.evaluate("e => e.getBoundingClientRect().height")
    area = await page.locator("#messages").evaluate("e => e.clientHeight")
    return float(height), float(area)


@pytest.mark.parametrize("language", ["en", "de", "ar"])
async def test_each_drill_screen_fits_a_phone_without_scrolling(course: LocalCourse, device: Phone, language):
    page = device.page
    lesson = CONTENT.course(language).lesson("grad")
    step, clear, predict = lesson.drills
    with I18N.use(language):
        labels = {
            "next": _("Next ▶").rstrip(" ▶"),
            "drills": _("🧩 Code drills ▶").rstrip(" ▶"),
            "check": _("✔ Check"),
            "next drill": _("Next drill ▶").rstrip(" ▶"),
        }
    await page.goto(course.chat.url)
    await page.locator("#bot-name").wait_for()
    if language != "en":
        await page.click("#settings-button")
        await page.select_option("#language-select", language)
        await page.keyboard.press("Escape")
    await page.locator("#start-button").click()  # a new learner starts the bot; the welcome lists the lessons
    with I18N.use(language):
        row = f"{number(lesson.number)}. "  # the lesson's button in the menu (the number isolated in Arabic)
    await page.locator(".row.in .keyboard button", has_text=row).last.click()
    slide = page.locator(".row.in").last
    await slide.locator(f"text=1 / {len(lesson.slides)}").wait_for(timeout=TIMEOUT)
    for n in range(2, len(lesson.slides) + 1):
        await _tap(page, labels["next"])
        await slide.locator(f"text={n} / {len(lesson.slides)}").wait_for(timeout=TIMEOUT)
    await _tap(page, labels["drills"])
    drill = page.locator(".row.in").last
    await drill.locator("text=🧩").first.wait_for(timeout=TIMEOUT)

    screens = {}
    height, area = await _fits(page, drill)
    screens["parsons, untouched"] = height
    await device.screenshot(f"drills-{language}-1-parsons")
    for index, line in enumerate(step.lines):
        await drill.locator(".keyboard button", has_text=piece_label(line)).first.click()
        with I18N.use(language):
            placed = ngettext("{placed} of {total} line placed.", "{placed} of {total} lines placed.", len(step.lines))
            placed = placed.format(placed=number(index + 1), total=number(len(step.lines)))
        await drill.locator(f"text={placed}").wait_for(timeout=TIMEOUT)
    await drill.locator(".keyboard button", has_text=labels["check"]).wait_for(timeout=TIMEOUT)
    screens["parsons, every line placed"] = (await _fits(page, drill))[0]
    await _tap(page, labels["check"])
    await drill.locator("text=✅").first.wait_for(timeout=TIMEOUT)
    screens["parsons, solved"] = (await _fits(page, drill))[0]
    await device.screenshot(f"drills-{language}-2-parsons-solved")
    await _tap(page, labels["next drill"])
    await drill.locator("pre", has_text="___").wait_for(timeout=TIMEOUT)
    screens["fill in the blank"] = (await _fits(page, drill))[0]
    # A wrong choice first, the one with the longest reason: the screen says why, in the learner's language.
    wrong = max((i for i in range(len(clear.choices)) if i != clear.correct), key=lambda i: len(clear.reason(i)))
    await drill.locator(".keyboard button", has_text=clear.choices[wrong]).click()
    with I18N.use(language):
        try_another = _("Try another one.")
    await drill.locator(f"text={try_another}").wait_for(timeout=TIMEOUT)
    shown = (await drill.inner_text()).replace("\u2066", "").replace("\u2069", "")
    assert lessontext.to_plain(clear.reason(wrong)) in " ".join(shown.split()), shown
    screens["fill in the blank, a wrong choice with its reason"] = (await _fits(page, drill))[0]
    await device.screenshot(f"drills-{language}-fill-wrong-choice")
    await drill.locator(".keyboard button", has_text=clear.choices[clear.correct]).click()
    await drill.locator("text=✅").first.wait_for(timeout=TIMEOUT)
    await _tap(page, labels["next drill"])
    await drill.locator("pre", has_text=predict.code.splitlines()[-1]).wait_for(timeout=TIMEOUT)
    await drill.locator(".keyboard button", has_text=predict.choices[predict.correct]).click()
    await drill.locator("text=✅").first.wait_for(timeout=TIMEOUT)
    screens["predict, solved: the way on"] = (await _fits(page, drill))[0]
    await device.screenshot(f"drills-{language}-3-all-solved")

    too_tall = {what: (height, area) for what, height in screens.items() if height > area}
    assert too_tall == {}, f"taller than the chat's visible area ({area}px)"
    assert device.errors == []
