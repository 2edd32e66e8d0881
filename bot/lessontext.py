"""Lesson text: `code` and **bold**, everything else literal; rendered to Telegram HTML or to plain text."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot import bidi
from bot.i18n import is_rtl
from bot.safehtml import Html, bold, code, escape

_TOKEN = re.compile(r"(`|\*\*)")


@dataclass(frozen=True)
class MarkupError(ValueError):
    """A mark that opens and never closes."""

    mark: str
    offset: int

    def __str__(self) -> str:
        return f"unclosed {self.mark} (opened at character {self.offset + 1})"


def parse(text: str) -> list[tuple[str, str]]:
    """Split ``text`` into (kind, text) runs, kind being 'plain', 'code' or 'bold'; raise MarkupError."""
    runs: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.search(text, pos)
        if match is None:
            runs.append(("plain", text[pos:]))
            break
        if match.start() > pos:
            runs.append(("plain", text[pos : match.start()]))
        mark = match.group(1)
        # Inside `code` nothing is a mark, so **kwargs stays literal there.
        end = text.find(mark, match.end())
        if end < 0:
            raise MarkupError(mark, match.start())
        inner = text[match.end() : end]
        if not inner:
            raise MarkupError(mark, match.start())
        runs.append(("code" if mark == "`" else "bold", inner))
        pos = end + len(mark)
    return runs


_FORMATS = {"plain": escape, "code": code, "bold": bold}


def to_html(text: str, rtl: bool | None = None) -> Html:
    """Render markup to Telegram HTML, escaping everything the author wrote.

    In a right-to-left language (by default: the current one) inline code and other
    left-to-right runs are isolated so that they keep their order.
    """
    rtl = is_rtl() if rtl is None else rtl
    out: list[str] = []
    for kind, run in parse(text):
        if not rtl:
            out.append(_FORMATS[kind](run))
        elif kind == "code":
            out.append(bidi.isolate(_FORMATS[kind](run)))
        else:
            out.append(_FORMATS[kind](bidi.isolate_runs(run)))
    # Isolates are invisible characters, not markup: the parts stay HTML when wrapped in them.
    return Html("".join(out))


def to_plain(text: str, rtl: bool | None = None) -> str:
    """Render markup as the plain text a learner sees: buttons, previews and length checks."""
    rtl = is_rtl() if rtl is None else rtl
    runs = parse(text)
    if not rtl:
        return "".join(run for _, run in runs)
    return "".join(bidi.isolate(run) if kind == "code" else bidi.isolate_runs(run) for kind, run in runs)


def plain(text: str) -> str:
    """Return plain text (a poll, a button) as shown in the current language: isolated if right to left."""
    return bidi.isolate_runs(text) if is_rtl() else text
