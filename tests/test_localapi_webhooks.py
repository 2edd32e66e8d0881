"""The built-in Bot API server delivers webhooks as Telegram does (bot/localapi/webhooks.py), over real HTTP.

A receiver on loopback plays the bot's webhook: it records each request and answers as a test tells it to (hold
the request, fail it, ask for a Retry-After). Durations are compressed through the server's WebhookTiming.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest
import telegram
from aiohttp import web
from telegram.error import BadRequest, Conflict

from bot.http_server import HttpServer
from bot.localapi import SECRET_HEADER, WebhookTiming
from tests.standin.server import BotApiStandin

Answer = Callable[[dict], Awaitable[web.Response]]


@dataclass
class Delivery:
    update: dict
    at: float
    secret: str | None
    peer: int


@dataclass
class Receiver:
    """A webhook endpoint: records deliveries; ``answer`` decides each response (default 200)."""

    server: HttpServer | None = None
    deliveries: list[Delivery] = field(default_factory=list)
    answer: Answer | None = None
    in_flight: int = 0
    in_flight_max: int = 0
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.port}/hook"

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        update = json.loads(await request.read())
        peer = request.transport.get_extra_info("peername")[1] if request.transport else 0
        self.deliveries.append(Delivery(update, time.monotonic(), request.headers.get(SECRET_HEADER), peer))
        self.arrived.set()
        self.in_flight += 1
        self.in_flight_max = max(self.in_flight_max, self.in_flight)
        try:
            return await self.answer(update) if self.answer else web.Response(text="ok")
        finally:
            self.in_flight -= 1

    def ids(self) -> list[int]:
        return [d.update["update_id"] for d in self.deliveries]

    async def wait(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the webhook got {self.ids()}")
            self.arrived.clear()
            try:
                await asyncio.wait_for(self.arrived.wait(), 0.05)
            except TimeoutError:
                pass


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    receiver = Receiver()
    receiver.server = await HttpServer.start(receiver.handle, "127.0.0.1", 0)
    yield receiver
    await receiver.server.stop()


@pytest.fixture
def bot(standin: BotApiStandin) -> telegram.Bot:
    return telegram.Bot(standin.token, base_url=standin.base_url)


def _held(receiver: Receiver, hold: Callable[[dict], bool]) -> asyncio.Event:
    """Make the receiver hold every update ``hold`` picks until the returned event is set."""
    release = asyncio.Event()

    async def answer(update: dict) -> web.Response:
        if hold(update):
            await release.wait()
        return web.Response(text="ok")

    receiver.answer = answer
    return release


def _text(update: dict) -> str:
    return (update.get("message") or {}).get("text", "")


async def test_set_info_delete_and_get_updates_refused_while_set(standin, bot, receiver):
    with pytest.raises(BadRequest, match=r"(?i)https url must be provided"):
        await bot.set_webhook("http://example.com/hook")
    with pytest.raises(BadRequest, match=r"(?i)secret token contains unallowed characters"):
        await bot.set_webhook(receiver.url, secret_token="no spaces")
    with pytest.raises(BadRequest, match=r"(?i)secret token is too long"):
        await bot.set_webhook(receiver.url, secret_token="a" * 257)
    ada = standin.learner(1, "Ada")
    await ada.send("kept")
    assert await bot.set_webhook(
        receiver.url, secret_token="s3cret_-", max_connections=500, allowed_updates=["message", "callback_query"]
    )
    info = await bot.get_webhook_info()
    assert (info.url, info.max_connections, set(info.allowed_updates)) == (
        receiver.url,
        100,  # clamped to Telegram's maximum, as it does
        {"message", "callback_query"},
    )
    with pytest.raises(Conflict, match="can't use getUpdates method while webhook is active"):
        await bot.get_updates()
    await receiver.wait(lambda: receiver.ids() != [])
    assert _text(receiver.deliveries[0].update) == "kept"  # pending updates go to the new webhook
    assert receiver.deliveries[0].secret == "s3cret_-"
    await standin.settle()
    assert (await bot.get_webhook_info()).pending_update_count == 0

    release = _held(receiver, lambda update: True)
    await ada.send("pending")
    await receiver.wait(lambda: len(receiver.deliveries) == 2)
    assert await bot.delete_webhook()
    release.set()
    # Unanswered when the webhook went: still pending, and getUpdates gets it.
    (update,) = await bot.get_updates()
    assert update.message.text == "pending"


async def test_only_each_queues_head_is_in_flight_and_queues_go_by_kind(standin, bot, receiver):
    standin.callback_query_ttl = 60
    release = _held(receiver, lambda update: _text(update) == "a1")
    ada, bob = standin.learner(1, "Ada"), standin.learner(2, "Bob")
    await bot.set_webhook(receiver.url)
    await ada.send("a1")
    await receiver.wait(lambda: len(receiver.deliveries) == 1)
    await ada.send("a2")
    await bob.send("b1")
    menu = await bot.send_message(1, "menu", reply_markup=_keyboard())
    ada.tap_nowait(standin.chats[1].messages[menu.message_id], callback_data="go")
    # Bob's chat and Ada's button presses are queues of their own: they pass while Ada's chat waits for a1.
    await receiver.wait(lambda: len(receiver.deliveries) == 3)
    await asyncio.sleep(0.2)
    kinds = [(_text(d.update) or "callback") for d in receiver.deliveries]
    assert sorted(kinds) == ["a1", "b1", "callback"]
    release.set()
    await receiver.wait(lambda: len(receiver.deliveries) == 4)
    assert _text(receiver.deliveries[3].update) == "a2"


def _keyboard() -> telegram.InlineKeyboardMarkup:
    return telegram.InlineKeyboardMarkup([[telegram.InlineKeyboardButton("Go", callback_data="go")]])


async def test_poll_answers_queue_per_poll(standin, bot, receiver):
    release = _held(receiver, lambda update: update.get("poll_answer", {}).get("user", {}).get("id") == 1)
    ada, bob = standin.learner(1, "Ada"), standin.learner(2, "Bob")
    await ada.send("/start")
    await bob.send("/start")
    first = await bot.send_poll(1, "2+2?", ["3", "4"], is_anonymous=False)
    second = await bot.send_poll(2, "1+1?", ["2", "3"], is_anonymous=False)
    await bot.set_webhook(receiver.url, allowed_updates=["poll_answer"], drop_pending_updates=True)
    await ada.answer_poll(standin.chats[1].messages[first.message_id], 1)
    await receiver.wait(lambda: len(receiver.deliveries) == 1)
    await ada.answer_poll(standin.chats[1].messages[first.message_id], 0)  # a changed vote: the same poll
    await bob.answer_poll(standin.chats[2].messages[second.message_id], 0)
    await receiver.wait(lambda: len(receiver.deliveries) == 2)
    await asyncio.sleep(0.2)
    assert [d.update["poll_answer"]["poll_id"] for d in receiver.deliveries] == [first.poll.id, second.poll.id]
    release.set()
    await receiver.wait(lambda: len(receiver.deliveries) == 3)
    assert receiver.deliveries[2].update["poll_answer"]["option_ids"] == [0]


async def test_failures_back_off_and_retry_after_is_honoured(standin, bot, receiver):
    scale = 0.05
    standin.webhook_timing = WebhookTiming(scale=scale)
    answers = iter([500, 500, 500, 429, 200])

    async def answer(update: dict) -> web.Response:
        status = next(answers)
        headers = {"Retry-After": "10"} if status == 429 else {}
        return web.Response(status=status, headers=headers)

    receiver.answer = answer
    await bot.set_webhook(receiver.url)
    await standin.learner(1, "Ada").send("hello")
    await receiver.wait(lambda: len(receiver.deliveries) == 5, timeout=10)
    times = [d.at for d in receiver.deliveries]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # Telegram: again at once, then 2 s, then 4 s (doubling from 1 s), then Retry-After's 10 s.
    assert gaps[0] < 2 * scale
    assert 2 * scale <= gaps[1] < 4 * scale
    assert 4 * scale <= gaps[2] < 8 * scale
    assert 10 * scale <= gaps[3] < 14 * scale
    info = await bot.get_webhook_info()
    assert info.last_error_message == "Wrong response from the webhook: 429 Too Many Requests"
    assert info.pending_update_count == 0


async def test_back_off_is_capped_between_60_and_120_seconds(standin):
    # The cap itself, read from the delivery's arithmetic: 1 s doubling reaches 64 s, then 60-120 s.
    from bot.localapi.webhooks import _Loaded

    delivery = await _failing_delivery(standin)
    loaded = _Loaded({"update_id": 1, "message": {}}, ("own", 1), time.monotonic() + 10**6, 0.0, 1.0)
    waits = []
    for _ in range(12):
        before = time.monotonic()
        delivery._failed(loaded, "down", 0)
        waits.append(loaded.wakeup_at - before)
    assert waits[0] == pytest.approx(0, abs=0.01)
    assert [round(w) for w in waits[1:6]] == [2, 4, 8, 16, 32]
    assert 60 <= waits[6] <= 64.01  # min(the cap, 64)
    assert all(60 <= w <= 120.01 for w in waits[7:])
    await delivery.stop()


async def _failing_delivery(standin):
    from bot.localapi.webhooks import WebhookDelivery

    delivery = WebhookDelivery(
        standin.updates,
        "http://127.0.0.1:9/",
        secret="",
        max_connections=1,
        timing=WebhookTiming(),
        touch=lambda: None,
    )
    return delivery


async def test_a_button_press_expires_after_150_s_and_a_message_does_not(standin, bot, receiver):
    scale = 0.01  # 150 s -> 1.5 s; 24 h -> 864 s
    standin.webhook_timing = WebhookTiming(scale=scale)
    standin.callback_query_ttl = 60

    async def answer(update: dict) -> web.Response:
        return web.Response(status=503)

    receiver.answer = answer
    ada = standin.learner(1, "Ada")
    await ada.send("/start")
    menu = await bot.send_message(1, "menu", reply_markup=_keyboard())
    await bot.set_webhook(receiver.url, drop_pending_updates=True)
    query_id = ada.tap_nowait(standin.chats[1].messages[menu.message_id], callback_data="go")
    await ada.send("still here")
    started = time.monotonic()
    await receiver.wait(lambda: bool(standin.webhook and standin.webhook.stats.dropped), timeout=10)
    assert 1.2 < time.monotonic() - started < 3.0
    (dropped,) = standin.webhook.stats.dropped
    assert standin.updates.history[dropped]["callback_query"]["id"] == query_id.query_id
    # The message is still being retried.
    assert (await bot.get_webhook_info()).pending_update_count == 1

    def message_tries() -> int:
        return len([d for d in receiver.deliveries if "message" in d.update])

    tries = message_tries()
    await receiver.wait(lambda: message_tries() > tries, timeout=3)  # the cap: 60-120 s, scaled


async def test_no_more_than_max_connections(standin, bot, receiver):
    release = _held(receiver, lambda update: True)
    for user_id in range(1, 11):
        await standin.learner(user_id, f"L{user_id}").send("hi")
    await bot.set_webhook(receiver.url, max_connections=3)
    await receiver.wait(lambda: len(receiver.deliveries) == 3)
    await asyncio.sleep(0.3)
    assert receiver.in_flight == 3
    assert len(receiver.deliveries) == 3
    release.set()
    await receiver.wait(lambda: len(receiver.deliveries) == 10)
    await standin.settle()
    assert receiver.in_flight_max == 3
    assert len({d.peer for d in receiver.deliveries}) <= 3  # kept-alive connections, no more than three


async def test_a_delivery_without_the_secret_never_happens(standin, bot, receiver):
    await bot.set_webhook(receiver.url, secret_token="right")
    await standin.learner(1, "Ada").send("hi")
    await receiver.wait(lambda: len(receiver.deliveries) == 1)
    assert receiver.deliveries[0].secret == "right"
    await bot.set_webhook(receiver.url)  # no secret now: no header
    await standin.learner(1, "Ada").send("again")
    await receiver.wait(lambda: len(receiver.deliveries) == 2)
    assert receiver.deliveries[1].secret is None


async def test_an_answer_that_takes_longer_than_60_s_counts_as_a_failure_and_the_update_comes_again(
    standin, bot, receiver
):
    scale = 0.01  # Telegram waits 60 s for an answer: 0.6 s here
    standin.webhook_timing = WebhookTiming(scale=scale)
    release = _held(receiver, lambda update: len(receiver.deliveries) == 1)
    await bot.set_webhook(receiver.url)
    update_id = await standin.learner(1, "Ada").send("slow")
    await receiver.wait(lambda: len(receiver.deliveries) == 2, timeout=5)
    first, second = receiver.deliveries
    assert first.update["update_id"] == second.update["update_id"] == update_id
    # Timed from the send, not the arrival: the first delivery's arrival here lags its send (by 50 ms and more on a
    # loaded machine), so the gap between the two arrivals is only bounded below by most of the wait.
    assert 60 * scale * 0.75 <= second.at - first.at < 60 * scale + 0.5
    release.set()
    await standin.settle()
    assert standin.updates.pending_count == 0
