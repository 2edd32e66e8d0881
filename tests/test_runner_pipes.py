"""Reading pipes within a byte budget: what is kept, dropped, and when a stream ends."""

import os

from runner import pipes


def stream(budget):
    r, w = os.pipe()
    return pipes.Stream(r, budget), w


def test_keeps_what_arrives_and_sees_the_end():
    s, w = stream(pipes.Budget(100))
    os.write(w, b"hello ")
    s.pump()
    os.write(w, b"world")
    os.close(w)
    s.pump()
    assert (bytes(s.data), s.overflow, s.eof) == (b"hello world", False, True)
    s.close()


def test_nothing_yet_is_not_the_end():
    s, w = stream(pipes.Budget(100))
    s.pump()
    assert (bytes(s.data), s.eof) == (b"", False)
    os.close(w)
    s.close()


def test_overflow_keeps_the_budget_and_stops_reading():
    """Past its budget a stream reads nothing more: a flood costs the runner no CPU, the writer blocks."""
    s, w = stream(pipes.Budget(5))
    os.write(w, b"0123456789")
    s.pump()
    assert (bytes(s.data), s.overflow, s.taken) == (b"01234", True, 10)
    os.write(w, b"more")
    s.pump()
    s.pump(None)
    assert (bytes(s.data), s.taken) == (b"01234", 10)
    assert os.read(s.fd, 10) == b"more"  # left in the pipe, never read by the stream
    os.close(w)
    s.close()


def test_streams_sharing_a_budget_share_it():
    shared = pipes.Budget(8)
    out, wo = stream(shared)
    err, we = stream(shared)
    os.write(wo, b"abcde")
    os.write(we, b"fghij")
    out.pump()
    err.pump()
    assert bytes(out.data) == b"abcde" and bytes(err.data) == b"fgh"
    assert not out.overflow and err.overflow and shared.left == 0
    for fd in (wo, we):
        os.close(fd)
    out.close()
    err.close()


def test_a_flood_is_read_a_few_chunks_per_call():
    s, w = stream(pipes.Budget(1 << 30))
    os.set_blocking(w, False)
    written = 0
    try:
        while True:
            written += os.write(w, b"x" * pipes.CHUNK)
    except BlockingIOError:
        pass
    s.pump(reads=1)
    assert 0 < len(s.data) <= pipes.CHUNK
    s.pump(None)  # until it is empty
    assert len(s.data) == written and not s.eof
    os.close(w)
    s.close()
