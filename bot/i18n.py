"""Translations through gettext catalogs (Babel), with the locale chosen once per update."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from babel import Locale, UnknownLocaleError
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.support import NullTranslations, Translations

DOMAIN = "messages"
DEFAULT_LANGUAGE = "en"

_translations: ContextVar[NullTranslations] = ContextVar("translations", default=NullTranslations())
_language: ContextVar[str] = ContextVar("language", default=DEFAULT_LANGUAGE)


def _(message: str) -> str:
    """Translate ``message`` into the current update's language."""
    return _translations.get().gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    """Translate a message whose form depends on the count ``n``."""
    return _translations.get().ngettext(singular, plural, n)


def N_(message: str) -> str:
    """Mark ``message`` for extraction; translate it later, where it is shown."""
    return message


def current_language() -> str:
    """Return the language of the update being handled."""
    return _language.get()


class I18n:
    """Every shipped catalog, compiled from its .po at start so a stale .mo is never used."""

    def __init__(self, locales_dir: Path):
        self._catalogs: dict[str, NullTranslations] = {DEFAULT_LANGUAGE: NullTranslations()}
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
        return [DEFAULT_LANGUAGE] + sorted(lang for lang in self._catalogs if lang != DEFAULT_LANGUAGE)

    def negotiate(self, language_code: str | None) -> str:
        """Map a Telegram ``language_code`` (e.g. 'ru-RU', 'pt-br') to the best shipped language."""
        if not language_code:
            return DEFAULT_LANGUAGE
        try:
            wanted = Locale.parse(language_code.replace("-", "_"))
        except (ValueError, UnknownLocaleError):
            return DEFAULT_LANGUAGE
        exact = f"{wanted.language}_{wanted.territory}" if wanted.territory else wanted.language
        for candidate in (exact, wanted.language):
            if candidate in self._catalogs:
                return candidate
        return DEFAULT_LANGUAGE

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
