"""Webhook mode (bot/webhook.py) through the real HTTP stack: the stand-in delivers as Telegram does, the bot stores
each update in its inbox before answering, checks the secret, and takes a redelivery as a no-op."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import socket
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest
import telegram
from aiohttp import web

from bot import webhook_deploy
from bot.config import Config
from bot.http_server import HttpServer
from bot.localapi import SECRET_HEADER, WebhookTiming
from bot.storage.db import Database
from bot.updates import Inbox
from bot.webhook import WebhookReceiver
from tests.botprocess import BotProcess, bot_env, wait_until
from tests.conftest import course_content, running
from tests.journey import answer_quiz, read_slides, send_and_wait, tap_and_wait_edit

COURSE = course_content().english
SECRET = "webhook-test_SECRET"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def webhook_config(config: Config) -> Config:
    return replace(config, webhook_listen=("127.0.0.1", free_port()), webhook_secret=SECRET)


def inbox(db_path: Path) -> dict[int, str]:
    with sqlite3.connect(db_path) as db:
        return dict(db.execute("SELECT update_id, state FROM inbox"))


@pytest.fixture
async def hooked(standin, config) -> AsyncIterator[tuple[Config, object]]:
    """The bot in webhook mode, the stand-in pointed at it by the deploy step."""
    config = webhook_config(config)
    async with running(config) as bot:
        host, port = config.webhook_listen
        lines = await webhook_deploy.set_webhook(
            config, f"http://{host}:{port}/", secret=SECRET, max_connections=10, drop_pending_updates=False
        )
        assert lines[0] == f"webhook set: Telegram sends @coursebot_test_bot's updates to http://{host}:{port}/"
        yield config, bot


async def test_a_learner_takes_a_lesson_by_webhook(hooked, standin):
    config, _ = hooked
    ada = standin.learner(user_id=1501)
    menu = await send_and_wait(ada, "/start")
    assert COURSE.title in menu["text"]
    lesson = COURSE.lessons[0]
    last = await read_slides(ada, await tap_and_wait_edit(ada, menu, "Start the course"), lesson)
    result = await answer_quiz(ada, last, lesson)
    assert f"{len(lesson.quiz)} of {len(lesson.quiz)} correct" in result["text"]
    assert standin.errors() == []
    assert standin.calls_to("getUpdates") == []  # no polling at all
    await standin.settle()
    assert standin.webhook is not None and standin.webhook.stats.dropped == []
    assert set(inbox(config.db_path).values()) == {"handled"}


async def _post(config: Config, body: bytes, headers: dict[str, str]) -> int:
    host, port = config.webhook_listen
    async with aiohttp.ClientSession() as session:
        async with session.post(f"http://{host}:{port}/", data=body, headers=headers) as response:
            return response.status


def _update(update_id: int, text: str) -> bytes:
    user = {"id": 1502, "is_bot": False, "first_name": "Eve", "language_code": "en"}
    message = {"message_id": 1, "date": 1, "chat": {"id": 1502, "type": "private"}, "from": user, "text": text}
    return json.dumps({"update_id": update_id, "message": message}).encode()


async def test_the_secret_is_checked_and_nothing_is_stored_without_it(hooked, standin):
    config, _ = hooked
    standin.learner(user_id=1502, first_name="Eve")
    body = _update(900_000_001, "/start")
    assert await _post(config, body, {"Content-Type": "application/json"}) == 401
    assert await _post(config, body, {SECRET_HEADER: "wrong"}) == 403
    assert 900_000_001 not in inbox(config.db_path)
    assert standin.calls_to("sendMessage") == []


async def test_bad_json_is_400_and_one_line_and_a_redelivery_is_a_no_op(hooked, standin, caplog):
    config, _ = hooked
    await send_and_wait(standin.learner(user_id=1502, first_name="Eve"), "hello")  # the chat is known now
    await standin.settle()
    standin.clear_calls()
    with caplog.at_level(logging.WARNING, logger="bot.webhook"):
        assert await _post(config, b"{not json", {SECRET_HEADER: SECRET}) == 400
    (line,) = [r for r in caplog.records if r.name == "bot.webhook"]
    assert "not a Telegram update" in line.getMessage() and "\n" not in line.getMessage()
    assert line.exc_info is None

    body = _update(900_000_002, "/start")
    assert await _post(config, body, {SECRET_HEADER: SECRET}) == 200
    await standin.wait_call("sendMessage")
    assert await _post(config, body, {SECRET_HEADER: SECRET}) == 200  # Telegram sending it again
    await standin.settle()
    assert len(standin.calls_to("sendMessage")) == 1
    assert inbox(config.db_path)[900_000_002] == "handled"


async def test_healthz_answers_in_webhook_mode(standin, config):
    monitoring = ("127.0.0.1", free_port())
    config = replace(webhook_config(config), monitoring=monitoring)
    async with running(config):
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://{monitoring[0]}:{monitoring[1]}/healthz") as response:
                body = await response.json()
    assert response.status == 200, body


class KillingProxy:
    """Between the stand-in and the bot: forwards each POST; once armed, kills the bot after it answered 200 and
    fails the request, so the stand-in never learns the update arrived."""

    def __init__(self, target: str, bot: BotProcess):
        self.target = target
        self.bot = bot
        self.armed = False
        self.seen: list[int] = []
        self.server: HttpServer | None = None

    async def handle(self, request: web.BaseRequest) -> web.Response:
        body = await request.read()
        self.seen.append(json.loads(body)["update_id"])
        try:
            async with aiohttp.ClientSession() as session:
                async with session.post(self.target, data=body, headers=dict(request.headers)) as answer:
                    status = answer.status
        except aiohttp.ClientError:
            return web.Response(status=502)
        if self.armed and status == 200:
            self.armed = False
            process = self.bot.process
            assert process is not None
            process.send_signal(signal.SIGKILL)
            await process.wait()
            return web.Response(status=502)
        return web.Response(status=status)


async def test_a_bot_killed_after_storing_an_update_gets_it_again_and_handles_it_once(standin, tmp_path):
    standin.webhook_timing = WebhookTiming(scale=0.05)  # retries after 0, 0.1, 0.2, 0.4 ... s
    port = free_port()
    db_path = tmp_path / "data" / "coursebot.sqlite3"
    env = bot_env(standin, db_path, COURSEBOT_WEBHOOK_LISTEN=f"127.0.0.1:{port}", COURSEBOT_WEBHOOK_SECRET=SECRET)
    bot = BotProcess(env, tmp_path / "bot.log")
    proxy = KillingProxy(f"http://127.0.0.1:{port}/", bot)
    proxy.server = await HttpServer.start(proxy.handle, "127.0.0.1", 0)
    says = b"receiving updates by webhook"
    try:
        async with bot:
            await bot.wait_polling(says=says)
            await standin.set_webhook({"url": f"http://127.0.0.1:{proxy.server.port}/", "secret_token": SECRET})
            ada = standin.learner(user_id=1503)
            # The reply waits 3 s (a 429), so the kill finds the update stored and not yet handled.
            standin.fail_next("sendMessage", 429, retry_after=3)
            proxy.armed = True
            update_id = await ada.send("/start")
            await wait_until(lambda: bot.process.returncode is not None, "the proxy killed the bot")
            assert inbox(db_path) == {update_id: "pending"}
            await bot.start()
            await bot.wait_polling(says=says)
            await ada.wait_message(lambda m: COURSE.title in m.get("text", ""), timeout=30)
            await wait_until(lambda: proxy.seen.count(update_id) >= 2, "the stand-in sent the update again", 30)
            await standin.settle(quiet=0.5, timeout=30)
            menus = [m for m in ada.messages if m["from"]["is_bot"] and COURSE.title in m.get("text", "")]
            assert len(menus) == 1, bot.log()
            assert inbox(db_path) == {update_id: "handled"}
            assert standin.updates.pending_count == 0
    finally:
        await proxy.server.stop()


async def test_the_web_chat_works_in_webhook_mode(tmp_path):
    from bot.webchat.local import local_course
    from tests.conftest import web_chat_config
    from tests.test_webchat import open_page

    config = replace(web_chat_config(tmp_path), webhook_listen=("127.0.0.1", free_port()), webhook_secret=SECRET)
    async with local_course(config) as course:
        assert course.api.webhook is not None
        assert course.api.webhook.url == f"http://127.0.0.1:{config.webhook_listen[1]}/"
        async with open_page(course) as page:
            await page.hello()
            menu = await page.send("/start", "Welcome!")
            await page.tap(menu, "Start the course", "1 /")
        assert course.api.webhook.stats.delivered >= 2  # the /start and the tap, by webhook


async def test_the_heartbeat_asks_telegram_when_it_is_silent_and_says_a_missing_webhook_once(standin, config, caplog):

    db = await Database.open(config.db_path)
    bot = telegram.Bot(standin.token, base_url=standin.base_url)
    receiver = WebhookReceiver(
        bot, Inbox(db), asyncio.Queue(), host="127.0.0.1", port=0, secret=SECRET, silence=lambda: None,
        heartbeat_s=0.05,
    )  # fmt: skip
    try:
        with caplog.at_level(logging.WARNING, logger="bot.webhook"):
            await receiver.start()
            await standin.wait_call("getWebhookInfo")
            await standin.wait_call("getWebhookInfo")
        said = [r.getMessage() for r in caplog.records if r.name == "bot.webhook"]
        assert said == ["webhook: no webhook is set, so no update arrives; run coursebot webhook set URL once"]
    finally:
        await receiver.stop()
        await db.close()


async def test_the_inbox_keeps_an_update_as_telegram_sent_it_and_hands_the_application_the_same_update(standin, config):
    db = await Database.open(config.db_path)
    bot = telegram.Bot(standin.token, base_url=standin.base_url)
    queue: asyncio.Queue[object] = asyncio.Queue()
    receiver = WebhookReceiver(
        bot, Inbox(db), queue, host="127.0.0.1", port=0, secret=SECRET, silence=lambda: None, heartbeat_s=3600
    )
    # Spaced out, with a field this PTB does not know, and in UTF-8 with a byte order mark, which json.loads takes
    # as bytes but refuses in a str: stored as sent, the mark left out.
    sent = json.dumps(json.loads(_update(900_000_003, "Grüße ✓")) | {"future_field": [1, 2]}, indent=1)
    try:
        await receiver.start()
        host, port = "127.0.0.1", receiver.port
        async with aiohttp.ClientSession() as session:
            for body in (sent.encode(), b"\xef\xbb\xbf" + sent.replace("900000003", "900000004").encode()):
                async with session.post(f"http://{host}:{port}/", data=body, headers={SECRET_HEADER: SECRET}) as r:
                    assert r.status == 200
        with sqlite3.connect(config.db_path) as conn:
            stored = dict(conn.execute("SELECT update_id, payload FROM inbox"))
        assert stored == {900_000_003: sent, 900_000_004: sent.replace("900000003", "900000004")}
        handed = [queue.get_nowait(), queue.get_nowait()]
        assert [u.update_id for u in handed] == [900_000_003, 900_000_004]
        assert handed[0].message.text == "Grüße ✓" and handed[0].api_kwargs == {"future_field": [1, 2]}
        # What a replay reads back is the same update.
        assert telegram.Update.de_json(json.loads(stored[900_000_003]), bot) == handed[0]
    finally:
        await receiver.stop()
        await db.close()
