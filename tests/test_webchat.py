"""The web chat's server side, spoken to as the page speaks to it: JSON over a WebSocket.

The real bot runs against the built-in Bot API server (no runner: these tests are about
the chat, not code). The browser test (test_webchat_browser.py) covers what the page shows.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import telegram
from telegram.constants import ChatAction

from bot.course.phone_width import CODE_LINE_MAX
from bot.webchat.learners import FIRST_LEARNER_ID
from bot.webchat.local import LocalCourse, local_course
from bot.webchat.server import WebChat
from tests.conftest import web_chat_config
from tests.images import png

Json = dict[str, Any]


class PageClient:
    """What the page's JavaScript does, without a browser: hello, send, tap, vote; and what it is told."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse):
        self.ws = ws
        self.ready: Json = {}

    async def hello(self, learner: int | None = None, language: str = "en") -> Json:
        await self.ws.send_json({"type": "hello", "learner": learner, "language": language})
        self.ready = await self.next(lambda m: m["type"] == "ready")
        return self.ready

    @property
    def learner_id(self) -> int:
        return int(self.ready["learner"]["id"])

    async def say(self, message: Json) -> None:
        await self.ws.send_json(message)

    async def next(self, predicate: Callable[[Json], bool], timeout: float = 5.0) -> Json:
        """The next pushed message matching predicate (others are skipped)."""

        async def read() -> Json:
            while True:
                message = json.loads(await self.ws.receive_str())
                if predicate(message):
                    return message

        return await asyncio.wait_for(read(), timeout)

    async def bot_says(self, text: str, timeout: float = 5.0) -> Json:
        """The next new or edited bot message whose text contains `text`."""
        pushed = await self.next(
            lambda m: (
                m["type"] in ("message", "edited")
                and m["message"]["from"]["is_bot"]
                and text in m["message"].get("text", "")
            ),
            timeout,
        )
        message: Json = pushed["message"]
        return message

    async def send(self, text: str, expect: str) -> Json:
        await self.say({"type": "send", "text": text})
        return await self.bot_says(expect)

    async def tap(self, message: Json, label: str, expect: str) -> Json:
        data = next(
            b["callback_data"] for row in message["reply_markup"]["inline_keyboard"] for b in row if label in b["text"]
        )
        await self.say({"type": "tap", "message_id": message["message_id"], "data": data})
        return await self.bot_says(expect)


@asynccontextmanager
async def web_course(tmp_path: Path) -> AsyncIterator[LocalCourse]:
    async with local_course(web_chat_config(tmp_path)) as course:
        yield course


@asynccontextmanager
async def open_page(course: LocalCourse) -> AsyncIterator[PageClient]:
    async with aiohttp.ClientSession() as session, session.ws_connect(course.chat.url + "ws") as ws:
        yield PageClient(ws)


@pytest.fixture
async def course(tmp_path: Path) -> AsyncIterator[LocalCourse]:
    async with web_course(tmp_path) as running:
        yield running


async def test_the_page_and_its_files_are_served_on_loopback_and_may_not_be_framed(course: LocalCourse):
    assert course.chat.url.startswith("http://127.0.0.1:")
    async with aiohttp.ClientSession() as session:
        async with session.get(course.chat.url) as page:
            assert page.status == 200
            assert page.content_type == "text/html"
            assert '<script src="/static/chat.js"' in await page.text()
            assert page.headers["X-Frame-Options"] == "DENY"
            assert "default-src 'self'" in page.headers["Content-Security-Policy"]
        async with session.get(course.chat.url + "static/chat.js") as script:
            assert script.status == 200
            assert script.content_type == "text/javascript"
        async with session.get(course.chat.url + "static/..%2fserver.py") as escape:
            assert escape.status == 404


async def test_a_new_page_gets_a_new_learner_and_a_remembered_learner_gets_their_chat_back(course: LocalCourse):
    async with open_page(course) as first:
        ready = await first.hello()
        assert ready["learner"]["id"] == FIRST_LEARNER_ID
        assert ready["learner"]["first_name"] == "Learner 1"
        assert [c["command"] for c in ready["commands"]][:2] == ["start", "lessons"]
        assert ready["ui"]["menu"] == "Menu"
        await first.send("/start", "Welcome!")
    async with open_page(course) as again:
        ready = await again.hello(learner=FIRST_LEARNER_ID)
        assert ready["learner"]["id"] == FIRST_LEARNER_ID
        texts = [view["message"].get("text", "") for view in ready["history"]]
        assert texts[0] == "/start"
        assert texts[1].startswith("Welcome!")
    async with open_page(course) as stranger:
        ready = await stranger.hello(learner=12345)  # not a web learner: a new one is made
        assert ready["learner"]["id"] == FIRST_LEARNER_ID + 1
        assert ready["history"] == []


async def test_the_app_language_reaches_the_bot_as_telegram_sends_it_with_its_command_menu(course: LocalCourse):
    async with open_page(course) as page:
        await page.hello(language="ru-ru")
        assert page.ready["language"] == "ru-ru"
        assert page.ready["ui"]["menu"] == "Меню"
        await page.send("/start", "Привет!")
        await page.say({"type": "language", "language": "ar"})
        ready = await page.next(lambda m: m["type"] == "ready")
        assert ready["rtl"] is True
        assert ready["ui"]["menu"] == "القائمة"
        assert ready["commands"] == course.api.commands_for(page.learner_id, "ar")
        assert ready["commands"] != course.api.commands_for(page.learner_id, "en")
        await page.send("/help", "/start")
        assert course.api.users[page.learner_id]["language_code"] == "ar"
        bot_side = [c for c in course.api.updates.history.values() if "message" in c]
        assert bot_side[-1]["message"]["from"]["language_code"] == "ar"


async def test_taps_edit_in_place_and_the_callback_answer_reaches_the_page(course: LocalCourse):
    async with open_page(course) as page:
        await page.hello()
        welcome = await page.send("/start", "Welcome!")
        slide = await page.tap(welcome, "Start the course", "1 / 13")
        pushed_before = slide["message_id"]
        await page.say(
            {
                "type": "tap",
                "message_id": slide["message_id"],
                "data": slide["reply_markup"]["inline_keyboard"][0][0]["callback_data"],
            }
        )
        edited = await page.next(lambda m: m["type"] == "edited")
        assert edited["message"]["message_id"] == pushed_before
        assert "2 / 13" in edited["message"]["text"]
        answered = await page.next(lambda m: m["type"] == "answered")
        assert answered["alert"] is False


async def test_a_quiz_vote_shows_the_learner_their_choice(course: LocalCourse):
    async with open_page(course) as page:
        await page.hello()
        welcome = await page.send("/start", "Welcome!")
        slide = await page.tap(welcome, "Start the course", "1 / 13")
        for n in range(2, 14):
            slide = await page.tap(slide, "Next", f"{n} / 13")
        await page.tap(slide, "Quick Check", "Quick Check")
        poll = await page.next(lambda m: m["type"] == "message" and "poll" in m["message"])
        assert poll["chosen"] == []
        await page.say({"type": "vote", "message_id": poll["message"]["message_id"], "options": [1]})
        voted = await page.next(lambda m: m["type"] == "edited" and "poll" in m["message"])
        assert voted["chosen"] == [1]
        assert voted["message"]["poll"]["total_voter_count"] == 1


async def test_what_the_page_may_not_do_is_refused_with_one_line_and_changes_nothing(course: LocalCourse):
    async with open_page(course) as page:
        await page.say({"type": "send", "text": "/start"})
        assert (await page.next(lambda m: True))["text"] == "say hello first"
        await page.ws.send_str("{not json")
        assert (await page.next(lambda m: True))["text"] == "not JSON"
        await page.hello()
        welcome = await page.send("/start", "Welcome!")
        queued = len(course.api.updates.history)
        refusals = [
            ({"type": "tap", "message_id": welcome["message_id"], "data": "x:forged"}, "no such button"),
            ({"type": "tap", "message_id": 999, "data": "x"}, "no such message"),
            ({"type": "vote", "message_id": welcome["message_id"], "options": [0]}, "no poll"),
            ({"type": "send", "text": "   "}, "Write something first."),
            ({"type": "send", "text": "x" * 4097}, "4096"),
            ({"type": "language", "language": "<script>"}, "IETF"),
            ({"type": "switch", "learner": 1}, "no such learner"),
            ({"type": "explode"}, "unknown message type"),
        ]
        for message, reason in refusals:
            await page.say(message)
            error = await page.next(lambda m: m["type"] == "error")
            assert reason in error["text"], (message, error)
        assert len(course.api.updates.history) == queued


async def test_a_new_learner_starts_from_scratch_and_the_first_keeps_their_place(course: LocalCourse):
    async with open_page(course) as page:
        await page.hello()
        ada = page.learner_id
        welcome = await page.send("/start", "Welcome!")
        slide = await page.tap(welcome, "Start the course", "1 / 13")
        await page.tap(slide, "Next", "2 / 13")
        await page.say({"type": "new_learner"})
        ready = await page.next(lambda m: m["type"] == "ready")
        assert ready["learner"]["id"] == ada + 1
        assert ready["history"] == []
        assert [learner["id"] for learner in ready["learners"]] == [ada, ada + 1]
        fresh = await page.send("/start", "Welcome!")
        assert "in progress" not in fresh["text"]
        await page.say({"type": "switch", "learner": ada})
        ready = await page.next(lambda m: m["type"] == "ready")
        assert ready["learner"]["id"] == ada
        back = await page.send("/start", "Welcome!")
        assert "slide 2 of 13" in back["text"]


async def test_progress_and_the_chat_survive_a_restart(tmp_path: Path):
    async with web_course(tmp_path) as course, open_page(course) as page:
        await page.hello()
        welcome = await page.send("/start", "Welcome!")
        slide = await page.tap(welcome, "Start the course", "1 / 13")
        await page.tap(slide, "Next", "2 / 13")
        learner = page.learner_id
    async with web_course(tmp_path) as course, open_page(course) as page:
        ready = await page.hello(learner=learner)
        history = [view["message"] for view in ready["history"]]
        assert "2 / 13" in history[-1]["text"]  # the slide as the learner left it
        # The old slide's buttons still work: the bot sees a new update id, not a redelivery.
        await page.tap(history[-1], "Next", "3 / 13")
        back = await page.send("/start", "Welcome!")
        assert "slide 3 of 13" in back["text"]


async def test_the_banner_reaches_open_pages_and_pages_opened_later(course: LocalCourse):
    lines = ["lessons/en/01-requires-grad.yaml:12: slide 'x' has no text"]
    async with open_page(course) as page:
        await page.hello()
        course.chat.show_banner(lines)
        banner = await page.next(lambda m: m["type"] == "banner")
        assert banner["lines"] == lines
        assert "refused" in banner["title"]
        async with open_page(course) as later:
            await later.hello()
            assert (await later.next(lambda m: m["type"] == "banner"))["lines"] == lines
        course.chat.clear_banner()
        assert (await page.next(lambda m: m["type"] == "banner"))["lines"] == []


async def test_a_page_from_another_site_may_not_open_the_chat(course: LocalCourse):
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(course.chat.url + "ws", origin="http://evil.example")
        assert refused.value.status == 403
        own = course.chat.url.rstrip("/")
        async with session.ws_connect(course.chat.url + "ws", origin=own) as ws:
            await ws.send_json({"type": "hello", "learner": None, "language": "en"})
            assert json.loads(await ws.receive_str())["type"] == "ready"


async def test_a_site_whose_name_is_rebound_to_this_machine_is_refused_page_and_socket_alike(course: LocalCourse):
    """DNS rebinding: evil.example re-pointed at 127.0.0.1 sends Host: evil.example and its own Origin."""
    port = course.chat.port
    async with aiohttp.ClientSession() as session:
        for path in ("", "static/chat.js", "photo/AgAC1"):
            async with session.get(course.chat.url + path, headers={"Host": f"evil.example:{port}"}) as page:
                assert page.status == 403, path
                assert "COURSEBOT_WEB_HOST" in await page.text()
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(
                course.chat.url + "ws", headers={"Host": f"evil.example:{port}"}, origin=f"http://evil.example:{port}"
            )
        assert refused.value.status == 403
        # Any loopback name, with any port, is this machine.
        for host in (f"localhost:{port}", f"[::1]:{port}", "127.0.0.1", "LOCALHOST"):
            async with session.get(course.chat.url, headers={"Host": host}) as page:
                assert page.status == 200, host
        async with session.ws_connect(
            course.chat.url + "ws", headers={"Host": f"localhost:{port}"}, origin=f"http://localhost:{port}"
        ) as ws:
            await ws.send_json({"type": "hello", "learner": None, "language": "en"})
            assert json.loads(await ws.receive_str())["type"] == "ready"


async def test_the_configured_host_is_accepted_as_well_as_loopback(course: LocalCourse):
    served = WebChat(course.api, course.bot.library, host="coursebot.lan", port=8080)
    assert served.host_allowed("coursebot.lan:8080") and served.host_allowed("CourseBot.LAN")
    assert served.host_allowed("localhost:9999") and served.host_allowed("[::1]")
    assert not served.host_allowed("evil.example:8080")
    assert not served.host_allowed("coursebot.lan.evil.example")
    assert not served.host_allowed("[::1:8080")  # malformed
    assert not WebChat(course.api, course.bot.library).host_allowed("coursebot.lan")


async def test_the_bots_chat_action_shows_on_the_page_and_is_not_kept(tmp_path: Path):
    async with web_course(tmp_path) as course:
        async with open_page(course) as page:
            ready = await page.hello()
            assert ready["started"] is False  # a new learner sees START, as in Telegram
            assert ready["code_columns"] == CODE_LINE_MAX
            await page.send("/start", "Welcome!")
            async with telegram_bot(course) as bot:
                await bot.send_chat_action(page.learner_id, ChatAction.TYPING)
            assert await page.next(lambda m: m["type"] == "action") == {"type": "action", "action": "typing"}
            learner = page.learner_id
    async with web_course(tmp_path) as course, open_page(course) as page:
        ready = await page.hello(learner=learner)
        assert ready["started"] is True
        assert [view["message"].get("text", "")[:8] for view in ready["history"]] == ["/start", "Welcome!"]


async def test_the_browsers_time_zone_is_kept_once_per_learner_and_only_a_real_one(tmp_path: Path):
    async with web_course(tmp_path) as course:
        async with open_page(course) as page:
            await page.say({"type": "hello", "learner": None, "language": "en", "time_zone": "Europe/Berlin"})
            learner = (await page.next(lambda m: m["type"] == "ready"))["learner"]["id"]
            assert course.api.time_zone(learner) == "Europe/Berlin"
            await page.say({"type": "hello", "learner": learner, "language": "en", "time_zone": "Asia/Tokyo"})
            await page.next(lambda m: m["type"] == "ready")
            assert course.api.time_zone(learner) == "Europe/Berlin"  # the first report stands
            for zone in ("Mars/Olympus_Mons", "../../etc/passwd", 42, "x" * 100):
                await page.say({"type": "new_learner", "time_zone": zone})
                other = (await page.next(lambda m: m["type"] == "ready"))["learner"]["id"]
                assert course.api.time_zone(other) is None, zone
            await page.say({"type": "new_learner", "time_zone": "America/Sao_Paulo"})
            other = (await page.next(lambda m: m["type"] == "ready"))["learner"]["id"]
            assert course.api.time_zone(other) == "America/Sao_Paulo"
    async with web_course(tmp_path) as course:
        assert course.api.time_zone(learner) == "Europe/Berlin"
        assert course.api.time_zone(other) == "America/Sao_Paulo"
        assert "time_zone" not in course.api.users[learner]  # Telegram's User has no such field


async def test_a_photo_the_bot_sends_reaches_the_page_and_its_bytes_are_served(course: LocalCourse):
    image = png(120, 80)
    async with open_page(course) as page:
        await page.hello()
        await page.send("/start", "Welcome!")
        async with telegram_bot(course) as bot:
            await bot.send_photo(page.learner_id, image, caption="Your card")
        pushed = await page.next(lambda m: m["type"] == "message" and "photo" in m["message"])
        size = pushed["message"]["photo"][-1]
        assert (size["width"], size["height"]) == (120, 80) and pushed["message"]["caption"] == "Your card"
    async with aiohttp.ClientSession() as session:
        async with session.get(course.chat.url + "photo/" + size["file_id"]) as photo:
            assert photo.status == 200 and photo.content_type == "image/png"
            assert await photo.read() == image
        async with session.get(course.chat.url + "photo/AgAC999_nothing") as missing:
            assert missing.status == 404


@asynccontextmanager
async def telegram_bot(course: LocalCourse) -> AsyncIterator[telegram.Bot]:
    """PTB's Bot with the course bot's token: what the course bot itself sends, sent by the test."""
    async with telegram.Bot(course.api.token, base_url=course.api.base_url) as bot:
        yield bot
