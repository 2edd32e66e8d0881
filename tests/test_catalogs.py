"""The shipped catalogs: complete, never fuzzy, placeholders intact, plural rules right, and the .pot current.

Each test is parametrized by language code, so `pytest tests/test_catalogs.py -k ru` checks one catalog.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from babel import Locale
from babel.messages.plurals import get_plural
from babel.messages.pofile import read_po

from bot.i18n import I18n, ngettext

ROOT = Path(__file__).resolve().parent.parent
LOCALES = ROOT / "locales"
POT = LOCALES / "messages.pot"
SHIPPED = sorted(
    p.parent.parent.name for p in LOCALES.glob("*/LC_MESSAGES/messages.po") if p.parent.parent.name != "en"
)
REQUIRED = {"ru", "es", "ja", "ar"}
PLACEHOLDER = re.compile(r"\{[a-z_]*\}")


def _read(path: Path, locale: str | None = None):
    with path.open("rb") as f:
        return read_po(f, locale=locale)


def _ids(catalog) -> set:
    return {m.id for m in catalog if m.id}


def test_the_required_languages_and_at_least_three_more_ship():
    assert REQUIRED <= set(SHIPPED)
    assert len(set(SHIPPED) - REQUIRED) >= 3


@pytest.mark.parametrize("language", SHIPPED)
def test_every_message_is_translated_and_none_is_fuzzy(language):
    catalog = _read(LOCALES / language / "LC_MESSAGES" / "messages.po", language)
    untranslated, fuzzy = [], []
    for message in catalog:
        if not message.id:
            continue
        if message.fuzzy:
            fuzzy.append(message.id)
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        if not all(s.strip() for s in strings):
            untranslated.append(message.id)
    assert fuzzy == [], f"{language}: fuzzy messages"
    assert untranslated == [], f"{language}: untranslated messages"


@pytest.mark.parametrize("language", SHIPPED)
def test_each_translation_keeps_the_placeholders_of_its_source(language):
    catalog = _read(LOCALES / language / "LC_MESSAGES" / "messages.po", language)
    wrong = []
    for message in catalog:
        if not message.id:
            continue
        ids = message.id if isinstance(message.id, tuple) else (message.id,)
        wanted = set().union(*(PLACEHOLDER.findall(i) for i in ids))
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        for string in filter(None, strings):  # an empty one is the test above's to report
            # A plural form may spell out its number ("одна", "واحد"), so it may leave {n} out, never add one.
            found = set(PLACEHOLDER.findall(string))
            allowed = found <= wanted and (isinstance(message.id, tuple) or found == wanted)
            if not allowed:
                wrong.append((ids[0], string))
    assert wrong == []


@pytest.mark.parametrize("language", SHIPPED)
def test_the_plural_forms_are_babels_for_the_language(language):
    catalog = _read(LOCALES / language / "LC_MESSAGES" / "messages.po", language)
    rule = get_plural(Locale.parse(language))
    assert (catalog.num_plurals, catalog.plural_expr) == (rule.num_plurals, rule.plural_expr)
    for message in catalog:
        if message.id and isinstance(message.id, tuple):
            assert len(message.string) == rule.num_plurals, message.id


@pytest.mark.parametrize("language", [*SHIPPED, "en"])
def test_each_catalog_has_exactly_the_messages_of_the_pot(language):
    pot = _ids(_read(POT))
    catalog = _ids(_read(LOCALES / language / "LC_MESSAGES" / "messages.po", language))
    assert sorted(pot - catalog, key=str) == [], "missing from the catalog: run `make update`"
    assert sorted(catalog - pot, key=str) == [], "no longer in the code: run `make update`"


def test_the_pot_is_up_to_date_with_the_code(tmp_path):
    # The same extraction as `make extract`, into a scratch file.
    fresh = tmp_path / "messages.pot"
    pybabel = Path(sys.executable).with_name("pybabel")
    subprocess.run(
        [
            str(pybabel),
            "extract",
            "--no-location",
            "--sort-output",
            "--omit-header",
            "-o",
            str(fresh),
            "bot",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    assert _ids(_read(fresh)) == _ids(_read(POT)), "locales/messages.pot is stale: run `make update`"


# Plurals through the real catalogs: which form each count picks.

LESSONS_DONE = ("{done} of {total} lesson done.", "{done} of {total} lessons done.")


def _forms(language: str, counts: list[int]) -> list[str]:
    i18n = I18n(LOCALES)
    with i18n.use(language):
        return [ngettext(*LESSONS_DONE, n) for n in counts]


@pytest.mark.skipif("ru" not in SHIPPED, reason="Russian is not shipped yet")
def test_russian_has_three_forms_picked_by_its_rules():
    one, few, many, one_again, few_again, many_again, teen = _forms("ru", [1, 2, 5, 21, 22, 25, 11])
    assert len({one, few, many}) == 3
    assert (one_again, few_again, many_again, teen) == (one, few, many, many)


@pytest.mark.skipif("ar" not in SHIPPED, reason="Arabic is not shipped yet")
def test_arabic_has_six_forms_picked_by_its_rules():
    forms = _forms("ar", [0, 1, 2, 3, 11, 100])
    assert len(set(forms)) == 6
    assert _forms("ar", [10, 99, 102, 1000]) == [forms[3], forms[4], forms[5], forms[5]]
