"""What the stand-in remembers about calls (ApiCall) and the failures it was told to fake.

Recording is an append of one small object per call, so it stays on even in the
benchmark; rendering to text happens only when a test asks (describe / timeouts).
"""

from __future__ import annotations

from collections import deque
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


class Faults:
    """Planned failures per method (lower-cased; "*" matches every method)."""

    def __init__(self) -> None:
        self._plans: dict[str, deque[Fault]] = {}

    def add(self, method: str, status: int, retry_after: int | None, count: int, description: str | None) -> None:
        if count < 1:
            raise ValueError("count must be at least 1")
        HTTPStatus(status)  # refuse nonsense codes early
        self._plans.setdefault(method.lower(), deque()).append(Fault(status, retry_after, description, count))

    def take(self, method: str) -> InjectedFault | None:
        if not self._plans:  # the hot path: nothing planned
            return None
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
        return None

    def clear(self) -> None:
        self._plans.clear()
