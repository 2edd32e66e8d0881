"""Telegram HTML as a type: plain text is escaped where it meets HTML, by these helpers and nowhere else.

A renderer never chooses an escaping idiom: it passes plain text (a catalog message, a number, a
learner's output) and ``Html`` (lesson markup already rendered, a tag built here) to the same helpers,
which escape the first and keep the second. A message's text is ``Html``, so a plain ``str`` sent by
mistake fails the type check.
"""

from __future__ import annotations

import html
import html.parser
import re
from collections.abc import Iterable

_TAG = re.compile(r"<[^>]+>")


class Html(str):
    """Text that is Telegram HTML as it stands: its plain parts were escaped, its tags are meant."""

    __slots__ = ()


def escape(text: str) -> Html:
    """Return ``text`` as HTML that shows exactly its characters; ``Html`` is returned as it is."""
    if isinstance(text, Html):
        return text
    # Quotes need no escaping outside attributes, and no text of ours goes into one.
    return Html(html.escape(text, quote=False))


def join(parts: Iterable[str], separator: str = "\n\n") -> Html:
    """Join plain text and ``Html`` into one ``Html``, by default as paragraphs."""
    return Html(escape(separator).join(escape(part) for part in parts))


def fill(template: str, **values: str) -> Html:
    """Fill a plain-text template (a translated message) with values, plain or ``Html``."""
    return Html(escape(template).format(**{name: escape(value) for name, value in values.items()}))


def bold(text: str) -> Html:
    """Return ``text`` in bold."""
    return Html(f"<b>{escape(text)}</b>")


def italic(text: str) -> Html:
    """Return ``text`` in italics."""
    return Html(f"<i>{escape(text)}</i>")


def code(text: str) -> Html:
    """Return ``text`` as inline code."""
    return Html(f"<code>{escape(text)}</code>")


def pre(text: str) -> Html:
    """Return ``text`` as a preformatted block (a program's output)."""
    return Html(f"<pre>{escape(text)}</pre>")


def code_block(source: str) -> Html:
    """Return Python source as the code block Telegram highlights (and copies on a tap)."""
    return Html(f'<pre><code class="language-python">{escape(source)}</code></pre>')


def visible_text(text: str) -> str:
    """Return what a learner reads of ``text`` once Telegram has parsed its HTML."""
    return html.unescape(_TAG.sub("", text))


# What Telegram makes of our HTML: its text and entities, to tell whether an edit would change anything.

Entity = tuple[str, int, int, str | None]  # type, offset and length in UTF-16 code units, language of a pre

_ENTITY_TAGS = {"b": "bold", "i": "italic", "code": "code", "pre": "pre"}
_TRIMMED = " \n"  # what Telegram strips from both ends of a message


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class _TelegramView(html.parser.HTMLParser):
    """Parse the tags this module writes into Telegram's text and entities (None: markup it does not model)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pieces: list[str] = []
        self.units = 0
        self.open: list[tuple[str, int, str | None]] = []
        self.entities: list[Entity] = []
        self.unknown = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _ENTITY_TAGS:
            self.unknown = True
            return
        css = dict(attrs).get("class") or ""
        self.open.append((tag, self.units, css.removeprefix("language-") if css.startswith("language-") else None))

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open[-1][0] != tag:
            self.unknown = True
            return
        _, start, language = self.open.pop()
        if self.units == start:
            return  # Telegram drops an empty entity
        last = self.entities[-1] if self.entities else None
        if tag == "pre" and last is not None and last[0] == "code" and last[1:3] == (start, self.units - start):
            self.entities[-1] = ("pre", start, self.units - start, last[3])  # <pre><code class=...>: one pre
            return
        self.entities.append((_ENTITY_TAGS[tag], start, self.units - start, language if tag == "code" else None))

    def handle_data(self, data: str) -> None:
        self.pieces.append(data)
        self.units += _utf16(data)


def telegram_view(text: Html) -> tuple[str, tuple[Entity, ...]] | None:
    """Return the text and entities Telegram stores for ``text`` (None if it holds markup not modelled here)."""
    parser = _TelegramView()
    parser.feed(text)
    parser.close()
    if parser.unknown or parser.open:
        return None
    plain = "".join(parser.pieces)
    code = ("code", "pre")
    blocks = [(e[1], e[1] + e[2]) for e in parser.entities if e[0] in code]
    entities = [
        # A code entity carries no language; entities inside code are dropped.
        (kind, offset, length, language if kind == "pre" else None)
        for kind, offset, length, language in parser.entities
        if kind in code or not any(start <= offset and offset + length <= end for start, end in blocks)
    ]
    first = min((e[1] for e in entities), default=len(plain))
    left = 0
    while left < len(plain) and plain[left] in _TRIMMED and left < first:
        left += 1
    right = len(plain)
    while right > left and plain[right - 1] in _TRIMMED:
        right -= 1
    trimmed = plain[left:right]
    total = _utf16(trimmed)
    kept = []
    for kind, offset, length, language in entities:
        start, end = max(offset - left, 0), min(offset + length - left, total)
        if end > start:
            kept.append((kind, start, end - start, language))
    kept.sort(key=lambda e: (e[1], -e[2]))
    return trimmed, tuple(kept)
