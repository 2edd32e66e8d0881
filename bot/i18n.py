"""Translations through gettext catalogs (Babel), in the language of the update being handled.

The language is chosen once per update (``I18n.choose``, entered by bot.context.update_scope for the
whole of an update's handling, error handler included) and read from a ContextVar everywhere else.
"""

from __future__ import annotations

import datetime
import functools
import io
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from babel import Locale, UnknownLocaleError
from babel.dates import format_date
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.numbers import format_decimal, format_percent
from babel.support import NullTranslations, Translations

from bot import bidi

DOMAIN = "messages"
# The language the lessons and the messages are written in, and the one spoken when nothing else fits.
DEFAULT_LANGUAGE = "en"

_ENGLISH = NullTranslations()
_translations: ContextVar[NullTranslations | None] = ContextVar("translations", default=None)
_language: ContextVar[str] = ContextVar("language", default=DEFAULT_LANGUAGE)


def _current() -> NullTranslations:
    translations = _translations.get()
    return _ENGLISH if translations is None else translations


def _(message: str) -> str:
    """Translate ``message`` into the current update's language."""
    return _current().gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    """Translate a message whose form depends on the count ``n``."""
    return _current().ngettext(singular, plural, n)


def current_language() -> str:
    """Return the language of the update being handled."""
    return _language.get()


def is_rtl(language: str | None = None) -> bool:
    """Return whether ``language`` (default: the current one) is written right to left."""
    return _right_to_left(language or current_language())


@functools.cache
def _right_to_left(language: str) -> bool:
    return Locale.parse(language).character_order == "right-to-left"


def isolate(text: str) -> str:
    """Keep ``text`` (code, a number, 'n / N') left to right when the current language is not."""
    return bidi.isolate(text) if is_rtl() else text


def number(value: int | float) -> str:
    """Format a number for the current language, isolated in right-to-left text."""
    language = current_language()
    return isolate(_integer(value, language) if isinstance(value, int) else format_decimal(value, locale=language))


def fraction(n: int, total: int) -> str:
    """Format 'n / N' (slide 3 of 13) for the current language, kept left to right."""
    language = current_language()
    return isolate(f"{_integer(n, language)} / {_integer(total, language)}")


# Babel parses the locale on every call; the same few whole numbers (slide 3 of 13) are on every screen.
@functools.lru_cache(maxsize=4096)
def _integer(value: int, language: str) -> str:
    return format_decimal(value, locale=language)


def percent(ratio: float) -> str:
    """Format a ratio (0.75) as a percentage for the current language."""
    return isolate(format_percent(ratio, locale=current_language()))


def date(day: datetime.date) -> str:
    """Format a date for the current language, e.g. '2 Dec 2026' or '2 дек. 2026 г.'.

    CLDR's Arabic date puts a right-to-left mark after each number ('02\u200f/12\u200f/2026'): inside the isolate
    that keeps it left to right, those marks turn '12' and '2026' into a right-to-left run, shown '022026/12/'.
    """
    return isolate(format_date(day, format="medium", locale=current_language()).replace("\u200f", ""))


def own_name(language: str) -> str:
    """Return a language's name in that language, as a picker shows it: 'Русский', 'Português (Brasil)'."""
    name = Locale.parse(language).get_display_name(language) or language
    return name[:1].upper() + name[1:]


def telegram_code(language: str) -> str:
    """Return the two-letter code Telegram uses for ``language`` in setMyCommands ('pt_BR' -> 'pt')."""
    return language.split("_")[0]


# Every update asks (Telegram sends the learner's code each time); a client may send any string, so it is bounded.
@functools.lru_cache(maxsize=1024)
def _language_and_territory(language_code: str) -> tuple[str, str | None] | None:
    try:
        wanted = Locale.parse(language_code.replace("-", "_"))
    except (ValueError, UnknownLocaleError):
        return None
    return wanted.language, wanted.territory


class I18n:
    """Every shipped catalog, compiled from its .po at start so a stale .mo is never used."""

    def __init__(self, locales_dir: Path):
        self._catalogs: dict[str, NullTranslations] = {DEFAULT_LANGUAGE: _ENGLISH}
        for po_path in sorted(Path(locales_dir).glob(f"*/LC_MESSAGES/{DOMAIN}.po")):
            language = po_path.parent.parent.name
            with po_path.open("rb") as po_file:
                catalog = read_po(po_file, locale=language, domain=DOMAIN)
            buffer = io.BytesIO()
            write_mo(buffer, catalog)  # fuzzy entries are left out, as msgfmt does
            buffer.seek(0)
            self._catalogs[language] = Translations(buffer, domain=DOMAIN)

    @property
    def languages(self) -> list[str]:
        """Return the shipped language codes, English first."""
        return [DEFAULT_LANGUAGE, *sorted(lang for lang in self._catalogs if lang != DEFAULT_LANGUAGE)]

    def negotiate(self, language_code: str | None) -> str:
        """Map a Telegram ``language_code`` (e.g. 'ru-RU', 'pt-br') to the best shipped language."""
        parsed = _language_and_territory(language_code) if language_code else None
        if parsed is None:
            return DEFAULT_LANGUAGE
        language, territory = parsed
        exact = f"{language}_{territory}" if territory else language
        for candidate in (exact, language):
            if candidate in self._catalogs:
                return candidate
        # A Portuguese learner is better served by pt_BR than by English, whatever their country.
        siblings = sorted(lang for lang in self._catalogs if lang.split("_")[0] == language)
        return siblings[0] if siblings else DEFAULT_LANGUAGE

    def choose(self, chosen: str | None, telegram_language: str | None) -> str:
        """Return the language to speak: the learner's own choice while it ships, else Telegram's, negotiated."""
        if chosen is not None and chosen in self._catalogs:
            return chosen
        return self.negotiate(telegram_language)

    @contextmanager
    def use(self, language: str) -> Iterator[None]:
        """Make ``language`` current for the code inside the block."""
        translations = self._catalogs.get(language) or self._catalogs[DEFAULT_LANGUAGE]
        t_token = _translations.set(translations)
        l_token = _language.set(language if language in self._catalogs else DEFAULT_LANGUAGE)
        try:
            yield
        finally:
            _translations.reset(t_token)
            _language.reset(l_token)
