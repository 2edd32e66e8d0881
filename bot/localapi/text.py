"""Formatted text the way Telegram stores it: parse mode, UTF-16 lengths, trimming.

Telegram measures every text limit and every entity offset in UTF-16 code units
(an emoji outside the BMP counts as two), applies the parse mode first and checks
lengths afterwards, and trims surrounding spaces and line feeds before storing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .errors import bad_request
from .html import HtmlError, parse_html
from .units import utf16_len

# Entity types a bot may pass explicitly in `entities`/`caption_entities`.
ENTITY_TYPES = frozenset(
    {
        "mention",
        "hashtag",
        "cashtag",
        "bot_command",
        "url",
        "email",
        "phone_number",
        "bold",
        "italic",
        "underline",
        "strikethrough",
        "spoiler",
        "blockquote",
        "expandable_blockquote",
        "code",
        "pre",
        "text_link",
        "text_mention",
        "custom_emoji",
        "date_time",
    }
)

# tdlib trims only spaces and line feeds, and on the left only up to the first entity.
_TRIMMED = " \n"
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
                text, found = parse_html(text, strict_ampersand=strict_ampersand, resolve_user=resolve_user)
            except HtmlError as exc:
                raise bad_request(f"can't parse entities: {exc}") from None
        elif mode in ("markdownv2", "markdown"):
            # Deliberately refused rather than half-implemented: the bot is meant to use HTML.
            raise bad_request(f"can't parse entities: parse_mode {parse_mode} is not supported by the Bot API stand-in")
        else:
            raise bad_request("unsupported parse_mode")
    return trim(text, found)


def trim(text: str, entities: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Strip leading/trailing spaces and line feeds and shift/clip entities to match."""
    first_entity = entities[0]["offset"] if entities else None
    left = 0
    while left < len(text) and text[left] in _TRIMMED and (first_entity is None or left < first_entity):
        left += 1
    right = len(text)
    while right > left and text[right - 1] in _TRIMMED:
        right -= 1
    if left == 0 and right == len(text):
        return text, entities
    result = text[left:right]
    # left counts ASCII characters only, so it is also a UTF-16 offset
    total = utf16_len(result)
    kept = []
    for entity in entities:
        start = max(entity["offset"] - left, 0)
        end = min(entity["offset"] + entity["length"] - left, total)
        if end > start:
            kept.append({**entity, "offset": start, "length": end - start})
    return result, kept


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
    kept.sort(key=lambda e: (e["offset"], -e["length"]))
    return kept
