"""A partial translation: translated slides in the learner's language, the rest in English with a notice."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, write_po

from bot.library.load import load_valid
from tests.conftest import LOCALES, running, with_lessons
from tests.journey import answer_quiz, position, send_and_wait, tap_and_wait_edit

NOTICE_RU = "Эта часть ещё не переведена, поэтому показана на английском."
TRANSLATED = {
    "This part is not translated yet, so it is shown in English.": NOTICE_RU,
    "Next ▶": "Далее ▶",
    "◀ Back": "◀ Назад",
}


@pytest.fixture
def partial_locales(tmp_path: Path) -> Path:
    """The shipped catalogs plus a small Russian one covering a few strings."""
    target = tmp_path / "locales"
    shutil.copytree(LOCALES, target)
    with (LOCALES / "messages.pot").open("rb") as pot:
        template = read_po(pot)
    catalog = Catalog(locale="ru")
    catalog.update(template)
    for message in catalog:
        if message.id in TRANSLATED:
            message.string = TRANSLATED[message.id]
    (target / "ru" / "LC_MESSAGES").mkdir(parents=True, exist_ok=True)
    with (target / "ru" / "LC_MESSAGES" / "messages.po").open("wb") as po:
        write_po(po, catalog)
    return target


async def test_a_russian_learner_gets_translated_slides_and_english_ones_with_a_notice(
    config, standin, partial_content, partial_locales
):
    config = with_lessons(config, partial_content, partial_locales)
    content = load_valid(partial_content, partial_locales)
    russian, english = content.course("ru"), content.english
    lesson_ru = russian.lesson("grad")
    lesson_en = english.lesson("grad")
    ivan = standin.learner(user_id=4001, first_name="Иван", language_code="ru-RU")
    async with running(config):
        menu = await send_and_wait(ivan, "/start")
        assert russian.title in menu["text"]
        slide = await tap_and_wait_edit(ivan, menu, "3. ")
        assert position(slide) == (1, len(lesson_en.slides))
        for index in range(len(lesson_en.slides)):
            shown_ru, shown_en = lesson_ru.slides[index], lesson_en.slides[index]
            if shown_ru.fallback:
                assert shown_en.title in slide["text"]
                assert NOTICE_RU in slide["text"]
            else:
                assert shown_ru.title in slide["text"]
                assert shown_en.title not in slide["text"]
                assert NOTICE_RU not in slide["text"]
            if index < len(lesson_en.slides) - 1:
                slide = await tap_and_wait_edit(ivan, slide, "Далее")
        translated = [s for s in lesson_ru.slides if not s.fallback]
        assert 0 < len(translated) < len(lesson_ru.slides)

        result = await answer_quiz(ivan, slide, lesson_ru)
        sent = ivan.messages[-(len(lesson_ru.quiz) + 1 + sum(q.fallback for q in lesson_ru.quiz)) :]
        polls = [m for m in sent if "poll" in m]
        assert [p["poll"]["question"] for p in polls] == [q.question for q in lesson_ru.quiz]
        assert any(not q.fallback for q in lesson_ru.quiz) and any(q.fallback for q in lesson_ru.quiz)
        notices = [m for m in sent if m.get("text") == NOTICE_RU]
        assert len(notices) == sum(1 for q in lesson_ru.quiz if q.fallback)
        assert NOTICE_RU in result["text"]  # the recap is not translated in the fixture
    assert standin.errors() == []
