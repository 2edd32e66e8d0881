"""Live content: a reload lints first, swaps atomically, and keeps what is in use when the files are broken."""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

import pytest

from bot.errors import ContentError
from bot.i18n import _
from bot.library.live import Library
from tests.conftest import LESSONS, LOCALES

SLIDE_TEXT = "Autograd works out derivatives for you."


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the English lessons and of every catalog, to edit."""
    shutil.copytree(LESSONS / "en", tmp_path / "lessons" / "en")
    shutil.copytree(LOCALES, tmp_path / "locales", ignore=shutil.ignore_patterns("*.mo"))
    return tmp_path / "lessons", tmp_path / "locales"


def first_slide(library: Library) -> str:
    return library.current.content.english.lessons[0].slides[0].text


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


async def test_a_valid_change_is_used_from_the_reload_on(files):
    lessons, locales = files
    library = Library(lessons, locales)
    assert SLIDE_TEXT in first_slide(library)
    edit(lessons / "en" / "01-requires-grad.yaml", "Autograd works out", "Autograd computes")
    outcome = await library.reload()
    assert outcome.accepted
    assert outcome.lines() == ["edition 2: 4 lessons in 8 languages"]
    assert "Autograd computes derivatives" in first_slide(library)


async def test_broken_lessons_are_refused_with_file_and_line_and_the_old_ones_keep_serving(files, caplog):
    lessons, locales = files
    library = Library(lessons, locales)
    before = library.current
    edit(lessons / "en" / "01-requires-grad.yaml", "  - id: off-by-default\n", "  - id: what-autograd-does\n")
    with caplog.at_level(logging.ERROR, logger="bot.library.live"):
        outcome = await library.reload()
    assert not outcome.accepted
    (line,) = outcome.lines()
    assert line.startswith(f"{lessons / 'en' / '01-requires-grad.yaml'}:{_second_id_line(lessons)}: ")
    assert "what-autograd-does" in line
    assert line in caplog.messages  # the same line in the log
    assert library.current is before


async def test_a_broken_yaml_file_is_refused_too(files):
    lessons, locales = files
    library = Library(lessons, locales)
    edit(lessons / "en" / "02-backward.yaml", "slides:", "slides: [")
    outcome = await library.reload()
    assert not outcome.accepted
    assert all("02-backward.yaml:" in line for line in outcome.lines()), outcome.lines()
    assert SLIDE_TEXT in first_slide(library)


async def test_a_changed_catalog_is_used_from_the_reload_on(files):
    lessons, locales = files
    library = Library(lessons, locales)
    catalog = locales / "de" / "LC_MESSAGES" / "messages.po"
    edit(catalog, 'msgstr "Menü"', 'msgstr "Hauptmenü"')
    assert (await library.reload()).accepted
    with library.current.i18n.use("de"):
        assert _("Menu") == "Hauptmenü"


async def test_an_update_keeps_the_edition_it_began_with_while_a_reload_lands(files):
    lessons, locales = files
    library = Library(lessons, locales)
    began = asyncio.Event()
    reloaded = asyncio.Event()

    async def update() -> tuple[str, str]:
        library.pin()  # what the bot does when an update arrives
        before = first_slide(library)
        began.set()
        await reloaded.wait()
        return before, first_slide(library)

    handling = asyncio.create_task(update())
    await began.wait()
    edit(lessons / "en" / "01-requires-grad.yaml", "Autograd works out", "Autograd computes")
    assert (await library.reload()).accepted
    reloaded.set()
    before, after = await handling
    assert before == after  # the update in flight finished on its own edition
    assert "Autograd computes" in (await asyncio.create_task(_pinned_text(library)))


def _second_id_line(lessons) -> int:
    """Return the line of the slide id the tests above repeat: the second 'what-autograd-does'."""
    text = (lessons / "en" / "01-requires-grad.yaml").read_text(encoding="utf-8").splitlines()
    return [n for n, line in enumerate(text, 1) if line == "  - id: what-autograd-does"][1]


async def _pinned_text(library: Library) -> str:
    library.pin()
    return first_slide(library)


def test_the_start_refuses_invalid_content(files):
    lessons, locales = files
    edit(lessons / "en" / "01-requires-grad.yaml", "  - id: off-by-default\n", "  - id: what-autograd-does\n")
    with pytest.raises(ContentError, match=rf"01-requires-grad\.yaml:{_second_id_line(lessons)}"):
        Library(lessons, locales)
