"""A learner takes lesson 1 in a real browser at phone size, through the web chat, served by the real bot.

Chromium (Debian's) driven by Playwright; the bot, its built-in Bot API server and the real
runner run in the test. What is asserted is what the page shows. Screenshots are saved
under tests/artifacts/.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.config import Config
from bot.webchat.learners import learners
from bot.webchat.local import LocalCourse, local_course
from tests.browser import Phone, needs_chromium
from tests.conftest import LESSONS, LOCALES, course_content, web_chat_config

COURSE = course_content()
LESSON = COURSE.english.lessons[0]
ARABIC = COURSE.course("ar").lessons[0]
TIMEOUT = 10_000  # ms for the bot to answer a tap
RUN_TIMEOUT = 30_000  # ms for the runner to grade code

pytestmark = needs_chromium
needs_runner = pytest.mark.skipif(shutil.which("bwrap") is None, reason="the runner's sandbox needs bubblewrap")


@pytest.fixture
async def course(tmp_path: Path) -> AsyncIterator[LocalCourse]:
    async with local_course(web_chat_config(tmp_path, runner="embedded")) as running:
        yield running


def last_bot_message(page):
    return page.locator(".row.in").last


async def tap(page, label: str) -> None:
    await page.locator(".row.in .keyboard button", has_text=label).last.click()


@needs_runner
async def test_a_learner_reads_lesson_1_answers_the_quick_check_practises_runs_code_and_reads_arabic(
    course: LocalCourse, device: Phone
):
    page = device.page
    await page.goto(course.chat.url)
    await page.locator("#bot-name", has_text="Coursebot").wait_for()

    # A new learner starts the bot with START, as in Telegram; then the message box and the menu are there.
    await page.locator("#start-button").click()
    welcome = last_bot_message(page)
    await welcome.locator("text=PyTorch autograd").wait_for(timeout=TIMEOUT)
    # The command menu is what the bot published with setMyCommands, in the app's language.
    await page.click("#menu-button")
    await page.locator("#command-menu .name", has_text="/lessons").wait_for()
    assert "The course menu" in await page.locator("#command-menu").inner_text()
    await device.screenshot("webchat-00-command-menu")
    await page.keyboard.press("Escape")
    assert await welcome.locator("b", has_text="PyTorch autograd").count() == 1  # bold, as Telegram shows <b>
    await device.screenshot("webchat-01-welcome")

    # Reading by tapping: the slide message is edited in place, one message for every slide.
    await tap(page, "Start the course")
    slide = page.locator(".row.in").last
    await slide.locator("text=1 / 13").wait_for(timeout=TIMEOUT)
    await slide.locator("i", has_text="Lesson 1 of 4").wait_for()
    assert await slide.locator("pre code").count() >= 1  # a Python code block
    assert await slide.locator("code").first.inner_text()  # inline code
    await device.screenshot("webchat-02-slide")
    bubbles = await page.locator(".row").count()
    for n in range(2, len(LESSON.slides) + 1):
        await tap(page, "Next")
        await slide.locator(f"text={n} / {len(LESSON.slides)}").wait_for(timeout=TIMEOUT)
    assert await page.locator(".row").count() == bubbles, "turning slides must edit, not send"
    assert await slide.locator(".meta", has_text="✎").count() == 1  # shown as edited

    # The Quick Check: native quiz polls; a tap shows right or wrong and the explanation.
    await tap(page, "Quick Check")
    for index, question in enumerate(LESSON.quiz):
        poll_row = page.locator(".row.in", has=page.locator(".poll")).nth(index)
        await poll_row.locator(".poll .option").first.wait_for(timeout=TIMEOUT)
        message_id = int(await poll_row.get_attribute("data-message-id"))
        poll = course.api.chats[_learner_id(course)].messages[message_id]["poll"]
        correct = poll["correct_option_ids"][0]
        choice = correct if index else (correct + 1) % len(poll["options"])  # the first one wrong, on purpose
        await poll_row.locator(".poll .option").nth(choice).click()
        await poll_row.locator(".result.right").wait_for(timeout=TIMEOUT)
        if index == 0:
            assert await poll_row.locator(".result.wrong .mark").inner_text() == "✗"
            await device.screenshot("webchat-03-quiz")
        assert await poll_row.locator(".result.right .mark").inner_text() == "✓"
        assert question.explanation.split("`")[0][:20] in await poll_row.locator(".explanation").inner_text()
    result = page.locator(".row.in", has_text="Quick Check:").last
    await result.locator(f"text=2 of {len(LESSON.quiz)} correct").wait_for(timeout=TIMEOUT)

    # The practice, passed by typing the solution into the composer: Tab indents.
    await tap(page, "Practice")
    await page.locator(".row.in", has_text="Practice:").last.wait_for(timeout=TIMEOUT)
    composer = page.locator("#input")
    await composer.click()
    for line in LESSON.exercise.solution.strip("\n").splitlines():
        stripped = line.lstrip(" ")
        for _ in range((len(line) - len(stripped)) // 4):
            await page.keyboard.press("Tab")
        await page.keyboard.type(stripped)
        await page.keyboard.press("Enter")  # a new line on a phone: Ctrl+Enter or the button sends
    typed = await composer.input_value()
    assert typed.strip() == LESSON.exercise.solution.strip()
    await page.keyboard.press("Control+Enter")
    await page.locator(".row.in", has_text="checks passed").last.wait_for(timeout=RUN_TIMEOUT)
    sent = page.locator(".row.out").last
    assert LESSON.exercise.solution.strip().splitlines()[0] in await sent.inner_text()
    await device.screenshot("webchat-04-practice")

    # /run, typed.
    await composer.fill("/run print(2 + 2)")
    await page.click("#send-button")
    output = page.locator(".row.in pre", has_text=re.compile(r"^4$"))
    await output.last.wait_for(timeout=RUN_TIMEOUT)
    await device.screenshot("webchat-05-run")

    # The app switched to Arabic: right to left, code left to right, the bot answers in Arabic.
    await page.click("#settings-button")
    await page.locator("#learner-list button.current", has_text="Learner 1").wait_for()
    await device.screenshot("webchat-06-settings")
    await page.select_option("#language-select", "ar")
    await page.locator("html[dir='rtl']").wait_for(state="attached")  # the CSP forbids wait_for_function's eval
    assert await page.locator("#menu-button").inner_text() != "Menu"
    await page.click("#menu-button")
    await page.locator("#command-menu button", has_text="/lessons").click()
    menu = page.locator(".row.in").last
    await menu.locator(".keyboard button").first.wait_for(timeout=TIMEOUT)
    await menu.locator(".keyboard button", has_text=_plain(ARABIC.title)).first.click()
    slide = page.locator(".row.in").last
    await slide.locator("pre").first.wait_for(timeout=TIMEOUT)
    text = await slide.locator(".text").inner_text()
    assert re.search("[\u0600-\u06ff]", text), text
    assert await slide.locator("pre").first.evaluate("e => getComputedStyle(e).direction") == "ltr"
    assert await slide.locator(".text").evaluate("e => getComputedStyle(e).direction") == "rtl"
    await device.screenshot("webchat-07-arabic")

    assert device.errors == []


def _learner_id(course: LocalCourse) -> int:
    """The one web learner of this test."""
    (learner,) = [user["id"] for user in learners(course.api)]
    return learner


def _plain(title: str) -> str:
    return title.replace("`", "")[:12]


@pytest.fixture
async def authoring(tmp_path: Path) -> AsyncIterator[tuple[LocalCourse, Path]]:
    """The web chat over a copy of the lessons that the test edits (no runner: this is about reading)."""
    lessons = tmp_path / "lessons"
    shutil.copytree(LESSONS / "en", lessons / "en")
    config = Config(
        token="",
        db_path=tmp_path / "coursebot.sqlite3",
        lessons_dir=lessons,
        locales_dir=LOCALES,
        runner="off",
        web_port=0,
        watch=False,
    )
    async with local_course(config) as running:
        yield running, lessons


async def test_an_edited_slide_shows_on_the_page_and_a_broken_lesson_is_refused_in_a_banner(authoring, device: Phone):
    course, lessons = authoring
    page = device.page
    await page.goto(course.chat.url)
    await page.locator("#bot-name", has_text="Coursebot").wait_for()
    await page.locator("#start-button").click()
    await tap(page, "Start the course")
    slide = page.locator(".row.in").last
    await slide.locator("text=1 / 13").wait_for(timeout=TIMEOUT)

    # The author rewrites the slide the learner is reading: it changes in place on the page.
    path = lessons / "en" / "01-requires-grad.yaml"
    path.write_text(
        path.read_text().replace("Autograd works out derivatives for you.", "Autograd differentiates for you.")
    )
    assert (await course.bot.reload()).accepted
    await slide.locator("text=Autograd differentiates for you.").wait_for(timeout=TIMEOUT)
    assert await page.locator(".row.in").count() == 1  # the one reading message: edited, not sent anew
    await device.screenshot("webchat-08-reloaded")

    # A broken lesson file is refused: its file:line shows in a banner, the course goes on.
    broken = lessons / "en" / "02-backward.yaml"
    broken.write_text(broken.read_text().replace("slides:", "slides: [", 1))
    outcome = await course.bot.reload()
    assert not outcome.accepted
    banner = page.locator("#banner")
    await banner.wait_for(state="visible", timeout=TIMEOUT)
    shown = await page.locator("#banner-lines").inner_text()
    assert shown.splitlines() == outcome.lines()
    assert re.match(rf"^{re.escape(str(broken))}:\d+: ", shown)
    await tap(page, "Next")
    await slide.locator("text=2 / 13").wait_for(timeout=TIMEOUT)
    await device.screenshot("webchat-09-refused")

    # Fixed: the banner goes.
    broken.write_text(broken.read_text().replace("slides: [", "slides:", 1))
    assert (await course.bot.reload()).accepted
    await banner.wait_for(state="hidden", timeout=TIMEOUT)
    assert device.errors == []
