"""The wire format between the bot's client and the runner service.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8
JSON, an object that always carries ``"v": VERSION``.  Requests:

    {"v": 1, "id": 7, "op": "run", "code": "...", "limits": {...} | null,
     "checks": {...} | null}
    {"v": 1, "id": 8, "op": "ping"}
    {"v": 1, "id": 9, "op": "info"}

Responses carry the same id:

    {"v": 1, "id": 7, "ok": true, "result": {...RunResult.to_dict()...}}
    {"v": 1, "id": 7, "ok": false, "error": {"type": "RunnerBusy", "message": "..."}}

A frame of another version is answered with a ProtocolError response (when it
has an id) and never acted on.  Several requests may be in flight on one
connection; responses may come back in any order.
"""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

from .errors import ProtocolError

VERSION = 1
MAX_FRAME = 8 * 1024 * 1024  # bytes; a result holds at most a few MiB of output
_HEADER = struct.Struct(">I")


def encode(msg: dict[str, Any]) -> bytes:
    body = json.dumps({"v": VERSION, **msg}, separators=(",", ":"), ensure_ascii=False).encode()
    if len(body) > MAX_FRAME:
        raise ProtocolError(f"frame of {len(body)} bytes exceeds {MAX_FRAME}")
    return _HEADER.pack(len(body)) + body


def decode(body: bytes) -> dict[str, Any]:
    try:
        msg = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProtocolError(f"frame is not UTF-8 JSON: {e}") from None
    if not isinstance(msg, dict):
        raise ProtocolError("frame is not a JSON object")
    if msg.get("v") != VERSION:
        raise ProtocolError(f"unsupported protocol version {msg.get('v')!r}; this runner speaks v{VERSION}")
    return msg


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next message, or None at a clean end of stream."""
    try:
        header = await reader.readexactly(_HEADER.size)
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            return None
        raise ProtocolError("stream ended inside a frame header") from None
    (n,) = _HEADER.unpack(header)
    if n > MAX_FRAME:
        raise ProtocolError(f"frame of {n} bytes exceeds {MAX_FRAME}")
    try:
        body = await reader.readexactly(n)
    except asyncio.IncompleteReadError:
        raise ProtocolError("stream ended inside a frame") from None
    return decode(body)


async def write_frame(writer: asyncio.StreamWriter, msg: dict[str, Any]) -> None:
    writer.write(encode(msg))
    await writer.drain()
