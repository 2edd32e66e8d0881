"""Send many messages (reminders) under Telegram's bot-wide rate, waiting out a 429 and never bursting.

Telegram allows a bot about 30 messages a second to different chats, for the whole bot, not per process.
The sender takes each message's slot from a ``SendBudget``: slots are ``1 / rate`` apart, so a burst of
10,000 due messages goes out evenly rather than 30 at once then a pause. A 429 answer (``Wait``) holds the
whole budget for its ``retry_after`` and the message is sent again; a 403 (``Blocked``: the learner blocked
the bot) is reported so the caller turns their reminders off, and never retried.

The budget is a seam. ``LocalBudget`` serves one process. Several bot processes (issue 17) share one budget
through the database instead (bot.storage.sending.SharedBudget): a single row holding the next free slot, taken
with one atomic ``UPDATE ... SET next_free = max(next_free, :now) + :interval RETURNING ...`` that computes what
``take_slot`` computes here, and a hold that raises ``next_free`` to the end of a 429's wait. A message that took
its slot before a hold (at another process, say) finds the hold ending after its slot when it wakes, and takes a
new one. The sender only sees the Protocol, and takes its clock and sleep from the caller, so tests run it on
virtual time.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

# Below Telegram's ~30 a second with room for clock jitter between processes sharing a budget.
MESSAGES_PER_SECOND = 28.0
# A message Telegram keeps answering 429 is given up after this many tries (its reminder waits for tomorrow).
MAX_ATTEMPTS = 5
# Sends in flight at once: enough that a slow round trip does not slow the pace, few enough to stay polite.
CONCURRENCY = 8


@dataclass(frozen=True)
class Sent:
    """Telegram took the message."""


@dataclass(frozen=True)
class Wait:
    """Telegram answered 429: send nothing for ``seconds`` (its retry_after), then try again."""

    seconds: float


@dataclass(frozen=True)
class Blocked:
    """Telegram answered 403: the learner blocked the bot (or deleted their account). Never retried."""


@dataclass(frozen=True)
class Failed:
    """Telegram refused the message for another reason (a 400, say); ``reason`` is for the log."""

    reason: str


Delivery = Sent | Wait | Blocked | Failed

T = TypeVar("T")


def take_slot(next_free: float, now: float, interval: float) -> tuple[float, float]:
    """Return the slot a message gets at ``now`` and the next free slot after it (times in seconds)."""
    slot = max(next_free, now)
    return slot, slot + interval


class SendBudget(Protocol):
    """The bot's sending slots, shared by everything that sends in bulk for it."""

    async def reserve(self, now: float) -> float:
        """Take the next free slot at or after ``now``; return when it starts."""
        ...

    async def hold(self, until: float) -> None:
        """Give out no slot before ``until`` (Telegram asked to retry after it)."""
        ...

    async def held_until(self) -> float:
        """Return when the latest hold ends (minus infinity if there was none): a slot taken before a hold that
        ends after it is void."""
        ...


class LocalBudget:
    """A budget for one process: slots ``1 / rate`` apart, kept in memory."""

    def __init__(self, rate: float = MESSAGES_PER_SECOND):
        self.interval = 1.0 / rate
        self._next_free = float("-inf")
        self._held_until = float("-inf")

    async def reserve(self, now: float) -> float:
        """Take the next free slot at or after ``now``; return when it starts."""
        slot, self._next_free = take_slot(self._next_free, now, self.interval)
        return slot

    async def hold(self, until: float) -> None:
        """Give out no slot before ``until``."""
        self._next_free = max(self._next_free, until)
        self._held_until = max(self._held_until, until)

    async def held_until(self) -> float:
        return self._held_until


@dataclass
class DrainReport(Generic[T]):
    """What one drain did: counts for the log and metrics, and the items the caller must act on."""

    sent: int = 0
    retries: int = 0  # 429s waited out
    blocked: list[T] = field(default_factory=list)  # turn their reminders off
    failed: list[tuple[T, str]] = field(default_factory=list)  # given up, with why
    sent_at: list[float] = field(default_factory=list)  # when each send started, for the benchmark


class BulkSender(Generic[T]):
    """Drains messages through ``send`` at the budget's pace, with a few in flight, waiting out 429s."""

    def __init__(
        self,
        send: Callable[[T], Awaitable[Delivery]],
        budget: SendBudget,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
        *,
        max_attempts: int = MAX_ATTEMPTS,
        concurrency: int = CONCURRENCY,
    ):
        self._send = send
        self._budget = budget
        self._clock = clock
        self._sleep = sleep
        self._max_attempts = max_attempts
        self._concurrency = concurrency

    async def drain(self, items: Iterable[T]) -> DrainReport[T]:
        """Send every item once (retrying 429s), in order of slots, and report what happened."""
        report: DrainReport[T] = DrainReport()
        queue: deque[tuple[T, int]] = deque((item, 1) for item in items)
        in_flight: dict[asyncio.Task[Delivery], tuple[T, int]] = {}
        held = False

        async def settle(tasks: Iterable[asyncio.Task[Delivery]]) -> None:
            nonlocal held
            for task in tasks:
                item, attempt = in_flight.pop(task)
                outcome = task.result()
                match outcome:
                    case Sent():
                        report.sent += 1
                    case Blocked():
                        report.blocked.append(item)
                    case Failed(reason):
                        report.failed.append((item, reason))
                    case Wait():
                        held = True  # the budget is held already (_attempt)
                        if attempt < self._max_attempts:
                            report.retries += 1
                            queue.appendleft((item, attempt + 1))
                        else:
                            report.failed.append((item, f"still 429 after {attempt} tries"))

        try:
            while queue or in_flight:
                await settle([task for task in in_flight if task.done()])
                if not queue or len(in_flight) >= self._concurrency:
                    done, _ = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                    await settle(done)
                    continue
                item, attempt = queue.popleft()
                held = False
                slot = await self._budget.reserve(self._clock())
                if slot > self._clock():
                    await self._sleep(slot - self._clock())
                await settle([task for task in in_flight if task.done()])
                if held or await self._budget.held_until() > slot:
                    # A 429 came in while this message waited for its slot (here, or at another process sharing
                    # the budget): its slot is void, take a new one.
                    queue.appendleft((item, attempt))
                    continue
                report.sent_at.append(self._clock())
                in_flight[asyncio.ensure_future(self._attempt(item))] = (item, attempt)
        finally:
            for task in in_flight:
                task.cancel()
        return report

    async def _attempt(self, item: T) -> Delivery:
        """Send ``item``; on a 429, hold the budget at once, not when the drain next looks: a process sharing it may
        be about to wake for a slot it took before, which the hold now voids."""
        outcome = await self._send(item)
        if isinstance(outcome, Wait):
            await self._budget.hold(self._clock() + outcome.seconds)
        return outcome
