"""What the stand-in remembers about calls (ApiCall) and the failures it was told to fake.

Recording is an append of one small object per call, so it stays on even in the
benchmark; rendering to text happens only when a test asks (describe / timeouts).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from bot.localapi.errors import ApiError


@dataclass(slots=True)
class ApiCall:
    method: str  # canonical Bot API spelling, e.g. "sendMessage", whatever case the bot used
    params: dict[str, Any]  # decoded (JSON fields parsed, ints and bools converted)
    ok: bool
    result: Any = None
    error_code: int | None = None
    description: str | None = None
    time: float = 0.0  # time.monotonic() when the request arrived
    injected: bool = False  # failed on purpose via fail_next(), not because of the bot

    def describe(self, width: int = 160) -> str:
        shown = {k: v for k, v in self.params.items() if k != "reply_markup"}
        outcome = "ok" if self.ok else f"{self.error_code} {self.description}"
        line = f"{self.method}({', '.join(f'{k}={v!r}' for k, v in shown.items())}) -> {outcome}"
        return line if len(line) <= width else line[: width - 3] + "..."


class InjectedFault(ApiError):
    """A failure planned by a test with fail_next(), not caused by the bot."""


_DEFAULT_DESCRIPTIONS = {
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


@dataclass(slots=True)
class Fault:
    status: int
    retry_after: int | None
    description: str | None
    remaining: int

    def error(self) -> InjectedFault:
        if self.status == 429:
            retry_after = self.retry_after or 1
            return InjectedFault(
                429,
                self.description or f"Too Many Requests: retry after {retry_after}",
                {"retry_after": retry_after},
            )
        description = self.description or _DEFAULT_DESCRIPTIONS.get(self.status) or HTTPStatus(self.status).phrase
        return InjectedFault(self.status, description)


@dataclass(slots=True)
class RandomFaults:
    """A share of calls failing at random, as Telegram's 429s and 5xx come: seeded, so a run can be repeated."""

    rate: float  # 0.03: about 3 calls in 100 fail
    statuses: tuple[int, ...]  # each failure's status, drawn evenly; a 429 asks to retry after retry_after
    rng: random.Random
    retry_after: int = 1
    spared: frozenset[str] = frozenset()  # methods (lower-cased) that never fail

    def draw(self, method: str) -> Fault | None:
        if self.rng.random() >= self.rate or method.lower() in self.spared:
            return None
        return Fault(self.rng.choice(self.statuses), self.retry_after, None, 1)


class Faults:
    """Planned failures per method (lower-cased; "*" matches every method), and failures at random."""

    def __init__(self) -> None:
        self._plans: dict[str, deque[Fault]] = {}
        self._random: RandomFaults | None = None

    def at_random(
        self,
        rate: float,
        statuses: Iterable[int] = (429, 500, 502, 503, 504),
        *,
        seed: int = 0,
        retry_after: int = 1,
        spare: Iterable[str] = (),
    ) -> None:
        """Fail a ``rate`` share of the calls not planned otherwise, each with one of ``statuses``."""
        if not 0 <= rate <= 1:
            raise ValueError("rate is a share of calls, from 0 to 1")
        codes = tuple(statuses)
        for status in codes:
            HTTPStatus(status)
        self._random = RandomFaults(
            rate, codes, random.Random(seed), retry_after, frozenset(method.lower() for method in spare)
        )

    def stop_at_random(self) -> None:
        self._random = None

    def add(self, method: str, status: int, retry_after: int | None, count: int, description: str | None) -> None:
        if count < 1:
            raise ValueError("count must be at least 1")
        HTTPStatus(status)  # refuse nonsense codes early
        self._plans.setdefault(method.lower(), deque()).append(Fault(status, retry_after, description, count))

    def take(self, method: str) -> InjectedFault | None:
        if not self._plans:  # the hot path: nothing planned
            if self._random is None:
                return None
            fault = self._random.draw(method)
            return fault.error() if fault is not None else None
        for key in (method.lower(), "*"):
            plan = self._plans.get(key)
            if plan:
                fault = plan[0]
                fault.remaining -= 1
                if fault.remaining == 0:
                    plan.popleft()
                    if not plan:
                        del self._plans[key]
                return fault.error()
        fault = self._random.draw(method) if self._random is not None else None
        return fault.error() if fault is not None else None

    def clear(self) -> None:
        self._plans.clear()
        self._random = None
