"""The running bot reloads its lessons and catalogs: learners see a changed slide, broken files change nothing.

Against the Bot API stand-in, with the lessons and catalogs copied to a folder the tests edit.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from bot import control
from bot.app import CourseBot
from bot.config import Config
from bot.context import Services, update_scope
from tests.conftest import LESSONS, LOCALES, running
from tests.journey import position, send_and_wait, tap_and_wait_edit

LESSON_1 = Path("en") / "01-requires-grad.yaml"


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    shutil.copytree(LESSONS / "en", tmp_path / "lessons" / "en")
    shutil.copytree(LOCALES, tmp_path / "locales", ignore=shutil.ignore_patterns("*.mo"))
    return tmp_path / "lessons", tmp_path / "locales"


@pytest.fixture
async def live_bot(config: Config, files: tuple[Path, Path]) -> AsyncIterator[CourseBot]:
    lessons, locales = files
    async with running(replace(config, lessons_dir=lessons, locales_dir=locales)) as bot:
        yield bot


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


async def on_slide_2(standin, user_id: int = 7001) -> tuple[object, dict]:
    ada = standin.learner(user_id=user_id)
    welcome = await send_and_wait(ada, "/start")
    slide = await tap_and_wait_edit(ada, welcome, "Start the course")
    slide = await tap_and_wait_edit(ada, slide, "Next")
    assert position(slide) == (2, 13)
    return ada, slide


async def test_an_edited_slide_changes_in_place_for_the_learner_reading_it(live_bot, standin, files):
    lessons, _ = files
    ada, slide = await on_slide_2(standin)
    edit(lessons / LESSON_1, "A tensor you create is **not** tracked", "A new tensor is **not** tracked")
    reloaded = asyncio.ensure_future(ada.wait_edit(slide["message_id"]))
    outcome = await control_reload(live_bot)
    assert outcome == (True, ["edition 2: 4 lessons in 8 languages"])
    refreshed = await reloaded
    assert "A new tensor is not tracked" in refreshed["text"]
    assert position(refreshed) == (2, 13)  # the learner keeps their place
    following = await tap_and_wait_edit(ada, refreshed, "Next")
    assert position(following) == (3, 13)
    assert standin.errors() == []


async def test_a_broken_lesson_is_refused_with_its_file_line_and_the_course_keeps_working(live_bot, standin, files):
    lessons, _ = files
    ada, slide = await on_slide_2(standin)
    edit(lessons / LESSON_1, "  - id: off-by-default\n", "  - id: what-autograd-does\n")
    ids = [n for n, line in enumerate((lessons / LESSON_1).read_text().splitlines(), 1) if "what-autograd" in line]
    accepted, lines = await control_reload(live_bot)
    assert not accepted
    assert lines == [f"{lessons / LESSON_1}:{ids[1]}: " + lines[0].split(f":{ids[1]}: ", 1)[1]]
    assert "what-autograd-does" in lines[0]
    following = await tap_and_wait_edit(ada, slide, "Next")
    assert position(following) == (3, 13)
    assert "Off by default" not in following["text"]
    assert standin.errors() == []


async def test_a_learner_keeps_their_place_when_slides_are_removed(live_bot, standin, files):
    lessons, _ = files
    ada = standin.learner(user_id=7002)
    welcome = await send_and_wait(ada, "/start")
    slide = await tap_and_wait_edit(ada, welcome, "Start the course")
    for _ in range(12):
        slide = await tap_and_wait_edit(ada, slide, "Next")
    assert position(slide) == (13, 13)
    path = lessons / LESSON_1
    text = path.read_text()
    cut_from, cut_to = text.index("  - id: not-differentiable"), text.index("quiz:")
    path.write_text(text[:cut_from] + text[cut_to:])  # the last three slides are gone
    refreshing = asyncio.ensure_future(ada.wait_edit(slide["message_id"]))
    assert (await live_bot.reload()).accepted
    refreshed = await refreshing
    assert position(refreshed) == (10, 10)
    menu = await send_and_wait(ada, "/start")
    assert "computational graph — Quick Check and drills to finish" in menu["text"]  # the slides stay read


async def test_a_changed_catalog_republishes_the_command_menu(live_bot, standin, files):
    _, locales = files
    edit(
        locales / "de" / "LC_MESSAGES" / "messages.po",
        'msgid "The course menu"\nmsgstr "',
        'msgid "The course menu"\nmsgstr "Neu: ',
    )
    assert (await live_bot.reload()).accepted
    lessons = next(c for c in standin.commands[("default", "de")] if c["command"] == "lessons")
    assert lessons["description"].startswith("Neu: ")


async def test_an_update_in_flight_finishes_on_the_content_it_began_with(live_bot, files):
    lessons, _ = files
    services: Services = live_bot.app.bot_data.services
    async with update_scope(services, object()):
        before = services.content
        edit(lessons / LESSON_1, "Autograd works out", "Autograd computes")
        assert (await live_bot.reload()).accepted
        assert services.content is before
    assert services.content is not before
    assert "Autograd computes" in services.content.english.lessons[0].slides[0].text


async def control_reload(bot: CourseBot) -> tuple[bool, list[str]]:
    """What `coursebot reload` does: ask over the control socket."""
    return await asyncio.to_thread(control.request, bot.config.control_path)
