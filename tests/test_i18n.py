"""Translations: Telegram's language_code negotiated against the shipped catalogs; the locale set per block."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path

import pytest
from babel.messages import Catalog
from babel.messages.pofile import write_po

from bot.i18n import I18n, _, current_language, date, fraction, ngettext, number, own_name, percent, telegram_code

BACK = "◀ Back"
NEXT = "Next ▶"
QUESTIONS = ("One question.", "{n} questions.")


def write_catalog(locales: Path, language: str, messages: dict, fuzzy: tuple[str, ...] = ()) -> None:
    catalog = Catalog(locale=language, domain="messages")
    for msgid, msgstr in messages.items():
        catalog.add(msgid, msgstr, flags=["fuzzy"] if msgid in fuzzy else [])
    folder = locales / language / "LC_MESSAGES"
    folder.mkdir(parents=True)
    with (folder / "messages.po").open("wb") as po:
        write_po(po, catalog)


@pytest.fixture
def locales(tmp_path: Path) -> Path:
    root = tmp_path / "locales"
    write_catalog(
        root, "ru", {BACK: "◀ Назад", NEXT: "Далее ▶", QUESTIONS: ("{n} вопрос.", "{n} вопроса.", "{n} вопросов.")}
    )
    write_catalog(root, "es", {BACK: "◀ Atrás"})
    write_catalog(root, "pt", {BACK: "◀ Voltar"})
    write_catalog(root, "pt_BR", {BACK: "◀ Voltar (BR)"})
    return root


@pytest.fixture
def i18n(locales: Path) -> I18n:
    return I18n(locales)


def test_languages_are_the_shipped_catalogs_english_first(i18n):
    assert i18n.languages == ["en", "es", "pt", "pt_BR", "ru"]


@pytest.mark.parametrize(
    ("code", "language"),
    [
        ("ru", "ru"),
        ("ru-RU", "ru"),
        ("ru_RU", "ru"),
        ("RU", "ru"),
        ("es-419", "es"),
        ("es-ES", "es"),
        ("pt-br", "pt_BR"),
        ("pt-BR", "pt_BR"),
        ("pt-PT", "pt"),
        ("pt", "pt"),
        ("en", "en"),
        ("en-US", "en"),
    ],
)
def test_telegram_language_code_is_matched_to_a_shipped_language(i18n, code, language):
    assert i18n.negotiate(code) == language


def test_pt_br_falls_back_to_pt_when_only_pt_is_shipped(tmp_path):
    root = tmp_path / "locales"
    write_catalog(root, "pt", {BACK: "◀ Voltar"})
    assert I18n(root).negotiate("pt-br") == "pt"


def test_pt_br_falls_back_to_english_when_no_portuguese_is_shipped(tmp_path):
    root = tmp_path / "locales"
    write_catalog(root, "ru", {BACK: "◀ Назад"})
    assert I18n(root).negotiate("pt-br") == "en"


@pytest.mark.parametrize("code", [None, "", "de", "de-DE", "zz", "xx-YY", "klingon", "!!", "12", "ru--", "../ru", "🙂"])
def test_unknown_missing_or_garbage_codes_give_english(i18n, code):
    assert i18n.negotiate(code) == "en"


@pytest.mark.parametrize(
    ("chosen", "telegram", "language"),
    [
        ("es", "ru-RU", "es"),  # the learner's own choice wins over Telegram's
        (None, "ru-RU", "ru"),  # no choice: Telegram's, negotiated
        ("de", "ru-RU", "ru"),  # a choice that no longer ships: Telegram's again
        (None, None, "en"),
    ],
)
def test_a_stored_choice_wins_while_it_ships_else_telegrams_language(i18n, chosen, telegram, language):
    assert i18n.choose(chosen, telegram) == language


def test_a_folder_without_catalogs_knows_only_english(tmp_path):
    i18n = I18n(tmp_path / "no-such-folder")
    assert i18n.languages == ["en"]
    assert i18n.negotiate("ru-RU") == "en"


def test_use_sets_the_language_and_translations_then_resets_them(i18n):
    assert (current_language(), _(BACK)) == ("en", BACK)
    with i18n.use("ru"):
        assert current_language() == "ru"
        assert _(BACK) == "◀ Назад"
        assert _(NEXT) == "Далее ▶"
    assert (current_language(), _(BACK)) == ("en", BACK)


def test_nested_use_restores_the_outer_language(i18n):
    with i18n.use("ru"):
        with i18n.use("es"):
            assert (current_language(), _(BACK)) == ("es", "◀ Atrás")
            assert _(NEXT) == NEXT  # not in the Spanish catalog: English
        assert (current_language(), _(BACK)) == ("ru", "◀ Назад")


def test_use_resets_the_language_when_the_block_raises(i18n):
    with pytest.raises(RuntimeError), i18n.use("ru"):
        raise RuntimeError("boom")
    assert (current_language(), _(BACK)) == ("en", BACK)


def test_use_of_a_language_without_a_catalog_is_english(i18n):
    with i18n.use("de"):
        assert (current_language(), _(BACK)) == ("en", BACK)


async def test_concurrent_updates_keep_their_own_language(i18n):
    async def handle(language: str) -> tuple[str, str]:
        with i18n.use(language):
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            return current_language(), _(BACK)

    results = await asyncio.gather(handle("ru"), handle("es"), handle("en"), handle("pt_BR"))
    assert results == [("ru", "◀ Назад"), ("es", "◀ Atrás"), ("en", BACK), ("pt_BR", "◀ Voltar (BR)")]


def test_a_fuzzy_message_is_not_used(tmp_path):
    root = tmp_path / "locales"
    write_catalog(root, "ru", {BACK: "◀ Назад", NEXT: "Вперёд?"}, fuzzy=(NEXT,))
    with I18n(root).use("ru"):
        assert _(BACK) == "◀ Назад"
        assert _(NEXT) == NEXT


def test_plural_forms_follow_the_language(i18n):
    with i18n.use("ru"):
        forms = [ngettext(*QUESTIONS, n).format(n=n) for n in (1, 3, 5, 21)]
    assert forms == ["1 вопрос.", "3 вопроса.", "5 вопросов.", "21 вопрос."]
    assert [ngettext(*QUESTIONS, n).format(n=n) for n in (1, 2)] == ["One question.", "2 questions."]


def test_the_catalog_is_read_from_the_po_not_a_stale_mo(tmp_path):
    root = tmp_path / "locales"
    write_catalog(root, "ru", {BACK: "◀ Назад"})
    (root / "ru" / "LC_MESSAGES" / "messages.mo").write_bytes(b"stale and broken")
    with I18n(root).use("ru"):
        assert _(BACK) == "◀ Назад"


def test_the_shipped_english_catalog_loads(tmp_path):
    i18n = I18n(Path(__file__).resolve().parent.parent / "locales")
    assert i18n.languages[0] == "en"
    with i18n.use("en"):
        assert _(BACK) == BACK


def test_a_regional_variant_serves_its_siblings_before_english(tmp_path):
    root = tmp_path / "locales"
    write_catalog(root, "pt_BR", {BACK: "◀ Voltar"})
    i18n = I18n(root)
    assert [i18n.negotiate(code) for code in ("pt", "pt-PT", "pt-br")] == ["pt_BR", "pt_BR", "pt_BR"]


# The shipped catalogs: the negotiation table, formatting and own names.

SHIPPED_LOCALES = Path(__file__).resolve().parent.parent / "locales"


@pytest.mark.parametrize(
    ("code", "language"),
    [
        ("ru-RU", "ru"),
        ("ru", "ru"),
        ("uk-UA", "en"),
        ("es-419", "es"),
        ("es-MX", "es"),
        ("es", "es"),
        ("ja-JP", "ja"),
        ("ja", "ja"),
        ("ar-EG", "ar"),
        ("ar", "ar"),
        ("de-AT", "de"),
        ("fr-CA", "fr"),
        ("pt-br", "pt_BR"),
        ("pt-PT", "pt_BR"),
        ("en-GB", "en"),
        ("zh-hans", "en"),
        ("zz", "en"),
        (None, "en"),
    ],
)
def test_the_shipped_catalogs_negotiate_telegram_codes(code, language):
    assert I18n(SHIPPED_LOCALES).negotiate(code) == language


def test_each_shipped_language_is_named_in_itself():
    names = {code: own_name(code) for code in I18n(SHIPPED_LOCALES).languages}
    assert names == {
        "en": "English",
        "ar": "العربية",
        "de": "Deutsch",
        "es": "Español",
        "fr": "Français",
        "ja": "日本語",
        "pt_BR": "Português (Brasil)",
        "ru": "Русский",
    }


@pytest.mark.parametrize(
    ("language", "formatted"),
    [
        ("en", ("1,234.5", "75%", "Dec 2, 2026")),
        ("ru", ("1\xa0234,5", "75\xa0%", "2 дек. 2026\u202fг.")),
        ("de", ("1.234,5", "75\xa0%", "02.12.2026")),
        ("ja", ("1,234.5", "75%", "2026/12/02")),
        # Without CLDR's right-to-left marks inside the isolate, which reordered it to "022026/12/" (issue 20).
        ("ar", ("\u20661,234.5\u2069", "\u206675%\u2069", "\u206602/12/2026\u2069")),
    ],
)
def test_numbers_percentages_and_dates_follow_the_locale(language, formatted):
    root_i18n = I18n(SHIPPED_LOCALES)
    with root_i18n.use(language):
        assert (number(1234.5), percent(0.75), date(datetime.date(2026, 12, 2))) == formatted


def test_slide_position_stays_left_to_right_only_in_right_to_left_languages():
    i18n = I18n(SHIPPED_LOCALES)
    with i18n.use("ar"):
        assert fraction(3, 13) == "\u20663 / 13\u2069"
    with i18n.use("ru"):
        assert fraction(3, 13) == "3 / 13"


def test_command_menus_are_published_under_two_letter_codes():
    assert [telegram_code(code) for code in ("ru", "pt_BR", "ar")] == ["ru", "pt", "ar"]
