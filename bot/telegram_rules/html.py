"""Telegram's HTML parse mode: a strict parser that yields text plus entities.

A port of tdlib's ``parse_html`` (td/telegram/MessageEntity.cpp), which is what the Bot API server runs
(``parseTextEntities``): the same tag set, the same attribute rules, the same error strings and UTF-8 byte
offsets, the same pre/code merging, the same order of entities. It is pinned by golden cases taken from
tdlib's own tests and the Bot API documentation (tests/test_telegram_rules_html.py). Entities come in the
Bot API's shape, with UTF-16 offsets. What Telegram does to them afterwards, when the message is stored
(nested entities removed or merged, trimming), is bot.telegram_rules.text.

One deliberate difference: tdlib keeps a bare ``&`` that does not start a character reference as a literal,
although the Bot API documentation says it must be escaped; with ``strict_ampersand`` (the default) the
parser refuses it, because such text is a latent escaping bug in the bot (``&lt`` inside an unescaped code
sample would silently turn into ``<``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from bot.telegram_rules.units import utf8_len, utf16_len

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
        "tg-time",
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

# tdlib orders entities by offset, then longer first, then by these (MessageEntity::get_type_priority);
# a pre with a language is tdlib's PreCode, one before a plain pre.
PRIORITY = {
    "blockquote": 0,
    "expandable_blockquote": 0,
    "pre": 11,
    "code": 20,
    "date_time": 30,
    "text_link": 49,
    "text_mention": 49,
    "bold": 90,
    "italic": 91,
    "underline": 92,
    "strikethrough": 93,
    "spoiler": 94,
    "custom_emoji": 99,
}

_NAMED_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_SPACES = frozenset(" \t\r\n\v\f\0")  # tdlib's is_space, and the end of its C string
_ATTRIBUTE_NAME_END = _SPACES | frozenset("=>/\"'")
_SPECIAL = re.compile(r"[<&]")
# Fast paths for the common attribute-less tags; anything else takes the full tdlib route.
_PLAIN_START = re.compile(r"<([A-Za-z-]+)>")
_PLAIN_END = re.compile(r"</([A-Za-z-]+)>")
_NAME_TOKEN = re.compile(r"[A-Za-z0-9.\-]*")
_USER_LINK = re.compile(r"tg://user\?id=(\d+)$")
_INT = re.compile(r"-?\d+")
_LEADING_INT = re.compile(r"-?\d*")
_INT32 = 2**31
_INT64 = 2**63
SURROGATES = (
    "Text contains invalid Unicode characters after decoding HTML entities, check for unmatched surrogate code units"
)
# tg-time's format letters (td/telegram/FormattedDate.cpp, get_date_flags), and how the Bot API writes them back
# (telegram-bot-api's JsonEntity): day of week, then the date's precision, then the time's.
_RELATIVE = frozenset("rR")
_FORMAT_LETTERS = frozenset("tTdDwW")


class HtmlError(ValueError):
    """The reason Telegram gives after "can't parse entities: "."""


def parse_html(
    text: str,
    *,
    strict_ampersand: bool = True,
    resolve_user: Callable[[int], dict[str, Any] | None] | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """Return (plain text, Bot API entity dicts with UTF-16 offsets, in tdlib's order) or raise HtmlError."""
    if "<" not in text and "&" not in text:
        return text, []
    return _Parser(text, strict_ampersand, resolve_user).run()


def decode_entity(text: str, pos: int) -> tuple[str, int] | None:
    """Decode the character reference starting at text[pos] == "&" as tdlib does (decode_html_entity).

    Returns (character, position after it) or None when it is not a reference. The ";" is optional, a hex
    reference is written "&#x" (a lowercase x), and a numeric one takes fewer than 10 characters before its ";".
    A reference to half a surrogate pair decodes; parse_html refuses the text it ends up in.
    """
    end = pos + 1
    n = len(text)
    if end < n and text[end] == "#":
        end += 1
        hexadecimal = end < n and text[end] == "x"
        if hexadecimal:
            end += 1
        digits_start = end
        allowed = "0123456789abcdefABCDEF" if hexadecimal else "0123456789"
        while end < n and text[end] in allowed:
            end += 1
        if end == digits_start or end - pos >= 10:
            return None
        code = int(text[digits_start:end], 16 if hexadecimal else 10)
        if code == 0 or code >= 0x10FFFF:
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


def checked_link(url: str) -> str | None:
    """Return ``url`` as Telegram keeps a link's address (tdlib's LinkManager::get_checked_link), or None.

    An http(s) address gets its scheme (http:// when none is given), a lowercased host that has a dot, and a
    path that starts with "/"; tg://, ton:// and tonsite:// keep their host and query.
    """
    lowered = url.lower()
    for scheme in ("tg", "ton", "tonsite"):
        if lowered.startswith(scheme + ":"):
            rest = url[len(scheme) + 1 :]
            rest = rest.removeprefix("//")
            parsed = _parse_url(rest)
            if parsed is None or rest.lower().startswith(("http://", "https://")) or parsed[1] or parsed[3]:
                return None
            _, _, host, _, query = parsed
            query = query[1:] if query.startswith("/?") else query
            if not all(c.isascii() and (c.isalnum() or c in "-_" or (scheme == "tonsite" and c == ".")) for c in host):
                return None
            return f"{scheme}://{host}{query}"
    parsed = _parse_url(url)
    if parsed is None:
        return None
    protocol, userinfo, host, port, query = parsed
    if "." not in host and not host.startswith("["):
        return None
    return f"{protocol}://{userinfo + '@' if userinfo else ''}{host}{f':{port}' if port else ''}{query}"


_URL_PART = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_!$,~*'();&+=")


def _parse_url(url: str) -> tuple[str, str, str, int, str] | None:
    """tdlib's parse_url (tdutils/td/utils/HttpUrl.cpp): (protocol, userinfo, host, port given, query), or None."""
    match = re.match(r"[^:/?#@\[\]]*", url)
    scheme = match.group(0).lower() if match else ""
    rest = url
    protocol = "http"
    if url[len(scheme) :].startswith("://"):
        if scheme not in ("http", "https"):
            return None
        protocol, rest = scheme, url[len(scheme) + 3 :]
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    userinfo_host_port, query = rest[:cut], rest[cut:]
    port = 0
    colon = len(userinfo_host_port) - 1
    while colon > 0 and userinfo_host_port[colon] not in ":]@":
        colon -= 1
    userinfo_host = userinfo_host_port
    if colon > 0 and userinfo_host_port[colon] == ":":
        digits = userinfo_host_port[colon + 1 :].lstrip("0") or "0"
        port = int(digits) if digits.isdigit() and digits.isascii() else -1
        if port == 0:
            port = -1
        userinfo_host = userinfo_host_port[:colon]
    if not 0 <= port <= 65535:
        return None
    userinfo, _, host = userinfo_host.rpartition("@")
    if not host or host == ".":
        return None
    query = query.rstrip("".join(_SPACES - {"\0"})) or "/"
    query = ("" if query.startswith("/") else "/") + "".join(f"%{ord(c):02X}" if ord(c) <= 0x20 else c for c in query)
    host = host.lower()
    if host.startswith("[") and host.endswith("]"):
        if not all(c in "0123456789abcdef:." for c in host[1:-1]):
            return None
    elif not _url_part_ok(host, allow_colon=False) or not _url_part_ok(userinfo, allow_colon=True):
        return None
    return protocol, userinfo, host, port, query


def _url_part_ok(part: str, *, allow_colon: bool) -> bool:
    i = 0
    while i < len(part):
        c = part[i]
        if c in _URL_PART or (allow_colon and c == ":") or ord(c) >= 128:
            i += 1
        elif c == "%" and re.match(r"%[0-9A-Fa-f]{2}", part[i:]):
            i += 3
        else:
            return False
    return True


def date_time_format(letters: str) -> str | None:
    """Return how the Bot API writes a tg-time's format back (date_time_format), or None if tdlib refuses it."""
    if letters in _RELATIVE:
        return "r"
    if not set(letters) <= _FORMAT_LETTERS:
        return None
    day = "w" if set(letters) & {"w", "W"} else ""
    date = "d" if "d" in letters else "D" if "D" in letters else ""
    time = "t" if "t" in letters else "T" if "T" in letters else ""
    return day + date + time


def _leading_integer(text: str) -> int:
    """A tg-time's unix time as tdlib's to_integer<int32> reads it: a leading "-" and digits, wrapping on overflow."""
    match = _LEADING_INT.match(text)
    value = int(match.group(0)) if match and match.group(0) not in ("", "-") else 0
    return (value + _INT32) % (2 * _INT32) - _INT32


def _custom_emoji_id(text: str) -> int | None:
    """A custom emoji id as tdlib's to_integer_safe<int64> reads it: the number written plainly, or None."""
    if not _INT.fullmatch(text) or str(int(text)) != text or not -_INT64 <= int(text) < _INT64:
        return None
    return int(text)


class _Open:
    """A start tag waiting for its end tag."""

    __slots__ = ("argument", "date", "offset", "piece", "tag")

    def __init__(self, tag: str, argument: str, offset: int, piece: int, date: int = 0):
        self.tag = tag
        self.argument = argument
        self.date = date  # tg-time's unix time
        self.offset = offset  # UTF-16 offset of the entity in the output text
        self.piece = piece  # index into the output pieces, to recover <a> text


class _Parser:
    __slots__ = ("entities", "out", "resolve_user", "stack", "strict_ampersand", "surrogates", "text", "u16")

    def __init__(self, text: str, strict_ampersand: bool, resolve_user: Callable[[int], dict[str, Any] | None] | None):
        self.text = text
        self.strict_ampersand = strict_ampersand
        self.resolve_user = resolve_user
        self.out: list[str] = []
        self.u16 = 0
        self.stack: list[_Open] = []
        self.surrogates = False  # a reference decoded to half a surrogate pair: refused at the end, as in tdlib
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
        if self.surrogates:
            raise HtmlError(SURROGATES)
        return "".join(self.out), self.finish()

    def ampersand(self, pos: int) -> int:
        decoded = decode_entity(self.text, pos)
        if decoded is not None:
            char = decoded[0]
            if 0xD800 <= ord(char) <= 0xDFFF:
                self.surrogates = True
                self.u16 += 1
                self.out.append("\ufffd")  # never returned: the text is refused at its end
            else:
                self.emit(char)
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
        date = 0
        while True:
            while i < n and text[i] in _SPACES:
                i += 1
            if i < n and text[i] == ">":
                break
            name_start = i
            while i < n and text[i] not in _ATTRIBUTE_NAME_END:
                i += 1
            name = text[name_start:i]
            if not name:
                raise self.error(f'Empty attribute name in the tag "{tag}"', begin)
            while i < n and text[i] in _SPACES:
                i += 1
            if i >= n or text[i] != "=":
                if i >= n:
                    raise self.error(f'Unclosed start tag "{tag}"', begin)
                if tag == "blockquote" and name == "expandable":
                    argument = "expandable"
                continue  # an attribute without a value is ignored
            i += 1
            while i < n and text[i] in _SPACES:
                i += 1
            if i >= n:
                raise self.error(f'Unclosed start tag "{tag}"', begin)
            value, i = self.attribute_value(i)
            if i >= n:
                raise self.error("Unclosed start tag", begin)
            if tag == "tg-time" and name == "unix":
                date = _leading_integer(value)
            else:
                argument = _tag_argument(tag, name, value, argument)
        if tag == "span" and argument != "spoiler":
            raise self.error('Tag "span" must have class "tg-spoiler"', begin)
        self.stack.append(_Open(tag, argument, self.u16, len(self.out), date))
        return i + 1

    def attribute_value(self, i: int) -> tuple[str, int]:
        text = self.text
        n = len(text)
        quote = text[i]
        if quote not in "'\"":
            # a name token: letters, digits, periods and hyphens, case-insensitive
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
        if i < n:
            i += 1  # the closing quote
        return "".join(chars), i

    def end_tag(self, begin: int) -> int:
        if not self.stack:
            raise self.error("Unexpected end tag", begin)
        plain = _PLAIN_END.match(self.text, begin)
        if plain is not None and plain.group(1).lower() == self.stack[-1].tag:
            self.close_entity(self.stack.pop())
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
        self.close_entity(self.stack.pop())
        return i + 1

    def close_entity(self, opened: _Open) -> None:
        if self.u16 <= opened.offset:
            return  # empty entities are dropped, as in tdlib
        tag, offset, length = opened.tag, opened.offset, self.u16 - opened.offset
        entities = self.entities
        last = entities[-1] if entities else None
        same_range = last is not None and last[1] == offset and last[2] == length
        last = last or []  # only read when same_range
        if tag in _SIMPLE_TYPES:
            entities.append([_SIMPLE_TYPES[tag], offset, length, None])
        elif tag == "code":
            if same_range and last[0] == "pre" and last[3] is None and opened.argument:
                last[3] = {"language": opened.argument}  # <code class="language-x"><pre>: tdlib's PreCode
            else:
                entities.append(["code", offset, length, {"language": opened.argument} if opened.argument else None])
        elif tag == "pre":
            if same_range and last[0] == "code" and last[3] is not None:
                last[0] = "pre"  # <pre><code class="language-x">: one pre entity carrying the language
            else:
                entities.append(["pre", offset, length, None])
        elif tag == "blockquote":
            entities.append(["expandable_blockquote" if opened.argument else "blockquote", offset, length, None])
        elif tag == "tg-emoji":
            emoji_id = _custom_emoji_id(opened.argument)
            if not emoji_id:
                raise HtmlError("Invalid custom emoji identifier specified")
            entities.append(["custom_emoji", offset, length, {"custom_emoji_id": str(emoji_id)}])
        elif tag == "tg-time":
            shown = date_time_format(opened.argument)
            if shown is None:
                raise HtmlError("Invalid date format used")
            if opened.date > 0:
                entities.append(["date_time", offset, length, {"unix_time": opened.date, "date_time_format": shown}])
        elif tag == "a":
            url = opened.argument or "".join(self.out[opened.piece :])
            entity = self.link_entity(url)
            if entity is not None:
                entities.append([entity[0], offset, length, entity[1]])

    def link_entity(self, url: str) -> tuple[str, dict[str, Any]] | None:
        """text_mention for tg://user?id=N of a known user, text_link for a valid URL, else dropped."""
        mention = _USER_LINK.match(url)
        if mention:
            user = self.resolve_user(int(mention.group(1))) if self.resolve_user else None
            return ("text_mention", {"user": user}) if user else None
        checked = checked_link(url)
        return ("text_link", {"url": checked}) if checked else None

    def finish(self) -> list[dict[str, Any]]:
        result = []
        for kind, offset, length, extra in self.entities:
            entity = {"type": kind, "offset": offset, "length": length}
            if extra and kind != "code":  # a code entity has no language in the Bot API
                entity.update(extra)
            result.append(entity)
        if len(result) > 1:
            result.sort(key=entity_order)
        return result


def entity_order(entity: dict[str, Any]) -> tuple[int, int, int]:
    """tdlib's order of entities: by offset, outer (longer) ones first, then by the type's priority."""
    priority = PRIORITY.get(entity["type"], 50)
    if entity["type"] == "pre" and "language" in entity:
        priority = 10  # tdlib's PreCode
    return entity["offset"], -entity["length"], priority


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
    if tag == "tg-time" and name == "format":
        return value
    return current
