import asyncio
import struct

import pytest

from runner import protocol
from runner.errors import ProtocolError


def test_encode_decode():
    frame = protocol.encode({"id": 1, "op": "ping"})
    (n,) = struct.unpack(">I", frame[:4])
    assert n == len(frame) - 4
    assert protocol.decode(frame[4:]) == {"v": 1, "id": 1, "op": "ping"}


@pytest.mark.parametrize("body", [b'{"v": 2, "op": "ping"}', b'{"op": "ping"}', b"[1]", b"\xff", b"{"])
def test_bad_frames(body):
    with pytest.raises(ProtocolError):
        protocol.decode(body)


def test_version_error_message_is_clear():
    # It names the version this runner speaks, never the one sent (an error echoes nothing of a request).
    with pytest.raises(ProtocolError, match="unsupported protocol version; this runner speaks v1"):
        protocol.decode(b'{"v": 2}')


async def test_read_frame_stream():
    r = asyncio.StreamReader()
    r.feed_data(protocol.encode({"a": 1}) + protocol.encode({"b": 2}))
    r.feed_eof()
    assert (await protocol.read_frame(r))["a"] == 1
    assert (await protocol.read_frame(r))["b"] == 2
    assert await protocol.read_frame(r) is None


async def test_read_frame_truncated_and_oversized():
    r = asyncio.StreamReader()
    r.feed_data(b"\x00\x00")
    r.feed_eof()
    with pytest.raises(ProtocolError):
        await protocol.read_frame(r)
    r = asyncio.StreamReader()
    r.feed_data(struct.pack(">I", protocol.MAX_FRAME + 1))
    with pytest.raises(ProtocolError):
        await protocol.read_frame(r)


def test_the_largest_result_a_job_can_give_fits_in_one_frame():
    """Output at the ceiling, of the characters JSON writes longest (a control byte becomes \\u0000)."""
    from runner.limits import MAXIMUM
    from runner.result import RunResult

    half = MAXIMUM.output_bytes // 2
    worst = RunResult("output_limit", "\x00" * half, "\x01" * (MAXIMUM.output_bytes - half), None, 9, 1.0, True)
    frame = protocol.encode({"id": 1, "ok": True, "result": worst.to_dict()})
    assert len(frame) <= protocol.MAX_FRAME + 4
