"""Fault points: named places between the steps of an update where a test makes the bot fail as a crash would.

The bot passes each point it reaches to the hook; there is none in production, so a point costs one comparison.
A test's hook raises (asyncio.CancelledError leaves the update pending, as kill -9 does) to prove that a replay
of the update stores exactly what one clean run stores (tests/test_replay.py).
"""

from __future__ import annotations

from collections.abc import Callable


class FaultPoints:
    """The hook the bot calls at each fault point; None in production."""

    def __init__(self) -> None:
        self.hook: Callable[[str], None] | None = None

    def reached(self, point: str) -> None:
        """Note that the update reached ``point`` (``feature:step``, e.g. ``drill:stored``)."""
        if self.hook is not None:
            self.hook(point)
