"""A message as Telegram stores it, and the one way the bot measures what a reader sees.

Telegram applies the parse mode first (bot.telegram_rules.html), then fixes the entities (tdlib's
fix_formatted_text: nothing inside pre or code, no two entities crossing, touching ones of a kind merged), trims
surrounding spaces and line feeds, and only then checks a text's length, in UTF-16 code units (an emoji outside
the BMP counts as two). Not emulated: the control characters tdlib turns into spaces (and the \\r it drops), and
the entities Telegram finds by itself (links, @mentions, /commands) in a bot's text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.telegram_rules.html import entity_order, parse_html
from bot.telegram_rules.units import utf16_len

Entity = dict[str, Any]

# tdlib trims only spaces and line feeds, and on the left only up to the first entity.
_TRIMMED = " \n"


def stored(
    html_text: str,
    *,
    strict_ampersand: bool = True,
    resolve_user: Callable[[int], dict[str, Any] | None] | None = None,
) -> tuple[str, list[Entity]]:
    """Return the text and entities Telegram stores for ``html_text`` sent with parse_mode HTML.

    Raises bot.telegram_rules.html.HtmlError where Telegram would refuse the text.
    """
    text, entities = parse_html(html_text, strict_ampersand=strict_ampersand, resolve_user=resolve_user)
    return trim(text, fix_entities(entities))


def visible_text(html_text: str) -> str:
    """Return what a reader sees of ``html_text`` once Telegram has parsed and trimmed it."""
    return stored(html_text)[0]


def visible_length(html_text: str) -> int:
    """Return the length Telegram holds ``html_text`` to: its visible text, in UTF-16 code units."""
    return utf16_len(visible_text(html_text))


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


# The kinds tdlib's fix_entities treats alike (td/telegram/MessageEntity.cpp, get_*_entities_mask).
SPLITTABLE = ("bold", "italic", "underline", "strikethrough", "spoiler")  # in the order tdlib flushes them
BLOCKQUOTES = frozenset({"blockquote", "expandable_blockquote"})
PRE = frozenset({"pre", "code", "date_time"})  # hold no other entity
CONTINUOUS = frozenset(
    {"mention", "hashtag", "bot_command", "url", "email", "text_link", "text_mention", "cashtag", "phone_number"}
    | {"custom_emoji"}
)


def _end(entity: Entity) -> int:
    return int(entity["offset"]) + int(entity["length"])


def fix_entities(entities: list[Entity]) -> list[Entity]:
    """Return the entities as Telegram keeps them (a port of tdlib's fix_entities).

    Entities inside pre and code go; of two entities that cross, or one inside another where that is not allowed,
    the later one goes; bold, italic, underline, strikethrough and spoiler entities that touch or overlap merge, and
    are split around pre and code.
    """
    entities = sorted(entities, key=entity_order)
    if _valid(entities):
        return entities
    splittable = [e for e in entities if e["type"] in SPLITTABLE]
    blockquotes = [e for e in entities if e["type"] in BLOCKQUOTES]
    continuous = _without_intersecting([e for e in entities if e["type"] not in SPLITTABLE and e not in blockquotes])
    if blockquotes:
        blockquotes = _without_intersecting(blockquotes)
        continuous = sorted(_outside_blockquotes(continuous, blockquotes) + blockquotes, key=entity_order)
    if not splittable:
        return continuous
    return sorted(continuous + _split(splittable, continuous), key=entity_order)


def _valid(entities: list[Entity]) -> bool:
    """tdlib's are_entities_valid: nothing for fix_entities to do."""
    ends = dict.fromkeys(SPLITTABLE, -1)
    stack: list[Entity] = []
    for entity in entities:
        while stack and entity["offset"] >= _end(stack[-1]):
            stack.pop()
        kind = entity["type"]
        if stack:
            nested = {e["type"] for e in stack}
            if (
                _end(entity) > _end(stack[-1])
                or kind in nested
                or stack[-1]["type"] in PRE
                or (kind in PRE and nested - BLOCKQUOTES)
                or ((kind in CONTINUOUS or kind in BLOCKQUOTES) and nested & CONTINUOUS)
                or (kind in BLOCKQUOTES and nested & BLOCKQUOTES)
                or nested & set(SPLITTABLE)
            ):
                return False
        if kind in ends:
            if ends[kind] >= entity["offset"]:
                return False
            ends[kind] = _end(entity)
        stack.append(entity)
    return True


def _without_intersecting(entities: list[Entity]) -> list[Entity]:
    """Keep each entity that begins after every kept one ends (tdlib's remove_intersecting_entities)."""
    kept, last_end = [], 0
    for entity in entities:
        if entity["offset"] >= last_end:
            kept.append(entity)
            last_end = _end(entity)
    return kept


def _outside_blockquotes(entities: list[Entity], blockquotes: list[Entity]) -> list[Entity]:
    """Drop entities that cross a blockquote (tdlib's remove_entities_intersecting_blockquote)."""
    kept, quote = [], 0
    for entity in entities:
        while quote < len(blockquotes) and _end(blockquotes[quote]) <= entity["offset"]:
            quote += 1
        if quote < len(blockquotes):
            bq = blockquotes[quote]
            if _end(bq) < _end(entity) or entity["offset"] < bq["offset"] < _end(entity):
                continue
        kept.append(entity)
    return kept


def _split(splittable: list[Entity], others: list[Entity]) -> list[Entity]:
    """Merge touching splittable entities of a kind and cut them out of pre and code (tdlib's split_entities)."""
    begin = dict.fromkeys(SPLITTABLE, 0)
    end = dict.fromkeys(SPLITTABLE, 0)
    result: list[Entity] = []
    position = 0

    def flush(offset: int) -> None:
        for kind in SPLITTABLE:
            if end[kind] and begin[kind] < offset:
                stop = min(end[kind], offset)
                result.append({"type": kind, "offset": begin[kind], "length": stop - begin[kind]})
                begin[kind], end[kind] = (0, 0) if end[kind] <= offset else (offset, end[kind])

    def add_entities(end_offset: int) -> None:
        nonlocal position
        while position < len(splittable) and splittable[position]["offset"] < end_offset:
            entity = splittable[position]
            kind = entity["type"]
            if end[kind] and entity["offset"] <= end[kind]:
                end[kind] = max(end[kind], _end(entity))
            else:
                flush(entity["offset"])
                begin[kind], end[kind] = entity["offset"], _end(entity)
            position += 1
        flush(end_offset)

    stack: list[Entity] = []

    def add_offset(offset: int) -> None:
        while stack and offset >= _end(stack[-1]):
            size = len(result)
            add_entities(_end(stack[-1]))
            if stack[-1]["type"] in PRE:
                del result[size:]  # nothing inside pre or code
            stack.pop()
        add_entities(offset)

    for other in others:
        add_offset(other["offset"])
        stack.append(other)
    add_offset(2**62)
    return sorted(result, key=entity_order)
