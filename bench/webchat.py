"""Web chat benchmark: how long a tap takes to come back to the page, against the same tap without the page.

    .venv/bin/python bench/webchat.py [--taps N]

Prints ONE JSON object. The bot, its built-in Bot API server and the web chat run in this
process (runner off: slides run no code). Two learners turn slides back and forth, one tap
at a time, ``--taps`` each (default 300):

* ``webchat_*``: a page's tap, as the page makes it (JSON over the WebSocket), timed until
  the page receives the edited slide (pushed back over the WebSocket);
* ``direct_*``: the peer: the same tap made straight on the server (``BotApi.tap``), timed
  until the server stores the bot's edit;
* ``overhead_ratio`` = webchat_p50_ms / direct_p50_ms: what the page's own path adds.

Every wait has a timeout; the run stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bot.config import Config  # noqa: E402
from bot.localapi.chats import ChatState  # noqa: E402
from bot.webchat.local import LocalCourse, local_course  # noqa: E402

TIMEOUT = 10.0  # seconds for one tap's answer


def next_button(message: dict[str, Any]) -> str:
    """The callback data of Next, or of Back on the last slide."""
    buttons = [b for row in message["reply_markup"]["inline_keyboard"] for b in row]
    for label in ("Next", "Back"):
        for button in buttons:
            if button["text"].startswith(label) or button["text"].endswith(label):
                return str(button["callback_data"])
    raise LookupError(f"no Next or Back on {message['text'][:60]!r}")


async def page_taps(course: LocalCourse, taps: int) -> list[float]:
    async with aiohttp.ClientSession() as session, session.ws_connect(course.chat.url + "ws") as ws:

        async def pushed(kind: str) -> dict[str, Any]:
            while True:
                message = json.loads(await asyncio.wait_for(ws.receive_str(), TIMEOUT))
                if message["type"] == kind and message["message"]["from"]["is_bot"]:
                    return dict(message["message"])

        await ws.send_json({"type": "hello", "learner": None, "language": "en"})
        await ws.send_json({"type": "send", "text": "/start"})
        welcome = await pushed("message")
        start = welcome["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        await ws.send_json({"type": "tap", "message_id": welcome["message_id"], "data": start})
        slide = await pushed("edited")
        times = []
        for _ in range(taps):
            began = time.perf_counter()
            await ws.send_json({"type": "tap", "message_id": slide["message_id"], "data": next_button(slide)})
            slide = await pushed("edited")
            times.append(time.perf_counter() - began)
        return times


async def direct_taps(course: LocalCourse, taps: int) -> list[float]:
    api = course.api
    user_id = 1
    api.add_user({"id": user_id, "is_bot": False, "first_name": "Peer", "language_code": "en"})
    loop = asyncio.get_running_loop()
    waiting: list[asyncio.Future[dict[str, Any]]] = []

    def observe(chat: ChatState, kind: str, payload: dict[str, Any]) -> None:
        if kind in ("sent", "edited") and payload["from"]["is_bot"] and waiting and not waiting[0].done():
            waiting.pop(0).set_result(payload)

    api.observers[user_id] = [observe]

    async def bot_message(act: Any) -> dict[str, Any]:
        future = loop.create_future()
        waiting[:] = [future]
        act()
        return await asyncio.wait_for(future, TIMEOUT)

    welcome = await bot_message(lambda: api.write_text(user_id, "/start"))
    start = welcome["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
    slide = await bot_message(lambda: api.tap(user_id, user_id, welcome["message_id"], start))
    times = []
    for _ in range(taps):
        began = time.perf_counter()
        slide = await bot_message(
            lambda shown=slide: api.tap(user_id, user_id, shown["message_id"], next_button(shown))
        )
        times.append(time.perf_counter() - began)
    return times


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 2),
    }


async def main(taps: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        config = Config(
            token="",
            db_path=Path(folder) / "coursebot.sqlite3",
            lessons_dir=ROOT / "lessons",
            locales_dir=ROOT / "locales",
            runner="off",
            web_port=0,
            watch=False,
            log_level="WARNING",
        )
        async with local_course(config) as course:
            direct = summary(await direct_taps(course, taps))
            webchat = summary(await page_taps(course, taps))
    return {
        "taps": taps,
        **{f"webchat_{k}": v for k, v in webchat.items()},
        **{f"direct_{k}": v for k, v in direct.items()},
        "overhead_ratio": round(webchat["p50_ms"] / direct["p50_ms"], 2),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--taps", type=int, default=300)
    print(json.dumps(asyncio.run(main(parser.parse_args().taps))))
