"""Small real images for tests: a PNG of any size and colour, written here so no image library is needed."""

from __future__ import annotations

import struct
import zlib


def png(width: int, height: int, rgb: tuple[int, int, int] = (51, 144, 236)) -> bytes:
    """A valid PNG of one colour (8-bit RGB, no filter)."""
    row = b"\x00" + bytes(rgb) * width
    pixels = zlib.compress(row * height, 9)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def jpeg_header(width: int, height: int) -> bytes:
    """The start of a baseline JPEG up to its frame header: enough for a reader of image sizes."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof0
