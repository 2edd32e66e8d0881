"""Files the bot sends (photos, documents): their bytes, Telegram's ids for them, and getFile paths.

Telegram keeps every file a bot uploads and hands back a ``file_id`` the bot may send again
instead of the bytes, and a ``file_unique_id`` that is the same for the same file whoever
sends it. The built-in server does the same, in memory and in its state store, so a photo
in the web chat's history still shows after a restart. It never fetches a URL: it serves
loopback only, so a photo given as an HTTP URL is refused with a line saying so.

A photo is stored as uploaded and described by one PhotoSize, its own (Telegram also adds
smaller thumbnails; a bot reads ``photo[-1]``, the largest, which this one is).
"""

from __future__ import annotations

import hashlib
import itertools
import struct
from dataclasses import dataclass
from typing import Any

from bot.telegram_rules.limits import PHOTO_MAX_BYTES, PHOTO_MAX_RATIO, PHOTO_MAX_SIDES, UPLOAD_MAX_BYTES

from .errors import bad_request

WRONG_FILE = "wrong file identifier/HTTP URL specified"

# Telegram's ids begin with a type tag; keeping the tags lets a test (and a reader) tell them apart.
_ID_PREFIX = {"photo": "AgAC", "document": "BQAC"}
_UNIQUE_PREFIX = {"photo": "AQAD", "document": "AgAD"}
_EXTENSIONS = {"image/jpeg": "jpg", "image/png": "png", "image/webp": "webp", "image/gif": "gif"}


@dataclass(frozen=True, slots=True)
class StoredFile:
    """One file as the server keeps it. width and height are 0 for a document."""

    file_id: str
    unique_id: str
    kind: str  # "photo" or "document"
    data: bytes
    mime: str
    width: int = 0
    height: int = 0
    file_name: str | None = None

    @property
    def path(self) -> str:
        """The file_path getFile returns, relative to /file/bot<token>/."""
        folder = "photos" if self.kind == "photo" else "documents"
        extension = _EXTENSIONS.get(self.mime, "bin")
        return f"{folder}/{self.unique_id}.{extension}"

    def photo_size(self) -> dict[str, Any]:
        return {
            "file_id": self.file_id,
            "file_unique_id": self.unique_id,
            "width": self.width,
            "height": self.height,
            "file_size": len(self.data),
        }

    def telegram_file(self) -> dict[str, Any]:
        """The File object getFile returns."""
        return {
            "file_id": self.file_id,
            "file_unique_id": self.unique_id,
            "file_size": len(self.data),
            "file_path": self.path,
        }


class Files:
    """Every file the server holds, by file_id and by getFile path."""

    def __init__(self) -> None:
        self.by_id: dict[str, StoredFile] = {}
        self.by_path: dict[str, StoredFile] = {}
        self._numbers = itertools.count(1)

    def add(self, stored: StoredFile) -> None:
        self.by_id[stored.file_id] = stored
        self.by_path[stored.path] = stored
        number = int(stored.file_id[len(_ID_PREFIX[stored.kind]) :].split("_")[0], 16)
        # ids stay new after a restart: never reuse a number a saved file has
        self._numbers = itertools.count(max(number + 1, next(self._numbers)))

    def upload(self, kind: str, data: bytes, file_name: str | None, mime: str | None) -> StoredFile:
        """Store uploaded bytes as a photo (checked as Telegram checks photos) or a document."""
        if kind == "photo":
            if len(data) > PHOTO_MAX_BYTES:
                raise bad_request("PHOTO_SAVE_FILE_INVALID")  # the stand-in's wording
            image_type, width, height = image_size(data)
            if width + height > PHOTO_MAX_SIDES or max(width, height) > PHOTO_MAX_RATIO * min(width, height):
                raise bad_request("PHOTO_INVALID_DIMENSIONS")
            mime = image_type
        elif len(data) > UPLOAD_MAX_BYTES:
            raise bad_request("file is too big")
        digest = hashlib.sha256(data).hexdigest()[:16]
        stored = StoredFile(
            file_id=f"{_ID_PREFIX[kind]}{next(self._numbers):x}_{digest}",
            unique_id=f"{_UNIQUE_PREFIX[kind]}{digest}",
            kind=kind,
            data=data,
            mime=mime or "application/octet-stream",
            width=width if kind == "photo" else 0,
            height=height if kind == "photo" else 0,
            file_name=file_name,
        )
        self.add(stored)
        return stored

    def reuse(self, kind: str, file_id: str) -> StoredFile:
        """The file a bot names by file_id, which must be of the kind it sends it as."""
        if file_id.lower().startswith(("http://", "https://")):
            # the stand-in's wording: Telegram would download it; this server reaches no network
            raise bad_request(f"{WRONG_FILE} (the built-in Bot API server does not download URLs: upload the file)")
        stored = self.by_id.get(file_id)
        if stored is None:
            raise bad_request(WRONG_FILE)
        if stored.kind != kind:
            raise bad_request(f"can't use file of type {stored.kind.title()} as {kind.title()}")
        return stored


def image_size(data: bytes) -> tuple[str, int, int]:
    """Return (MIME type, width, height) of a PNG, JPEG, GIF or WebP; anything else is refused as Telegram does."""
    try:
        if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR":
            width, height = struct.unpack(">II", data[16:24])
            return _checked("image/png", width, height)
        if data[:6] in (b"GIF87a", b"GIF89a"):
            width, height = struct.unpack("<HH", data[6:10])
            return _checked("image/gif", width, height)
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            return _checked("image/webp", *_webp_size(data))
        if data[:2] == b"\xff\xd8":
            return _checked("image/jpeg", *_jpeg_size(data))
    except (struct.error, IndexError, ValueError):
        pass
    raise bad_request("IMAGE_PROCESS_FAILED")


def _checked(mime: str, width: int, height: int) -> tuple[str, int, int]:
    if width <= 0 or height <= 0:
        raise ValueError("an image has no area")
    return mime, width, height


def _jpeg_size(data: bytes) -> tuple[int, int]:
    """Width and height from the first start-of-frame marker of a JPEG."""
    position = 2
    while position + 4 <= len(data):
        if data[position] != 0xFF:
            raise ValueError("not a JPEG marker")
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            position += 2
            continue
        (length,) = struct.unpack(">H", data[position + 2 : position + 4])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[position + 5 : position + 9])
            return width, height
        position += 2 + length
    raise ValueError("no frame in the JPEG")


def _webp_size(data: bytes) -> tuple[int, int]:
    chunk = data[12:16]
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    raise ValueError("unknown WebP chunk")
