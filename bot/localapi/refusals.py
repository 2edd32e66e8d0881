"""The checks that refuse a call the way Telegram does, on the limits of bot.telegram_rules.limits.

The descriptions are what the Bot API server answers. Where the server's exact wording
is not known, the description is marked as the stand-in's own but keeps Telegram's
style, so a test that reads it still learns what went wrong.
"""

from __future__ import annotations

import re
from typing import Any

from bot.telegram_rules.limits import (
    CALLBACK_ANSWER_TEXT_MAX,
    CALLBACK_DATA_MAX_BYTES,
    CAPTION_MAX,
    COMMAND_DESCRIPTION_MAX,
    COMMAND_NAME_MAX,
    COMMAND_SCOPES,
    COMMANDS_MAX,
    INLINE_KEYBOARD_MAX_BUTTONS,
    MESSAGE_TEXT_MAX,
    POLL_EXPLANATION_LINE_FEEDS,
    POLL_EXPLANATION_MAX,
    POLL_OPTION_MAX,
    POLL_OPTIONS_MAX,
    POLL_OPTIONS_MIN,
    POLL_QUESTION_MAX,
)
from bot.telegram_rules.units import utf8_len, utf16_len

from .errors import bad_request

_COMMAND = re.compile(f"[a-z0-9_]{{1,{COMMAND_NAME_MAX}}}")

# Exactly one of these makes an inline button do something.
_BUTTON_ACTIONS = (
    "callback_data",
    "url",
    "web_app",
    "login_url",
    "switch_inline_query",
    "switch_inline_query_current_chat",
    "switch_inline_query_chosen_chat",
    "copy_text",
    "callback_game",
    "pay",
)
_BUTTON_URL = re.compile(r"(https?|tg)://[^\s]+$", re.IGNORECASE)


def check_message_text(text: str) -> None:
    """Limits of a message text after entity parsing and trimming."""
    if not text:
        raise bad_request("message text is empty")
    if utf16_len(text) > MESSAGE_TEXT_MAX:
        raise bad_request("message is too long")


def check_caption(text: str) -> None:
    if utf16_len(text) > CAPTION_MAX:
        raise bad_request("message caption is too long")


def check_callback_answer_text(text: Any) -> None:
    if text is not None and utf16_len(str(text)) > CALLBACK_ANSWER_TEXT_MAX:
        raise bad_request("MESSAGE_TOO_LONG")


def reply_markup_kind(markup: Any) -> str | None:
    """Validate any reply_markup and say which of Telegram's four kinds it is.

    Returns "inline", "keyboard", "remove", "force_reply", or None for no markup.
    Only an inline keyboard becomes part of the Message object.
    """
    if markup is None:
        return None
    if not isinstance(markup, dict):
        raise bad_request("can't parse reply keyboard markup JSON object")
    if "inline_keyboard" in markup:
        check_inline_keyboard(markup)
        return "inline"
    if "keyboard" in markup:
        _check_reply_keyboard(markup["keyboard"])
        return "keyboard"
    if markup.get("remove_keyboard") is True:
        return "remove"
    if markup.get("force_reply") is True:
        return "force_reply"
    raise bad_request('can\'t find field "inline_keyboard"')


def check_inline_keyboard(markup: dict[str, Any]) -> None:
    rows = markup.get("inline_keyboard")
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        raise bad_request('field "inline_keyboard" of the InlineKeyboardMarkup must be an Array of Arrays')
    if sum(len(row) for row in rows) > INLINE_KEYBOARD_MAX_BUTTONS:
        raise bad_request("REPLY_MARKUP_TOO_LONG")
    for row in rows:
        for button in row:
            _check_inline_button(button)


def _check_inline_button(button: Any) -> None:
    if not isinstance(button, dict):
        raise bad_request("can't parse inline keyboard button: InlineKeyboardButton must be an Object")
    text = button.get("text")
    if not isinstance(text, str):
        raise bad_request('can\'t parse inline keyboard button: Field "text" must be of type String')
    if not text.strip():
        raise bad_request("BUTTON_TEXT_INVALID")
    actions = [name for name in _BUTTON_ACTIONS if name in button]
    if not actions:
        raise bad_request("can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard")
    if len(actions) > 1:
        # the stand-in's wording: Telegram would silently pick one of them
        raise bad_request(f"can't parse inline keyboard button: exactly one of {', '.join(actions)} must be used")
    if "callback_data" in button:
        data = button["callback_data"]
        if not isinstance(data, str) or not 1 <= utf8_len(data) <= CALLBACK_DATA_MAX_BYTES:
            raise bad_request("BUTTON_DATA_INVALID")
    if "url" in button and not (isinstance(button["url"], str) and _BUTTON_URL.match(button["url"])):
        raise bad_request("BUTTON_URL_INVALID")


def _check_reply_keyboard(rows: Any) -> None:
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        raise bad_request('field "keyboard" of the ReplyKeyboardMarkup must be an Array of Arrays')
    for row in rows:
        for button in row:
            text = button.get("text") if isinstance(button, dict) else button
            if not isinstance(text, str) or not text.strip():
                raise bad_request("BUTTON_TEXT_INVALID")


def check_poll_question(question: str) -> None:
    if not question:
        raise bad_request("poll question must be non-empty")
    if utf16_len(question) > POLL_QUESTION_MAX:
        raise bad_request(f"poll question length must not exceed {POLL_QUESTION_MAX}")


def check_poll_options(texts: list[str]) -> None:
    if len(texts) < POLL_OPTIONS_MIN:
        raise bad_request(f"poll must have at least {POLL_OPTIONS_MIN} option")
    if len(texts) > POLL_OPTIONS_MAX:
        raise bad_request(f"poll can't have more than {POLL_OPTIONS_MAX} options")
    for text in texts:
        if not text:
            raise bad_request("poll options must be non-empty")
        if utf16_len(text) > POLL_OPTION_MAX:
            raise bad_request(f"poll options length must not exceed {POLL_OPTION_MAX}")
    if len(set(texts)) != len(texts):
        raise bad_request("POLL_OPTION_DUPLICATE")


def check_correct_options(correct: Any, option_count: int, multiple: bool) -> list[int]:
    """A quiz needs correct_option_ids in range: exactly one unless multiple answers are allowed."""
    if isinstance(correct, int) and not isinstance(correct, bool):
        correct = [correct]
    if not isinstance(correct, list) or not correct:
        raise bad_request("wrong correct option ID specified")
    if any(not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < option_count for i in correct):
        raise bad_request("wrong correct option ID specified")
    if sorted(set(correct)) != correct:
        raise bad_request("correct option IDs must be unique and increasing")
    if len(correct) > 1 and not multiple:
        raise bad_request("QUIZ_CORRECT_ANSWERS_TOO_MUCH")
    return correct


def check_explanation(text: str) -> None:
    if utf16_len(text) > POLL_EXPLANATION_MAX:
        raise bad_request("explanation is too long")
    if text.count("\n") > POLL_EXPLANATION_LINE_FEEDS:
        raise bad_request("too many line feeds in explanation")


def check_commands(commands: Any) -> list[dict[str, Any]]:
    """setMyCommands: 0-100 commands of 1-32 [a-z0-9_] with 1-256 character descriptions."""
    if not isinstance(commands, list):
        raise bad_request("can't parse commands JSON object")
    if len(commands) > COMMANDS_MAX:
        raise bad_request("BOT_COMMANDS_TOO_MUCH")
    result = []
    for item in commands:
        if not isinstance(item, dict):
            raise bad_request("can't parse BotCommand: BotCommand must be an Object")
        command, description = item.get("command"), item.get("description")
        if not isinstance(command, str) or not _COMMAND.fullmatch(command):
            raise bad_request("BOT_COMMAND_INVALID")
        if (
            not isinstance(description, str)
            or not description.strip()
            or utf16_len(description) > COMMAND_DESCRIPTION_MAX
        ):
            raise bad_request("BOT_COMMAND_DESCRIPTION_INVALID")
        result.append({"command": command, "description": description})
    return result


def command_scope_key(scope: Any) -> str:
    """The scope part of the `commands` store key: the type, plus the chat/user it names."""
    if scope is None:
        return "default"
    if not isinstance(scope, dict) or scope.get("type") not in COMMAND_SCOPES:
        raise bad_request("can't parse BotCommandScope: unsupported type")
    kind = scope["type"]
    if kind in ("chat", "chat_administrators"):
        return f"{kind}:{scope.get('chat_id')}"
    if kind == "chat_member":
        return f"{kind}:{scope.get('chat_id')}:{scope.get('user_id')}"
    return str(kind)


def check_language_code(code: Any) -> str:
    if code is None or code == "":
        return ""
    if not isinstance(code, str) or not re.fullmatch(r"[a-z]{2}", code):
        raise bad_request("invalid language code specified")
    return code
