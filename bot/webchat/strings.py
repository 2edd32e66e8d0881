"""The words of the web chat's own interface, and its language list, in the app's language."""

from __future__ import annotations

from babel import UnknownLocaleError

from bot.i18n import I18n, _, is_rtl, own_name


def ui() -> dict[str, str]:
    """The page's labels, translated in the current language (call inside I18n.use)."""
    return {
        "bot": _("bot"),
        # How to send, as Telegram's apps do it: Enter on a desktop, ➤ on a phone (its Enter adds a line).
        "placeholder": _("Message or code (Enter sends, Shift+Enter adds a line)"),
        "placeholder_phone": _("Message or code (➤ sends)"),
        "send": _("Send"),
        "start": _("START"),
        "typing": _("typing…"),
        "sending_photo": _("sending a photo…"),
        "menu": _("Menu"),
        "settings": _("Settings"),
        "language": _("App language"),
        "learners": _("Learners"),
        "new_learner": _("New learner"),
        "quiz": _("Quiz"),
        "ok": _("OK"),
        "copied": _("Copied"),
        "offline": _("Reconnecting…"),
        "preview": _("Local preview: this chat runs on this computer and nothing is sent to Telegram."),
    }


def banner_title() -> str:
    return _("The changed content was refused; the course goes on with the previous version:")


def languages(i18n: I18n) -> list[list[str]]:
    """The app languages to switch between: [language_code as Telegram sends it, own name]."""
    return [[language.replace("_", "-").lower(), own_name(language)] for language in i18n.languages]


def right_to_left(language_code: str | None) -> bool:
    if not language_code:
        return False
    try:
        return is_rtl(language_code.split("-")[0])
    except (ValueError, UnknownLocaleError):
        return False
