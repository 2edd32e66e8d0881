"""The stats page in a real browser (Debian's Chromium, driven by Playwright): it draws every chart, fetches
nothing, logs no error; a screenshot is saved as tests/artifacts/stats-report.png."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bench import events
from bot.stats import html, query, report
from tests.browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, distinct_bytes, needs_chromium
from tests.conftest import course_content

pytestmark = needs_chromium

CONTENT = course_content()
DESKTOP = {"width": 1000, "height": 900}


def page_of_simulated_learners(folder: Path, learners: int) -> Path:
    path = folder / "events.sqlite3"
    with sqlite3.connect(path) as conn:
        events.create_table(conn)
        events.write(conn, events.simulate(CONTENT.english, learners, seed=11))
        conn.executescript(query.INDEXES)
    conn.close()
    result = report.build(CONTENT, query.read(path, query.Filters()), query.Filters())
    page = folder / "stats.html"
    page.write_text(html.render(result), encoding="utf-8")
    return page


async def test_the_report_page_draws_a_funnel_per_lesson_and_a_bar_per_option_offline(tmp_path):
    from playwright.async_api import async_playwright

    document = page_of_simulated_learners(tmp_path, 500)
    requests: list[str] = []
    errors: list[str] = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport=DESKTOP)
            page.on("request", lambda request: requests.append(request.url))
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: errors.append(str(error)))
            await page.goto(document.as_uri())
            funnels = page.locator("svg.funnel")
            assert await funnels.count() == len(CONTENT.english.lessons)
            options = sum(len(q.options) for lesson in CONTENT.english.lessons for q in lesson.quiz)
            assert await page.locator("svg.options rect.option").count() == options
            assert await page.locator("svg.options rect.option.right").count() == CONTENT.english.question_count
            for index in range(await funnels.count()):
                box = await funnels.nth(index).bounding_box()
                assert box is not None and box["width"] > 600 and box["height"] > 200, box
            # Every learner of a lesson reached its first slide: that bar spans the whole track.
            first, track = (
                page.locator("svg.funnel").first.locator("rect.reached").first,
                page.locator("svg.funnel").first.locator("rect.track").first,
            )
            assert await first.get_attribute("width") == f"{float(await track.get_attribute('width')):.1f}"
            assert await page.locator(".flag").count() >= 1  # the simulation has distractors nobody picks
            ARTIFACTS.mkdir(exist_ok=True)
            shot = ARTIFACTS / "stats-report.png"
            await page.screenshot(path=str(shot), full_page=True)
        finally:
            await browser.close()
    assert requests == [document.as_uri()], "the page fetches nothing but itself"
    assert errors == []
    assert distinct_bytes(shot.read_bytes()) > 40, f"{shot} looks blank"
