"""Formatted text as the server takes it: the parse mode or explicit entities, refused as Telegram refuses them.

The rules themselves (the HTML parser, trimming, UTF-16 lengths) are bot.telegram_rules; here they become the
Bot API's answers ("can't parse entities: ..."), and a Telegram app's /command entities on what a user sends.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from bot.telegram_rules.html import HtmlError
from bot.telegram_rules.limits import ENTITY_TYPES
from bot.telegram_rules.text import fix_entities, stored, trim
from bot.telegram_rules.units import utf16_len

from .errors import bad_request

# Telegram apps mark /commands (optionally /command@bot) that start a word.
_COMMAND = re.compile(r"(?<!\S)/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?(?![^\s.,!?;:])")


def command_entities(text: str) -> list[dict[str, Any]]:
    """The bot_command entities a Telegram app attaches to a text its user sends."""
    return [
        {"type": "bot_command", "offset": utf16_len(text[: m.start()]), "length": utf16_len(m.group())}
        for m in _COMMAND.finditer(text)
    ]


def format_text(
    text: Any,
    parse_mode: Any = None,
    entities: Any = None,
    *,
    strict_ampersand: bool = True,
    resolve_user: Callable[[int], dict[str, Any] | None] | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """Return (text, entities) as Telegram would store them.

    Explicit entities win over parse_mode, as in the Bot API. Errors are raised as the
    ApiError Telegram sends, e.g. "can't parse entities: ...".
    """
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    if entities is not None:
        found = _checked_entities(entities, utf16_len(text))
    elif parse_mode is None or parse_mode == "":
        found = []
    else:
        mode = str(parse_mode).lower()
        if mode == "html":
            try:
                return stored(text, strict_ampersand=strict_ampersand, resolve_user=resolve_user)
            except HtmlError as exc:
                raise bad_request(f"can't parse entities: {exc}") from None
        elif mode in ("markdownv2", "markdown"):
            # Deliberately refused rather than half-implemented: the bot is meant to use HTML.
            raise bad_request(f"can't parse entities: parse_mode {parse_mode} is not supported by the Bot API stand-in")
        else:
            raise bad_request("unsupported parse_mode")
    return trim(text, fix_entities(found))


def _checked_entities(entities: Any, text_length: int) -> list[dict[str, Any]]:
    if not isinstance(entities, list):
        raise bad_request("can't parse entities JSON object")
    kept = []
    for entity in entities:
        if not isinstance(entity, dict):
            raise bad_request("can't parse MessageEntity: MessageEntity must be an Object")
        kind, offset, length = entity.get("type"), entity.get("offset"), entity.get("length")
        if kind not in ENTITY_TYPES:
            raise bad_request("can't parse MessageEntity: Unsupported type specified")
        if not isinstance(offset, int) or not isinstance(length, int):
            raise bad_request('can\'t parse MessageEntity: Field "offset" and "length" must be of type Number')
        # Telegram silently drops entities that fall outside the text
        if length > 0 and 0 <= offset < text_length:
            kept.append({**entity, "length": min(length, text_length - offset)})
    return kept
