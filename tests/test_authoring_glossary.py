"""bot.authoring.glossary: one term per concept in each language, each other name reported where a lesson uses it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot.authoring import glossary
from bot.course.parsing import parse
from tests.test_course_parsing import edit, line_of

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "lessons"


@pytest.fixture
def lessons(tmp_path: Path) -> Path:
    target = tmp_path / "lessons"
    for language in ("en", "ru", "ja"):
        shutil.copytree(LESSONS / language, target / language)
    return target


def check(lessons_dir: Path) -> tuple[list[str], list[str]]:
    content, problems = parse(lessons_dir)
    assert content is not None and problems == [], problems
    found, warnings = glossary.check(content, lessons_dir)
    return [str(p) for p in found], warnings


def test_every_shipped_language_has_a_glossary_of_every_concept_and_keeps_to_it():
    content, problems = parse(LESSONS)
    assert content is not None and problems == []
    assert glossary.check(content, LESSONS) == ([], [])
    english = glossary.read(LESSONS / "en" / glossary.GLOSSARY_FILE, None, [])
    assert english is not None and {"loss", "learning-rate", "forward-pass"} <= {t.concept for t in english.terms}
    for language in content.translations:
        read = glossary.read(LESSONS / language / glossary.GLOSSARY_FILE, [t.concept for t in english.terms], [])
        assert read is not None and [t.concept for t in read.terms] == [t.concept for t in english.terms], language


def test_an_english_name_in_a_russian_slide_is_reported_at_the_slide_but_not_inside_code(lessons):
    path = lessons / "ru" / "03-grad.yaml"
    edit(path, "Убери `opt.zero_grad()`, и `w`", "Убери `opt.zero_grad()`, и loss и `loss` и `w`")
    found, _ = check(lessons)
    line = line_of(path, "- id: loop-order")
    assert found == [
        f"{path}:{line}: slide 'loop-order': calls 'loss' 'loss'; {lessons / 'ru' / 'glossary.yaml'} says "
        "'функция потерь'"
    ]


def test_names_match_whole_words_in_any_case_and_anywhere_in_japanese(lessons):
    ru = lessons / "ru" / "03-grad.yaml"
    edit(ru, "Убери `opt.zero_grad()`, и `w`", "Убери `opt.zero_grad()`, и Лосс, и лоссовый `w`")
    ja = lessons / "ja" / "03-grad.yaml"
    edit(ja, "各回で古い勾配をクリアし", "各パスで古い勾配をクリアし")
    found, _ = check(lessons)
    assert [f.split(": ", 1)[1] for f in found] == [
        f"exercise: calls 'pass' 'パス'; {lessons / 'ja' / 'glossary.yaml'} says '回'",
        f"slide 'loop-order': calls 'loss' 'Лосс'; {lessons / 'ru' / 'glossary.yaml'} says 'функция потерь'",
    ]


def test_code_written_out_in_a_title_is_not_a_name(lessons):
    # 'optimizer.zero_grad()' names the method: not the concept called by another name.
    glossary_path = lessons / "ru" / "glossary.yaml"
    assert "optimizer: {use: оптимизатор, not: [optimizer]}" in glossary_path.read_text(encoding="utf-8")
    assert check(lessons) == ([], [])


def test_an_untranslated_part_falls_back_to_english_and_is_not_checked_against_the_translation(lessons):
    path = lessons / "ru" / "03-grad.yaml"
    text = path.read_text(encoding="utf-8")
    start, end = text.index("  - id: loop-order\n"), text.index("  - id: accumulate\n")
    path.write_text(text[:start] + text[end:], encoding="utf-8")  # the English slide, with 'loss', is shown instead
    content, _ = parse(lessons)
    assert content is not None and content.course("ru").lesson("grad").slides[10].fallback
    found, _ = glossary.check(content, lessons)
    assert found == []


def test_a_glossary_must_name_every_english_concept_and_no_other(lessons):
    path = lessons / "ru" / "glossary.yaml"
    edit(path, "  chunk: {use: часть, not: [чанк, кусок, куски]}\n", "  chunks: {use: часть}\n")
    found, _ = check(lessons)
    assert found == [
        f"{path}:{line_of(path, 'chunks:')}: glossary: 'chunks' is not a concept of the English glossary "
        "(gradient, leaf, requires-grad, loss, forward-pass, backward-pass, pass, batch, chunk, optimizer, "
        "learning-rate, training-loop, in-place, prediction, tracking)",
        f"{path}:{line_of(path, 'terms:')}: glossary: no term for 'chunk': one for each English concept",
    ]


def test_a_term_may_not_also_be_one_of_its_other_names(lessons):
    path = lessons / "ja" / "glossary.yaml"
    edit(path, "  loss: {use: 損失, not: [ロス]}", "  loss: {use: 損失, not: [ロス, 損失]}")
    found, _ = check(lessons)
    assert found == [f"{path}:{line_of(path, 'loss:')}: glossary: 'loss': '損失' is its term, so it is not under 'not'"]


def test_a_translation_without_a_glossary_is_a_warning_that_strict_lint_refuses(lessons, monkeypatch):
    (lessons / "ja" / "glossary.yaml").unlink()
    found, warnings = check(lessons)
    assert found == []
    assert warnings == [
        f"{lessons / 'ja'}: no glossary.yaml: give each concept of {lessons / 'en' / 'glossary.yaml'} its one "
        "term in this language"
    ]
