"""Telegram's units of measure.

Text limits and entity offsets count UTF-16 code units (an emoji outside the BMP is
two); callback_data counts UTF-8 bytes; HTML parse errors report UTF-8 byte offsets.
Python strings count code points, so every limit check goes through these helpers.
"""

from __future__ import annotations


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units."""
    if text.isascii():  # the common case, and much cheaper than encoding
        return len(text)
    return len(text.encode("utf-16-le")) // 2


def utf8_len(text: str) -> int:
    """Length in UTF-8 bytes."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8"))
