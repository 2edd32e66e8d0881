"""Telegram's flood limits, as the Bot API server enforces them: a 429 with retry_after for a bot that sends too fast.

Telegram documents about 30 messages a second for a whole bot (to different chats) and about one a second in
one chat, allowing short bursts. Each is a token bucket here: ``OVERALL`` refills 30 a second and holds 30;
a chat's refills one a second and holds ``CHAT_BURST``, so a reply of a few messages goes through while a
chat flooded for seconds gets a 429. Only calls that post a new message count: edits, answers to taps and
reads do not (Telegram's own limits for those are far looser). The clock is injected, so a test on virtual
time sees the same limits as a bot on the wall clock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .errors import ApiError

OVERALL_PER_SECOND = 30.0
OVERALL_BURST = 30.0
CHAT_PER_SECOND = 1.0
CHAT_BURST = 20.0

# Methods that post a new message in a chat.
POSTING = frozenset(
    {
        "sendmessage",
        "sendphoto",
        "senddocument",
        "sendpoll",
        "sendsticker",
        "sendvideo",
        "sendanimation",
        "sendaudio",
        "sendvoice",
        "sendlocation",
        "sendcontact",
        "senddice",
        "sendmediagroup",
        "copymessage",
        "forwardmessage",
    }
)


@dataclass
class _Bucket:
    rate: float
    capacity: float
    tokens: float
    at: float

    def take(self, now: float) -> float:
        """Take a token; return 0.0, or the seconds until one is there (nothing is taken then)."""
        self.tokens = min(self.capacity, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


@dataclass
class FloodLimit:
    """The bot-wide and per-chat buckets; ``check`` raises Telegram's 429 for a call over either."""

    clock: Callable[[], float] = time.monotonic
    overall_per_second: float = OVERALL_PER_SECOND
    overall_burst: float = OVERALL_BURST
    chat_per_second: float = CHAT_PER_SECOND
    chat_burst: float = CHAT_BURST
    refused: int = 0  # 429s answered, for tests and benchmarks
    _overall: _Bucket | None = None
    _chats: dict[str, _Bucket] = field(default_factory=dict)

    def check(self, method: str, chat_id: object) -> None:
        """Refuse (429, with retry_after in whole seconds as Telegram gives it) a posting call over a limit."""
        if method.lower() not in POSTING:
            return
        now = self.clock()
        if self._overall is None:
            self._overall = _Bucket(self.overall_per_second, self.overall_burst, self.overall_burst, now)
        chat = self._chats.get(str(chat_id))
        if chat is None:
            chat = self._chats[str(chat_id)] = _Bucket(self.chat_per_second, self.chat_burst, self.chat_burst, now)
        # The chat's bucket first: a call refused for its chat takes nothing from the bot-wide one.
        wait = chat.take(now)
        if not wait:
            wait = self._overall.take(now)
            if wait:
                chat.tokens += 1.0  # given back: the call is refused
        if wait:
            self.refused += 1
            seconds = max(1, math.ceil(wait))
            raise ApiError(429, f"Too Many Requests: retry after {seconds}", {"retry_after": seconds})
