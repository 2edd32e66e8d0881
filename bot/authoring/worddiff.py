"""A word diff of two texts, as `git diff --word-diff=plain` shows one: [-removed-]{+added+}, with a little context."""

from __future__ import annotations

import difflib
import re

CONTEXT = 5  # unchanged words kept on each side of a change; the rest is elided as '…'

_WORD = re.compile(r"\S+")


def word_diff(old: str, new: str, context: int = CONTEXT) -> str:
    """Return ``new`` against ``old`` word by word: changes marked, long unchanged runs elided; '' if equal."""
    before, after = _WORD.findall(old), _WORD.findall(new)
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    opcodes = matcher.get_opcodes()
    if all(tag == "equal" for tag, *_ in opcodes):
        return ""
    pieces: list[str] = []
    for index, (tag, a0, a1, b0, b1) in enumerate(opcodes):
        if tag == "equal":
            same = before[a0:a1]
            first, last = index == 0, index == len(opcodes) - 1
            keep_head = 0 if first else context
            keep_tail = 0 if last else context
            if len(same) > keep_head + keep_tail:
                pieces += [*same[:keep_head], "…", *same[len(same) - keep_tail :]]
            else:
                pieces += same
            continue
        if a1 > a0:
            pieces.append("[-" + " ".join(before[a0:a1]) + "-]")
        if b1 > b0:
            pieces.append("{+" + " ".join(after[b0:b1]) + "+}")
    return " ".join(pieces)
