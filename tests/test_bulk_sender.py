"""The bulk sender: at most ~30 messages a second for the whole bot, evenly, 429s waited out, 403s reported.

Everything runs on virtual time: the sender's sleep parks on a heap that the test's driver advances once every
task is waiting, so 10,000 messages "take" six minutes and the test a fraction of a second.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from bot.retention.bulk_sender import (
    MESSAGES_PER_SECOND,
    Blocked,
    BulkSender,
    Delivery,
    Failed,
    LocalBudget,
    Sent,
    Wait,
    take_slot,
)

T = TypeVar("T")
TELEGRAM_PER_SECOND = 30


class VirtualTime:
    """A clock that moves only when every task is asleep, to the earliest wake-up."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + max(seconds, 0.0), next(self._order), future))
        await future

    async def run(self, *work: Awaitable[T]) -> list[T]:
        tasks = [asyncio.ensure_future(w) for w in work]
        while not all(t.done() for t in tasks):
            for _ in range(20):  # let every ready task run until it waits (fake sends finish in a step or two)
                await asyncio.sleep(0)
            if self._sleepers:
                wake, _, future = heapq.heappop(self._sleepers)
                self.now = max(self.now, wake)
                future.set_result(None)
        return [t.result() for t in tasks]


class FakeTelegram:
    """Answers sends as scripted, and records when each message actually arrived."""

    def __init__(self, time: VirtualTime, script: Callable[[int, int], Delivery] | None = None):
        self.time = time
        self.script = script or (lambda item, attempt: Sent())
        self.arrived: list[tuple[float, int]] = []
        self.attempts: dict[int, int] = {}

    async def send(self, item: int) -> Delivery:
        await asyncio.sleep(0)  # a round trip, in a step of the loop
        self.attempts[item] = self.attempts.get(item, 0) + 1
        outcome = self.script(item, self.attempts[item])
        if isinstance(outcome, Sent):
            self.arrived.append((self.time.now, item))
        return outcome


def busiest_second(times: list[float]) -> int:
    """Return the most sends in any one-second window."""
    times = sorted(times)
    busiest, start = 0, 0
    for end, moment in enumerate(times):
        while moment - times[start] >= 1.0:
            start += 1
        busiest = max(busiest, end - start + 1)
    return busiest


def sender(time: VirtualTime, telegram: FakeTelegram, budget: LocalBudget | None = None) -> BulkSender[int]:
    return BulkSender(telegram.send, budget or LocalBudget(), time.clock, time.sleep)


async def test_ten_thousand_due_at_once_go_out_evenly_under_telegrams_limit() -> None:
    time = VirtualTime()
    telegram = FakeTelegram(time)
    start = time.now
    [report] = await time.run(sender(time, telegram).drain(range(10_000)))
    assert report.sent == 10_000 and sorted(item for _, item in telegram.arrived) == list(range(10_000))
    times = [t for t, _ in telegram.arrived]
    assert busiest_second(times) <= MESSAGES_PER_SECOND + 1 <= TELEGRAM_PER_SECOND
    gaps = [b - a for a, b in itertools.pairwise(sorted(report.sent_at))]
    assert min(gaps) == pytest.approx(1 / MESSAGES_PER_SECOND)  # evenly: never two at once
    # As close to the limit as it is set to be: 10,000 at 28 a second take 357 s.
    assert time.now - start == pytest.approx(9_999 / MESSAGES_PER_SECOND, rel=0.01)


async def test_a_429_holds_every_send_for_its_retry_after_then_the_message_goes_again() -> None:
    time = VirtualTime()
    telegram = FakeTelegram(time, lambda item, attempt: Wait(3.0) if item == 100 and attempt == 1 else Sent())
    [report] = await time.run(sender(time, telegram).drain(range(300)))
    assert report.sent == 300 and report.retries == 1 and not report.failed
    assert telegram.attempts[100] == 2
    refused_at = report.sent_at[100]  # items go out in order: the 101st send is item 100's first
    later = [t for t in report.sent_at if t > refused_at]
    assert later and later[0] >= refused_at + 3.0
    assert busiest_second([t for t, _ in telegram.arrived]) <= TELEGRAM_PER_SECOND


async def test_a_message_telegram_keeps_refusing_is_given_up_and_the_rest_still_go() -> None:
    time = VirtualTime()
    telegram = FakeTelegram(time, lambda item, attempt: Wait(1.0) if item == 5 else Sent())
    [report] = await time.run(sender(time, telegram).drain(range(20)))
    assert report.sent == 19
    assert report.failed == [(5, "still 429 after 5 tries")]
    assert telegram.attempts[5] == 5 and report.retries == 4


async def test_a_learner_who_blocked_the_bot_is_reported_and_never_retried() -> None:
    time = VirtualTime()

    def script(item: int, attempt: int) -> Delivery:
        return Blocked() if item % 10 == 3 else Failed("Bad Request: chat not found") if item == 7 else Sent()

    telegram = FakeTelegram(time, script)
    [report] = await time.run(sender(time, telegram).drain(range(40)))
    assert report.blocked == [3, 13, 23, 33]
    assert report.failed == [(7, "Bad Request: chat not found")]
    assert report.sent == 35 and all(telegram.attempts[i] == 1 for i in range(40))


async def test_two_senders_sharing_one_budget_stay_under_the_bots_limit_together() -> None:
    time = VirtualTime()
    budget = LocalBudget()
    first, second = FakeTelegram(time), FakeTelegram(time)
    a, b = await time.run(
        sender(time, first, budget).drain(range(1_000)), sender(time, second, budget).drain(range(1_000))
    )
    assert a.sent == b.sent == 1_000
    together = [t for t, _ in first.arrived + second.arrived]
    assert busiest_second(together) <= MESSAGES_PER_SECOND + 1


async def test_a_429_at_one_sender_voids_the_slot_another_sharing_the_budget_took_before_it() -> None:
    time = VirtualTime()
    budget = LocalBudget()  # one budget for both, as replicas share the database's
    first = FakeTelegram(time, lambda item, attempt: Wait(2.0) if item == 5 and attempt == 1 else Sent())
    second = FakeTelegram(time)
    a, b = await time.run(sender(time, first, budget).drain(range(20)), sender(time, second, budget).drain(range(20)))
    assert a.sent == b.sent == 20 and a.retries == 1 and b.retries == 0
    refused_at = a.sent_at[5]  # items go out in order: the sixth send is item 5's first
    # The second sender had taken its next slot before the 429; it finds the hold and waits it out too.
    arrived = sorted(t for t, _ in first.arrived + second.arrived)
    assert [t for t in arrived if refused_at < t < refused_at + 2.0] == []
    assert next(t for t in b.sent_at if t > refused_at) >= refused_at + 2.0


async def test_a_broken_send_raises_and_leaves_nothing_running() -> None:
    time = VirtualTime()
    started: list[asyncio.Task[Delivery]] = []

    async def send(item: int) -> Delivery:
        if item == 3:
            raise ConnectionError("the Bot API is unreachable")
        await asyncio.sleep(0)
        return Sent()

    def tracked(item: int) -> Awaitable[Delivery]:
        task = asyncio.ensure_future(send(item))
        started.append(task)
        return task

    with pytest.raises(ConnectionError):
        await time.run(BulkSender(tracked, LocalBudget(), time.clock, time.sleep).drain(range(10)))
    await asyncio.sleep(0)
    assert all(task.done() for task in started)


def test_a_slot_is_never_before_now_nor_before_the_last_one_plus_the_interval() -> None:
    assert take_slot(float("-inf"), 5.0, 0.5) == (5.0, 5.5)
    assert take_slot(7.0, 5.0, 0.5) == (7.0, 7.5)
    assert take_slot(4.0, 5.0, 0.5) == (5.0, 5.5)
