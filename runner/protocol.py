"""The wire format between the bot's client and the runner service.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8
JSON, an object that always carries ``"v": VERSION``.  Requests:

    {"v": 1, "id": 7, "op": "run", "code": "...", "limits": {...} | null,
     "checks": {...} | null}            (+ "trace": true: the result carries its
                                         stage marks, see trace.py)
    {"v": 1, "id": 8, "op": "ping"}
    {"v": 1, "id": 9, "op": "info"}

Responses carry the same id:

    {"v": 1, "id": 7, "ok": true, "result": {...RunResult.to_dict()...}}
    {"v": 1, "id": 7, "ok": false, "error": {"type": "RunnerBusy", "message": "..."}}

A frame of another version is answered with a ProtocolError response (when it
has an id) and never acted on.  Several requests may be in flight on one
connection; responses may come back in any order.  The client opens one
connection per request (runner.client), so a runner that restarts, or a
balancer in front of several, sees jobs one by one.

Frames come from peers that may be hostile (any local user can reach a TCP
listener): a frame is strict JSON (no NaN or Infinity), at most ``MAX_FRAME``
bytes and ``MAX_DEPTH`` levels of arrays and objects deep.  Anything else is a
ProtocolError, never an exception the server does not expect.
"""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

from .errors import ProtocolError

VERSION = 1
MAX_FRAME = 8 * 1024 * 1024  # bytes; a result holds at most a few MiB of output
MAX_DEPTH = 32  # levels of arrays and objects in a frame; a graded request needs about a dozen
_HEADER = struct.Struct(">I")


def encode(msg: dict[str, Any]) -> bytes:
    body = json.dumps({"v": VERSION, **msg}, separators=(",", ":"), ensure_ascii=False).encode()
    if len(body) > MAX_FRAME:
        raise ProtocolError(f"frame of {len(body)} bytes exceeds {MAX_FRAME}")
    return _HEADER.pack(len(body)) + body


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse(body: bytes) -> dict[str, Any]:
    """A frame's body as a JSON object within the bounds above, whatever its version; else ProtocolError."""
    try:
        msg = json.loads(body.decode("utf-8"), parse_constant=_refuse_constant)
    except RecursionError:  # the decoder's own guard, far deeper than MAX_DEPTH
        raise ProtocolError(f"frame is nested deeper than {MAX_DEPTH} levels") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise ProtocolError(f"frame is not UTF-8 JSON: {e}") from None
    if not isinstance(msg, dict):
        raise ProtocolError("frame is not a JSON object")
    if _deeper_than(msg, MAX_DEPTH):
        raise ProtocolError(f"frame is nested deeper than {MAX_DEPTH} levels")
    return msg


def check_version(msg: dict[str, Any]) -> dict[str, Any]:
    """``msg`` if it speaks this protocol's version; else ProtocolError."""
    if msg.get("v") != VERSION:
        raise ProtocolError(f"unsupported protocol version; this runner speaks v{VERSION}")
    return msg


def decode(body: bytes) -> dict[str, Any]:
    return check_version(parse(body))


def _deeper_than(value: object, limit: int) -> bool:
    """Whether arrays and objects nest more than ``limit`` levels (iterative: no recursion to exhaust)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


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
