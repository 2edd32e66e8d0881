"""Telegram HTML as a type: plain text is escaped where it meets HTML, by these helpers and nowhere else.

A renderer never chooses an escaping idiom: it passes plain text (a catalog message, a number, a
learner's output) and ``Html`` (lesson markup already rendered, a tag built here) to the same helpers,
which escape the first and keep the second. A message's text is ``Html``, so a plain ``str`` sent by
mistake fails the type check.
"""

from __future__ import annotations

import html
from collections.abc import Iterable


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
