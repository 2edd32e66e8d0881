"""Telegram's HTML parse mode: a strict parser that yields text plus entities.

It follows tdlib's ``parse_html`` (td/telegram/MessageEntity.cpp), which is what the
Bot API server runs: the same tag set, the same attribute rules, the same error
strings and UTF-8 byte offsets, the same pre/code merging. One deliberate difference:
tdlib keeps a bare ``&`` that does not start an entity as a literal, although the Bot
API documentation says it must be escaped; with ``strict_ampersand`` (the default)
the stand-in refuses it, because such text is a latent escaping bug in the bot
(``&lt`` inside an unescaped code sample would silently turn into ``<``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .units import utf8_len, utf16_len

SUPPORTED_TAGS = frozenset(
    {
        "a",
        "b",
        "strong",
        "i",
        "em",
        "s",
        "strike",
        "del",
        "u",
        "ins",
        "tg-spoiler",
        "tg-emoji",
        "span",
        "pre",
        "code",
        "blockquote",
    }
)

# Tags whose entity needs no argument.
_SIMPLE_TYPES = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "u": "underline",
    "ins": "underline",
    "tg-spoiler": "spoiler",
    "span": "spoiler",
}

_NAMED_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_SPACES = frozenset(" \t\r\n\v\f\0")  # tdlib's is_space
_SPECIAL = re.compile(r"[<&]")
# Fast paths for the common attribute-less tags; anything else takes the full tdlib route.
_PLAIN_START = re.compile(r"<([A-Za-z-]+)>")
_PLAIN_END = re.compile(r"</([A-Za-z-]+)>")
_NAME_TOKEN = re.compile(r"[A-Za-z0-9.\-]*")
_URL_SCHEMES = ("http://", "https://", "tg://", "ton://", "tonsite://")
_USER_LINK = re.compile(r"tg://user\?id=(\d+)$")


class HtmlError(ValueError):
    """The reason Telegram gives after "can't parse entities: "."""


def parse_html(
    text: str,
    *,
    strict_ampersand: bool = True,
    resolve_user: Callable[[int], dict[str, Any] | None] | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """Return (plain text, Bot API entity dicts with UTF-16 offsets) or raise HtmlError."""
    if "<" not in text and "&" not in text:
        return text, []
    return _Parser(text, strict_ampersand, resolve_user).run()


def decode_entity(text: str, pos: int) -> tuple[str, int] | None:
    """Decode the character reference starting at text[pos] == "&" like tdlib does.

    Returns (character, position after it) or None when it is not a reference.
    The ";" is optional, as in tdlib.
    """
    end = pos + 1
    n = len(text)
    if end < n and text[end] == "#":
        end += 1
        hexadecimal = end < n and text[end] in "xX"
        if hexadecimal:
            end += 1
        digits_start = end
        allowed = "0123456789abcdefABCDEF" if hexadecimal else "0123456789"
        while end < n and text[end] in allowed and end - digits_start < 8:
            end += 1
        if end == digits_start:
            return None
        code = int(text[digits_start:end], 16 if hexadecimal else 10)
        if code == 0 or code >= 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            return None
        char = chr(code)
    else:
        while end < n and text[end].isascii() and text[end].isalpha():
            end += 1
        named = _NAMED_ENTITIES.get(text[pos + 1 : end])
        if named is None:
            return None
        char = named
    if end < n and text[end] == ";":
        end += 1
    return char, end


class _Open:
    """A start tag waiting for its end tag."""

    __slots__ = ("argument", "offset", "piece", "tag")

    def __init__(self, tag: str, argument: str, offset: int, piece: int):
        self.tag = tag
        self.argument = argument
        self.offset = offset  # UTF-16 offset of the entity in the output text
        self.piece = piece  # index into the output pieces, to recover <a> text


class _Parser:
    __slots__ = ("entities", "out", "resolve_user", "stack", "strict_ampersand", "text", "u16")

    def __init__(self, text: str, strict_ampersand: bool, resolve_user: Callable[[int], dict[str, Any] | None] | None):
        self.text = text
        self.strict_ampersand = strict_ampersand
        self.resolve_user = resolve_user
        self.out: list[str] = []
        self.u16 = 0
        self.stack: list[_Open] = []
        # [type, offset, length, extra dict]; the language of a lone <code> is kept in
        # extra until a surrounding <pre> decides whether it survives
        self.entities: list[list[Any]] = []

    def error(self, reason: str, pos: int) -> HtmlError:
        return HtmlError(f"{reason} at byte offset {utf8_len(self.text[:pos])}")

    def emit(self, chunk: str) -> None:
        self.out.append(chunk)
        self.u16 += utf16_len(chunk)

    def run(self) -> tuple[str, list[dict[str, Any]]]:
        text = self.text
        n = len(text)
        pos = 0
        while True:
            match = _SPECIAL.search(text, pos)
            stop = match.start() if match else n
            if stop > pos:
                self.emit(text[pos:stop])
            if match is None:
                break
            if text[stop] == "&":
                pos = self.ampersand(stop)
            elif stop + 1 < n and text[stop + 1] == "/":
                pos = self.end_tag(stop)
            else:
                pos = self.start_tag(stop)
        if self.stack:
            raise HtmlError(f'Can\'t find end tag corresponding to start tag "{self.stack[-1].tag}"')
        return "".join(self.out), self.finish()

    def ampersand(self, pos: int) -> int:
        decoded = decode_entity(self.text, pos)
        if decoded is not None:
            self.emit(decoded[0])
            return decoded[1]
        if self.strict_ampersand:
            raise self.error('Character "&" must be escaped as "&amp;"', pos)
        self.emit("&")
        return pos + 1

    def start_tag(self, begin: int) -> int:
        plain = _PLAIN_START.match(self.text, begin)
        if plain is not None:
            tag = plain.group(1).lower()
            if tag in SUPPORTED_TAGS and tag != "span":  # span needs its class
                self.stack.append(_Open(tag, "", self.u16, len(self.out)))
                return plain.end()
        text = self.text
        n = len(text)
        i = begin + 1
        while i < n and text[i] not in _SPACES and text[i] != ">":
            i += 1
        if i >= n:
            raise self.error("Unclosed start tag", begin)
        tag = text[begin + 1 : i].lower()
        if tag not in SUPPORTED_TAGS:
            raise self.error(f'Unsupported start tag "{tag}"', begin)
        argument = ""
        while True:
            while i < n and text[i] in _SPACES:
                i += 1
            if i >= n:
                raise self.error(f'Unclosed start tag "{tag}"', begin)
            if text[i] == ">":
                break
            name_start = i
            while i < n and text[i] not in _SPACES and text[i] not in "=>":
                i += 1
            name = text[name_start:i]
            if not name:
                raise self.error(f'Empty attribute name in the tag "{tag}"', begin)
            while i < n and text[i] in _SPACES:
                i += 1
            if i >= n:
                raise self.error(f'Unclosed start tag "{tag}"', begin)
            if text[i] != "=":
                if tag == "blockquote" and name == "expandable":
                    argument = "expandable"
                    continue
                raise self.error(f'Expected equal sign in declaration of an attribute of the tag "{tag}"', begin)
            i += 1
            while i < n and text[i] in _SPACES:
                i += 1
            if i >= n:
                raise self.error(f'Unclosed start tag "{tag}"', begin)
            value, i = self.attribute_value(i, begin)
            argument = _tag_argument(tag, name, value, argument)
        if tag == "span" and argument != "spoiler":
            raise self.error('Tag "span" must have class "tg-spoiler"', begin)
        self.stack.append(_Open(tag, argument, self.u16, len(self.out)))
        return i + 1

    def attribute_value(self, i: int, begin: int) -> tuple[str, int]:
        text = self.text
        n = len(text)
        quote = text[i]
        if quote not in "'\"":
            # an unquoted name token: letters, digits, periods and hyphens, case-insensitive
            token = _NAME_TOKEN.match(text, i)
            end = token.end() if token else i
            if end >= n or (text[end] not in _SPACES and text[end] != ">"):
                raise self.error("Unexpected end of name token", i)
            return text[i:end].lower(), end
        i += 1
        chars: list[str] = []
        while i < n and text[i] != quote:
            if text[i] == "&":
                # inside attributes tdlib keeps an undecodable "&" literally (URLs with queries)
                decoded = decode_entity(text, i)
                if decoded is not None:
                    chars.append(decoded[0])
                    i = decoded[1]
                    continue
            chars.append(text[i])
            i += 1
        if i >= n:
            raise self.error("Unclosed start tag", begin)
        return "".join(chars), i + 1

    def end_tag(self, begin: int) -> int:
        if not self.stack:
            raise self.error("Unexpected end tag", begin)
        plain = _PLAIN_END.match(self.text, begin)
        if plain is not None and plain.group(1).lower() == self.stack[-1].tag:
            opened = self.stack.pop()
            if self.u16 > opened.offset:
                self.close_entity(opened)
            return plain.end()
        text = self.text
        n = len(text)
        i = begin + 2
        while i < n and text[i] not in _SPACES and text[i] != ">":
            i += 1
        name = text[begin + 2 : i].lower()
        while i < n and text[i] in _SPACES:
            i += 1
        if i >= n or text[i] != ">":
            raise self.error("Unclosed end tag", begin)
        opened = self.stack[-1]
        if name and name != opened.tag:
            raise HtmlError(
                f"Unmatched end tag at byte offset {utf8_len(text[:begin])}, "
                f'expected "</{opened.tag}>", found "</{name}>"'
            )
        self.stack.pop()
        if self.u16 > opened.offset:  # empty entities are dropped, as in tdlib
            self.close_entity(opened)
        return i + 1

    def close_entity(self, opened: _Open) -> None:
        tag, offset, length = opened.tag, opened.offset, self.u16 - opened.offset
        entities = self.entities
        last = entities[-1] if entities else None
        same_range = last is not None and last[1] == offset and last[2] == length
        last = last or []  # only read when same_range
        if tag in _SIMPLE_TYPES:
            entities.append([_SIMPLE_TYPES[tag], offset, length, None])
        elif tag == "code":
            if same_range and last[0] == "pre" and opened.argument:
                last[3] = {"language": opened.argument}
            else:
                entities.append(["code", offset, length, {"language": opened.argument} if opened.argument else None])
        elif tag == "pre":
            if same_range and last[0] == "code":
                # <pre><code class="language-x">: one pre entity carrying the language
                last[0] = "pre"
            else:
                entities.append(["pre", offset, length, None])
        elif tag == "blockquote":
            entities.append(["expandable_blockquote" if opened.argument else "blockquote", offset, length, None])
        elif tag == "tg-emoji":
            if not opened.argument.isdigit() or int(opened.argument) == 0:
                raise HtmlError("Invalid custom emoji identifier specified")
            entities.append(["custom_emoji", offset, length, {"custom_emoji_id": opened.argument}])
        elif tag == "a":
            url = opened.argument or "".join(self.out[opened.piece :])
            entity = self.link_entity(url.strip())
            if entity is not None:
                entities.append([entity[0], offset, length, entity[1]])

    def link_entity(self, url: str) -> tuple[str, dict[str, Any]] | None:
        """text_mention for tg://user?id=N of a known user, text_link for a valid URL, else dropped."""
        mention = _USER_LINK.match(url)
        if mention:
            user = self.resolve_user(int(mention.group(1))) if self.resolve_user else None
            return ("text_mention", {"user": user}) if user else None
        if not url or any(ch in _SPACES for ch in url):
            return None
        lowered = url.lower()
        if "://" not in lowered:
            url = "http://" + url
        elif not lowered.startswith(_URL_SCHEMES):
            return None
        return "text_link", {"url": url}

    def finish(self) -> list[dict[str, Any]]:
        entities = self.entities
        # tdlib forbids entities inside code and pre; they are silently removed
        blocks = [(e[1], e[1] + e[2]) for e in entities if e[0] in _CODE_TYPES] if len(entities) > 1 else ()
        result = []
        for kind, offset, length, extra in entities:
            if blocks and kind not in _MAY_HOLD_CODE and _inside(blocks, offset, offset + length):
                continue
            entity = {"type": kind, "offset": offset, "length": length}
            if extra and kind != "code":  # a code entity has no language in the Bot API
                entity.update(extra)
            result.append(entity)
        if len(result) > 1:
            result.sort(key=_entity_order)
        return result


_CODE_TYPES = frozenset({"code", "pre"})
_MAY_HOLD_CODE = frozenset({"code", "pre", "blockquote", "expandable_blockquote"})


def _inside(blocks: list[tuple[int, int]], start: int, end: int) -> bool:
    for block_start, block_end in blocks:
        if block_start <= start and end <= block_end:
            return True
    return False


def _entity_order(entity: dict[str, Any]) -> tuple[int, int]:
    """Telegram lists entities by offset, outer (longer) ones first."""
    return entity["offset"], -entity["length"]


def _tag_argument(tag: str, name: str, value: str, current: str) -> str:
    """The one attribute each tag cares about; tdlib ignores all others."""
    if tag == "a" and name == "href":
        return value
    if tag == "code" and name == "class" and value.startswith("language-"):
        return value[len("language-") :]
    if tag == "span" and name == "class" and value.startswith("tg-"):
        return value[len("tg-") :]
    if tag == "tg-emoji" and name == "emoji-id":
        return value
    if tag == "blockquote" and name == "expandable":
        return "expandable"
    return current
