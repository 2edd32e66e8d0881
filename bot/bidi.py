"""Right-to-left text: keep code, numbers and 'n / N' in their own order inside Arabic sentences.

The Unicode bidirectional algorithm lays out a run of Latin text inside an Arabic sentence
left to right, but the neutral characters at its edges (the '()' of ``backward()``, the '/' of
'3 / 13', a trailing '.') take the sentence's direction and jump to the wrong side. Wrapping
each such run in a left-to-right isolate (LRI … PDI) fixes its order without touching the
words around it. Telegram's clients honour isolates in messages, buttons and polls.
"""

from __future__ import annotations

import re

LRI, PDI = "\u2066", "\u2069"

# A run of left-to-right material: tokens without right-to-left letters, at least one of them
# holding a Latin letter or a digit, joined by single spaces. Punctuation that ends a sentence
# ('.', ',', ':', '؟', '،') stays outside, so it keeps the sentence's direction.
_RTL_LETTER = "\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefc"
_TOKEN = rf"[^\s{_RTL_LETTER}]+"
_RUN = re.compile(rf"{_TOKEN}(?: {_TOKEN})*")
_STRONG = re.compile(r"[A-Za-z0-9]")
_TRAILING = ".,:;!?"


def isolate(text: str) -> str:
    """Wrap ``text`` in a left-to-right isolate."""
    return f"{LRI}{text}{PDI}"


def isolate_runs(text: str) -> str:
    """Isolate every left-to-right run (code, numbers, Latin words) inside right-to-left plain text."""

    def wrap(match: re.Match[str]) -> str:
        run: str = match.group(0)
        if not _STRONG.search(run) or LRI in run or PDI in run:
            return run
        core = run.rstrip(_TRAILING)
        # '(' or ')' left at the end belongs to the code, as in backward(); only sentence marks go.
        return isolate(core) + run[len(core) :]

    return _RUN.sub(wrap, text)
