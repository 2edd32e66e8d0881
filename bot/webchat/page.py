"""One open page of the web chat: a learner's Telegram app, talking JSON over a WebSocket.

The page says what the person did (send, tap, vote, switch language or learner); the
built-in Bot API server turns that into the updates Telegram would send the bot. Every
change in the learner's chat (both sides, edits, deletions, callback answers) is pushed
back at once, in order, through one queue per page. What the page sends is untrusted:
anything malformed is answered with a one-line error and changes nothing.
"""

from __future__ import annotations

import logging
import re
import zoneinfo
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from bot.course.phone_width import CODE_LINE_MAX
from bot.i18n import I18n, _
from bot.localapi import BotApi
from bot.localapi.chats import ChatState
from bot.telegram_rules.limits import MESSAGE_TEXT_MAX
from bot.telegram_rules.units import utf16_len

from . import learners, strings

log = logging.getLogger(__name__)

Json = dict[str, Any]
T = TypeVar("T")
_LANGUAGE_CODE_MAX = 35  # an IETF tag such as "pt-br" or "es-419"
_TIME_ZONE_MAX = 64  # the longest IANA name is 32 characters
_TIME_ZONE = re.compile(r"[A-Za-z][A-Za-z0-9_+-]*(?:/[A-Za-z0-9_+-]+)*")


class BadRequest(ValueError):
    """What the page sent cannot be acted on; the text says why, in the learner's language."""


class Page:
    """A connected page. feed() takes what it sends; send() queues what it is told."""

    def __init__(
        self, api: BotApi, i18n: Callable[[], I18n], banner: Callable[[], list[str]], send: Callable[[Json], None]
    ):
        self.api = api
        self._i18n = i18n  # a callable: a content reload may bring new catalogs
        self._banner = banner
        self.send = send
        self.user_id: int | None = None

    # ------------------------------------------------------------- helpers

    @property
    def user(self) -> Json:
        assert self.user_id is not None
        return self.api.users[self.user_id]

    @property
    def language_code(self) -> str | None:
        code: str | None = self.user.get("language_code") if self.user_id is not None else None
        return code

    def translate(self, message: Callable[[], T]) -> T:
        """Run `message` (which calls _()) in the learner's app language."""
        i18n = self._i18n()
        with i18n.use(i18n.negotiate(self.language_code)):
            return message()

    def _view(self, message: Json) -> Json:
        """A message as the page gets it: a poll also says what this learner chose."""
        view: Json = {"message": message}
        poll = message.get("poll")
        if poll is not None and self.user_id is not None:
            state = self.api.polls.get(poll["id"])
            view["chosen"] = state.votes.get(self.user_id, []) if state else []
        return view

    # ------------------------------------------------------------- pushed

    def on_change(self, chat: ChatState, kind: str, payload: Json) -> None:
        """A change in the learner's chat (an observer of the Bot API server)."""
        if kind == "deleted":
            self.send({"type": "deleted", "message_id": payload["message_id"]})
        elif kind == "answered":
            self.send(
                {"type": "answered", "text": payload.get("text") or "", "alert": payload.get("show_alert") is True}
            )
        elif kind == "action":
            self.send({"type": "action", "action": payload["action"]})
        else:
            self.send({"type": "edited" if kind in ("edited", "voted") else "message", **self._view(payload)})

    def show_banner(self, lines: list[str]) -> None:
        self.send({"type": "banner", "title": self.translate(strings.banner_title) if lines else "", "lines": lines})

    # ------------------------------------------------------------- received

    def feed(self, data: Any) -> None:
        """Act on one message from the page; a bad one gets an error line back."""
        try:
            if not isinstance(data, dict) or not isinstance(data.get("type"), str):
                raise BadRequest("expected a JSON object with a type")
            kind = data["type"]
            if kind != "hello" and self.user_id is None:
                raise BadRequest("say hello first")
            handler = self._HANDLERS.get(kind)
            if handler is None:
                raise BadRequest(f"unknown message type {kind!r}")
            handler(self, data)
        except BadRequest as exc:
            self.send({"type": "error", "text": str(exc)})

    def _hello(self, data: Json) -> None:
        """The page opened: its remembered learner (or a new one) and the app's language."""
        language = _language(data.get("language"))  # the browser's, for a new learner
        zone = _time_zone(data.get("time_zone"))
        wanted = data.get("learner")
        if isinstance(wanted, int) and learners.is_learner(wanted) and wanted in self.api.users:
            self._attach(wanted)  # their app keeps the language they chose
        else:
            self._new_learner(language)
        if zone is not None:
            self.api.report_time_zone(self.user["id"], zone)
        self._ready()

    def _new_learner(self, language: str | None) -> None:
        i18n = self._i18n()
        with i18n.use(i18n.negotiate(language)):
            user = learners.new_learner(self.api, language)
        self._attach(user["id"])

    def _attach(self, user_id: int) -> None:
        self._detach()
        self.user_id = user_id
        self.api.observers.setdefault(user_id, []).append(self.on_change)

    def _detach(self) -> None:
        if self.user_id is None:
            return
        observers = self.api.observers.get(self.user_id, [])
        if self.on_change in observers:
            observers.remove(self.on_change)
        if not observers:
            self.api.observers.pop(self.user_id, None)
        self.user_id = None

    def close(self) -> None:
        self._detach()

    def _ready(self) -> None:
        """Everything the page shows: who, the chat so far, the menu, the words of its own UI."""
        chat = self.api.chats[self.user["id"]]
        history = [self._view(chat.messages[i]) for i in sorted(chat.messages)]
        self.send(
            {
                "type": "ready",
                "learner": self.user,
                "learners": [{"id": u["id"], "first_name": u["first_name"]} for u in learners.learners(self.api)],
                "languages": strings.languages(self._i18n()),
                "language": self.language_code or "",
                "rtl": strings.right_to_left(self.language_code),
                "bot": self.api.bot_user,
                "history": history,
                "commands": self.api.commands_for(chat.id, self.language_code),
                "started": chat.known,  # Telegram shows a new user START instead of the message box
                "code_columns": CODE_LINE_MAX,  # the phone width lint holds code to
                "ui": self.translate(strings.ui),
            }
        )
        lines = self._banner()
        if lines:
            self.show_banner(lines)

    def _send_text(self, data: Json) -> None:
        text = data.get("text")
        if not isinstance(text, str) or not text.strip():
            raise BadRequest(self.translate(lambda: _("Write something first.")))
        if utf16_len(text) > MESSAGE_TEXT_MAX:
            raise BadRequest(
                self.translate(
                    lambda: _("The message is too long: Telegram allows {limit} characters.").format(
                        limit=MESSAGE_TEXT_MAX
                    )
                )
            )
        self.api.write_text(self.user["id"], text)

    def _tap(self, data: Json) -> None:
        message = self._message(data)
        callback_data = data.get("data")
        buttons = [b for row in message.get("reply_markup", {}).get("inline_keyboard", ()) for b in row]
        # only a button that is on the message, as in Telegram's app
        if not any(b.get("callback_data") == callback_data for b in buttons):
            raise BadRequest("that message has no such button")
        assert isinstance(callback_data, str)
        self.api.tap(self.user["id"], self.user["id"], message["message_id"], callback_data)

    def _vote(self, data: Json) -> None:
        message = self._message(data)
        options = data.get("options")
        if not isinstance(options, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in options):
            raise BadRequest("options must be a list of option numbers")
        try:
            self.api.answer_poll(self.user["id"], self.user["id"], message["message_id"], options)
        except (LookupError, ValueError) as exc:
            raise BadRequest(str(exc)) from None

    def _message(self, data: Json) -> Json:
        message_id = data.get("message_id")
        message = self.api.chats[self.user["id"]].messages.get(message_id) if isinstance(message_id, int) else None
        if message is None or not message["from"]["is_bot"]:
            raise BadRequest("no such message of the bot in this chat")
        return message

    def _set_language(self, data: Json) -> None:
        language = _language(data.get("language"))
        self.api.set_language(self.user["id"], language)
        self._ready()

    def _switch(self, data: Json) -> None:
        wanted = data.get("learner")
        if not isinstance(wanted, int) or not learners.is_learner(wanted) or wanted not in self.api.users:
            raise BadRequest("no such learner")
        self._attach(wanted)
        self._ready()

    def _create(self, data: Json) -> None:
        self._new_learner(self.language_code)
        zone = _time_zone(data.get("time_zone"))
        if zone is not None:
            self.api.report_time_zone(self.user["id"], zone)
        self._ready()

    _HANDLERS: ClassVar[dict[str, Callable[[Page, Json], None]]] = {
        "hello": _hello,
        "send": _send_text,
        "tap": _tap,
        "vote": _vote,
        "language": _set_language,
        "switch": _switch,
        "new_learner": _create,
    }


def _time_zone(value: Any) -> str | None:
    """An IANA time zone the browser reports ("Europe/Berlin"); anything else is ignored, as the bot needs none."""
    if not isinstance(value, str) or not 0 < len(value) <= _TIME_ZONE_MAX or not _TIME_ZONE.fullmatch(value):
        return None
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None
    return value


def _language(value: Any) -> str | None:
    """A language_code as Telegram sends it: a lower-case IETF tag, or none."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > _LANGUAGE_CODE_MAX or not value.replace("-", "").isalnum():
        raise BadRequest("language must be an IETF language tag such as en or pt-br")
    return value.lower()
