"""The lesson text markup: `code` and **bold**, everything else literal; rendered to Telegram HTML."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

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


_TAGS = {"plain": ("", ""), "code": ("<code>", "</code>"), "bold": ("<b>", "</b>")}


def to_html(text: str) -> str:
    """Render markup to Telegram HTML, escaping everything the author wrote."""
    return "".join(
        _TAGS[kind][0] + html.escape(run, quote=False) + _TAGS[kind][1] for kind, run in parse(text)
    )


def to_plain(text: str) -> str:
    """Render markup as the plain text a learner sees, for previews and length checks."""
    return "".join(run for _, run in parse(text))


def code_block(code: str) -> str:
    """Render a Python code block the way Telegram shows it with syntax highlighting."""
    return '<pre><code class="language-python">' + html.escape(code, quote=False) + "</code></pre>"
