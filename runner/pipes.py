"""Pipes out of the sandbox, read without blocking and within a byte budget.

Every pipe the runner reads (a job's stdout, stderr, "done" and report
pipes, and the zygote's stderr) is a ``Stream``, and all of them are read
by ``Stream.pump()``: from an event-loop reader while the writers run, and
once more after they are killed, for what is left in the pipe.  A stream
reads at most its budget and one chunk more, however much is written.
"""

from __future__ import annotations

import os

CHUNK = 65536  # bytes per read(): a pipe's default capacity
READS_PER_PUMP = 4  # reads per call, so a writer that never stops cannot starve the loop


class Budget:
    """Bytes that one or more streams may still keep (a job's stdout and stderr share one)."""

    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left


class Stream:
    """The read end of a pipe (made non-blocking) and what was kept from it."""

    __slots__ = ("budget", "data", "eof", "fd", "overflow", "taken")

    def __init__(self, fd: int, budget: Budget) -> None:
        os.set_blocking(fd, False)
        self.fd = fd
        self.budget = budget
        self.data = bytearray()
        self.overflow = False  # more arrived than the budget allowed; the rest was dropped
        self.eof = False  # every writer is gone
        self.taken = 0  # bytes read from the pipe, kept or dropped

    def pump(self, reads: int | None = READS_PER_PUMP) -> None:
        """Take what the pipe holds now: ``reads`` chunks at most (None: until it is empty).

        Nothing once the stream has overflowed: reading a flood only to drop it would burn the runner's
        CPU, outside every job's cgroup, for as long as the writer keeps writing.  The writer blocks on
        the full pipe instead, and whoever reads the stream ends it (a job that overflows is killed).
        """
        while not self.eof and not self.overflow and (reads is None or reads > 0):
            if reads is not None:
                reads -= 1
            try:
                chunk = os.read(self.fd, CHUNK)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                self.eof = True
                return
            self.taken += len(chunk)
            keep = min(len(chunk), self.budget.left)
            self.data += chunk[:keep]
            self.budget.left -= keep
            if keep < len(chunk):
                self.overflow = True

    def close(self) -> None:
        os.close(self.fd)
