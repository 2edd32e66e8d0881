"""The web chat at phone size (390x844) in a real browser: code as wide as lint allows, wrapped lines that keep
Python's indentation, every shipped script in a real font, the command menu in Arabic, the composer, START,
"typing…", photos and button labels.

Chromium (Debian's) driven by Playwright, the real bot and its built-in Bot API server, no runner (nothing here
runs code). What is asserted is what the page shows, measured in the page. Screenshots go to tests/artifacts/.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import telegram
from telegram.constants import ChatAction, ParseMode

from bot.course.phone_width import CODE_LINE_MAX
from bot.webchat.local import LocalCourse, local_course
from tests.browser import CHROMIUM, CHROMIUM_ARGS, PHONE, Phone, needs_chromium
from tests.conftest import course_content, web_chat_config
from tests.images import png

pytestmark = needs_chromium
COURSE = course_content()
TIMEOUT = 10_000  # ms for the bot to answer

# Row count, left edges and caret columns of code lines, measured in the page.
MEASURE = """
(line) => {
  const node = line.firstChild;
  const height = parseFloat(getComputedStyle(line).lineHeight);
  const rect = (i) => { const r = document.createRange(); r.setStart(node, i); r.setEnd(node, i + 1);
                        return r.getBoundingClientRect(); };
  const text = node ? node.textContent : "";
  const first = node ? rect(0) : null;
  let continuation = null;
  for (let i = 1; i < text.length; i += 1) {
    const r = rect(i);
    if (r.width > 0 && r.top > first.top + height / 2) { continuation = { index: i, left: r.left }; break; }
  }
  return {
    rows: Math.round(line.getBoundingClientRect().height / height),
    start: first ? first.left : 0,
    column: first ? first.width : 0,
    continuation,
    fits: line.scrollWidth <= line.clientWidth + 1,
  };
}
"""
CARET_GAPS = """
(pair) => {
  const [source, carets] = pair.querySelectorAll(".line");
  const left = (node, i) => { const r = document.createRange(); r.setStart(node.firstChild, i);
                              r.setEnd(node.firstChild, i + 1); return r.getBoundingClientRect().left; };
  const gaps = [];
  [...carets.textContent].forEach((c, i) => { if (c === "^") gaps.push(Math.abs(left(carets, i) - left(source, i))); });
  return {gaps, fits: pair.scrollWidth <= pair.clientWidth + 1};
}
"""


@pytest.fixture
async def course(tmp_path: Path) -> AsyncIterator[LocalCourse]:
    async with local_course(web_chat_config(tmp_path)) as running:
        yield running


@asynccontextmanager
async def desktop(width: int = PHONE["width"]) -> AsyncIterator[Phone]:
    """A narrow window on a desktop: a mouse and a keyboard, no touch screen."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = await browser.new_context(viewport={**PHONE, "width": width}, device_scale_factor=1)
            opened = Phone(await context.new_page())
            opened.page.on("pageerror", lambda e: opened.errors.append(str(e)))
            yield opened
        finally:
            await browser.close()


@asynccontextmanager
async def as_the_bot(course: LocalCourse) -> AsyncIterator[telegram.Bot]:
    """The course bot's own token, for messages a test needs on screen that no lesson sends as they are."""
    async with telegram.Bot(course.api.token, base_url=course.api.base_url) as bot:
        yield bot


async def started(course: LocalCourse, device: Phone) -> int:
    """Open the chat as a new learner, tap START, return the learner's id."""
    page = device.page
    await page.goto(course.chat.url)
    await page.locator("#start-button").click()
    await page.locator(".row.in", has_text="PyTorch autograd").wait_for(timeout=TIMEOUT)
    return int(await page.evaluate("Number(localStorage.getItem('coursebot.learner'))"))


async def tap(page, label: str) -> None:
    await page.locator(".row.in .keyboard button", has_text=label).last.click()


async def choose_language(page, code: str) -> None:
    await page.click("#settings-button")
    await page.select_option("#language-select", code)
    # A locator, not wait_for_function: the page's CSP forbids the eval that polls a predicate.
    await page.locator(f"html[lang='{code}']").wait_for(state="attached")


async def open_slide(page, lesson_index: int, slide_id: str, language: str = "en") -> None:
    """Open a lesson from a new /lessons menu and tap Next up to the slide with this id."""
    lesson = COURSE.course(language).lessons[lesson_index]
    position = [slide.id for slide in lesson.slides].index(slide_id) + 1
    before = await page.locator(".row.in").count()
    await page.fill("#input", "/lessons")
    await page.click("#send-button")
    slide = page.locator(".row.in").nth(before)  # the menu, which turns into the lesson's slides
    title = re.sub(r"[`*]", "", lesson.title)[:10]
    await slide.locator(".keyboard button", has_text=title).click(timeout=TIMEOUT)
    total = len(lesson.slides)
    await slide.locator(f"text=/1 \\/ {total}/").wait_for(timeout=TIMEOUT)
    next_label = (await slide.locator(".keyboard button").first.inner_text()).strip()
    for n in range(2, position + 1):
        await slide.locator(".keyboard button", has_text=next_label).click()
        await slide.locator(f"text=/{n} \\/ {total}/").wait_for(timeout=TIMEOUT)


# ---------------------------------------------------------------------------------------------- code


def _code(columns: int, indent: int = 0) -> str:
    return " " * indent + "x" * (columns - indent)


async def test_code_shows_exactly_the_lint_width_and_a_wrapped_line_hangs_past_its_indentation(
    course: LocalCourse, device: Phone
):
    page = device.page
    learner = await started(course, device)
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "<practice>", line 6, in <module>\n'
        "    loss = ((pred - 2 * x) ** 2).mean().item()\n"
        "                                 ^^^^^^^^\n"
        "AttributeError: 'NoneType' object has no attribute"
    )
    lines = [
        _code(CODE_LINE_MAX),
        _code(CODE_LINE_MAX + 1),
        "for step in range(50):",
        "    loss = ((pred - 2 * x) ** 2).mean() + w.abs().sum()",
    ]
    async with as_the_bot(course) as bot:
        await bot.send_message(learner, "<pre>" + "\n".join(lines) + "</pre>", parse_mode=ParseMode.HTML)
        await bot.send_message(learner, f"<pre>{_html(traceback)}</pre>", parse_mode=ParseMode.HTML)
    await page.locator(".row.in pre .pair").wait_for(timeout=TIMEOUT)
    block = page.locator(".row.in pre").nth(-2)
    measured = [await line.evaluate(MEASURE) for line in await block.locator(".line").all()]
    exact, over, loop, body = measured
    assert exact["rows"] == 1 and exact["fits"], "a line as wide as lint allows must not wrap"
    assert over["rows"] == 2, "one column more must wrap: the box is exactly the lint width"
    assert loop["rows"] == 1
    assert body["rows"] == 2
    column = body["column"]
    # The continuation starts past the line's own 4 spaces (plus 2): never at column 0 or at the loop's level.
    assert body["continuation"]["left"] >= body["start"] + (4 + 2) * column - 0.5
    marker = await block.locator(".line").nth(3).evaluate("e => getComputedStyle(e).backgroundImage")
    assert "svg" in marker  # the ↪ painted on continuation rows
    pair = page.locator(".row.in pre .pair").last
    carets = await pair.evaluate(CARET_GAPS)
    assert len(carets["gaps"]) == 8 and max(carets["gaps"]) < 0.5, "each ^ stays under its token"
    assert carets["fits"], "a source line and its carets shrink to fit rather than scroll"
    await page.locator(".row.in").nth(-2).scroll_into_view_if_needed()
    await device.screenshot("webchat-code-wrapped")
    assert device.errors == []


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


async def test_lesson_3s_training_step_slide_fits_the_phone_without_wrapping(course: LocalCourse, device: Phone):
    page = device.page
    await started(course, device)
    await open_slide(page, 2, "loop-order")
    slide = page.locator(".row.in").last
    code = slide.locator("pre .line")
    rows = [(await line.inner_text(), (await line.evaluate(MEASURE))["rows"]) for line in await code.all()]
    wrapped = [text for text, count in rows if count > 1]
    assert "    opt.zero_grad()" in [text for text, _ in rows]
    await device.screenshot("webchat-lesson3-training-step")
    assert wrapped == [], f"these lines wrap at 390 px: {wrapped}"
    assert device.errors == []


async def test_a_narrower_phone_wraps_behind_a_hanging_indent(course: LocalCourse):
    async with desktop(width=320) as narrow:
        page = narrow.page
        await started(course, narrow)
        await open_slide(page, 2, "loop-order")
        lines = page.locator(".row.in").last.locator("pre .line")
        wrapped = 0
        for line in await lines.all():
            measured = await line.evaluate(MEASURE)
            if measured["rows"] > 1:
                wrapped += 1
                indent = len(await line.inner_text()) - len((await line.inner_text()).lstrip(" "))
                assert measured["continuation"]["left"] >= measured["start"] + (indent + 2) * measured["column"] - 0.5
        assert wrapped >= 1  # 320 px shows fewer than the lint width: the loop body wraps, and hangs
        await narrow.screenshot("webchat-code-320px")


# ---------------------------------------------------------------------------------------- languages

TOFU = """
([family, characters]) => {
  const canvas = document.createElement("canvas");
  canvas.width = 48; canvas.height = 48;
  const context = canvas.getContext("2d", {willReadFrequently: true});
  return characters.map((character) => {
    context.clearRect(0, 0, 48, 48);
    context.font = "32px " + family;
    context.fillText(character, 4, 38);
    return Array.from(context.getImageData(0, 0, 48, 48).data.filter((_, i) => i % 4 === 3)).join(",");
  });
}
"""


async def test_japanese_shows_real_glyphs_not_boxes(course: LocalCourse, device: Phone):
    page = device.page
    await started(course, device)
    await choose_language(page, "ja")
    await open_slide(page, 2, "loop-order", "ja")
    text = page.locator(".row.in").last.locator(".text")
    shown = await text.inner_text()
    kanji = sorted({c for c in shown if "\u3040" <= c <= "\u9fff"})[:8]
    assert len(kanji) >= 4, shown
    family = await text.evaluate("e => getComputedStyle(e).fontFamily")
    # Two unassigned code points draw the same box (.notdef): that is what tofu looks like.
    tofu, tofu_again, *glyphs = await page.evaluate(TOFU, [family, ["\u0378", "\u0379", *kanji]])
    assert tofu == tofu_again
    assert all(glyph != tofu for glyph in glyphs), "a Japanese character drew the empty box"
    assert len(set(glyphs)) == len(glyphs), "different characters drew the same shape"
    await device.screenshot("webchat-japanese-slide")
    assert device.errors == []


async def test_arabics_command_menu_reads_slash_run_left_to_right(course: LocalCourse, device: Phone):
    page = device.page
    await started(course, device)
    await choose_language(page, "ar")
    await page.click("#menu-button")
    run = page.locator("#command-menu button", has=page.locator(".name", has_text="/run"))
    description = run.locator(".description")
    await description.wait_for()
    order = await description.evaluate(
        """e => {
          const node = e.firstChild, text = node.textContent, at = text.indexOf("/run");
          const left = (i) => { const r = document.createRange(); r.setStart(node, i); r.setEnd(node, i + 1);
                                return r.getBoundingClientRect().left; };
          return {slash: left(at), r: left(at + 1), close: left(text.indexOf(")", at))};
        }"""
    )
    assert order["slash"] < order["r"] < order["close"], order  # '/run print(1)', not 'run print(1)/'
    await device.screenshot("webchat-arabic-menu")
    assert device.errors == []


# ------------------------------------------------------------------------------------ the chat itself


async def test_a_new_learner_sees_start_and_the_bot_typing(course: LocalCourse, device: Phone):
    page = device.page
    await page.goto(course.chat.url)
    await page.locator("#start-button", has_text="START").wait_for()
    assert await page.locator("#composer").is_hidden()
    assert await page.locator(".row").count() == 0
    await device.screenshot("webchat-start")
    learner = await started(course, device)
    assert await page.locator("#composer").is_visible()
    async with as_the_bot(course) as bot:
        await bot.send_chat_action(learner, ChatAction.TYPING)
        await page.locator("#bot-status", has_text="typing…").wait_for(timeout=TIMEOUT)
        await device.screenshot("webchat-typing")
        await bot.send_message(learner, "Done.")
    await page.locator("#bot-status", has_text="bot").wait_for(timeout=TIMEOUT)
    assert device.errors == []


async def test_enter_sends_on_a_desktop_but_not_inside_an_open_code_fence(course: LocalCourse):
    async with desktop() as opened:
        page = opened.page
        await started(course, opened)
        composer = page.locator("#input")
        assert "Enter" in (await composer.get_attribute("placeholder") or "")
        await composer.click()
        await page.keyboard.type("```")
        await page.keyboard.press("Enter")
        await page.keyboard.type("print(1)")
        await page.keyboard.press("Shift+Enter")
        await page.keyboard.type("```")
        assert await composer.input_value() == "```\nprint(1)\n```"  # nothing sent yet
        await page.keyboard.press("Enter")  # the fence is closed: Enter sends
        await page.locator(".row.out", has_text="print(1)").wait_for(timeout=TIMEOUT)
        assert await composer.input_value() == ""
        await page.keyboard.type("/progress")
        await page.keyboard.press("Enter")
        await page.locator(".row.out", has_text="/progress").wait_for(timeout=TIMEOUT)


async def test_on_a_phone_enter_adds_a_line_and_the_placeholder_says_to_tap_send(course: LocalCourse, device: Phone):
    page = device.page
    await started(course, device)
    composer = page.locator("#input")
    assert "➤" in (await composer.get_attribute("placeholder") or "")
    await composer.click()
    await page.keyboard.type("x = 1")
    await page.keyboard.press("Enter")
    await page.keyboard.type("print(x)")
    assert await composer.input_value() == "x = 1\nprint(x)"
    await page.click("#send-button")
    await page.locator(".row.out", has_text="print(x)").wait_for(timeout=TIMEOUT)


async def test_a_photo_from_the_bot_shows_in_the_chat(course: LocalCourse, device: Phone):
    page = device.page
    learner = await started(course, device)
    async with as_the_bot(course) as bot:
        await bot.send_photo(
            learner, png(300, 200, (230, 120, 40)), caption="🎓 <b>Course complete</b>", parse_mode="HTML"
        )
    image = page.locator(".row.in .photo img")
    await image.wait_for(timeout=TIMEOUT)
    await image.evaluate("e => e.decode()")  # resolves once the photo is loaded and decoded
    assert await image.evaluate("e => [e.naturalWidth, e.naturalHeight]") == [300, 200]
    assert await page.locator(".row.in .photo .caption b", has_text="Course complete").count() == 1
    await device.screenshot("webchat-photo")
    assert device.errors == []


@pytest.mark.parametrize("language", ["en", "de", "ar", "ja"])
async def test_no_button_label_is_cut_on_a_drill(course: LocalCourse, device: Phone, language: str):
    page = device.page
    await started(course, device)
    if language != "en":
        await choose_language(page, language)
    lesson = COURSE.course(language).lessons[0]
    await open_slide(page, 0, lesson.slides[-1].id, language)
    await page.locator(".row.in .keyboard button", has_text="🧩").last.click()
    drill = page.locator(".row.in").last
    await drill.locator(".keyboard button", has_text="☰").wait_for(timeout=TIMEOUT)
    cut = await drill.locator(".keyboard button").evaluate_all(
        "buttons => buttons.filter(b => b.scrollWidth > b.clientWidth + 1).map(b => b.textContent)"
    )
    await device.screenshot(f"webchat-drill-{language}")
    assert cut == [], f"labels cut at 390 px: {cut}"
