"""The bot's HTTP transport (bot.transport) against a real HTTP server on loopback."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from telegram import InlineKeyboardButton, InlineKeyboardMarkup, InputFile
from telegram.error import NetworkError, TimedOut
from telegram.request import RequestData
from telegram.request._requestparameter import RequestParameter

from bot.transport import AiohttpRequest


def request_data(**params: Any) -> RequestData:
    return RequestData([RequestParameter.from_input(name, value) for name, value in params.items()])


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    """An echo of the Bot API: answers every call with what it received, and records it."""
    seen: list[dict[str, Any]] = []

    async def echo(request: web.Request) -> web.Response:
        if request.path.endswith("/slow"):
            await asyncio.sleep(1)
        got: dict[str, Any] = {"content_type": request.content_type, "user_agent": request.headers.get("User-Agent")}
        if request.content_type == "application/json":
            got["params"] = await request.json()
        else:
            form = await request.post()
            got["params"] = {
                name: (value.filename, value.file.read().decode()) if isinstance(value, web.FileField) else value
                for name, value in form.items()
            }
        seen.append(got)
        return web.json_response({"ok": True, "result": got["params"]})

    app = web.Application()
    app.router.add_post("/{tail:.*}", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/botTOKEN", seen
    finally:
        await runner.cleanup()


async def test_parameters_go_as_one_json_body_with_buttons_as_objects(server):
    url, seen = server
    buttons = InlineKeyboardMarkup([[InlineKeyboardButton("Next ▶", callback_data="s:l1:2")]])
    async with AiohttpRequest() as request:
        result = await request.post(
            f"{url}/editMessageText", request_data(chat_id=7, text="<b>ß</b>", reply_markup=buttons)
        )
    assert seen[0]["content_type"] == "application/json"
    assert "python-telegram-bot" in seen[0]["user_agent"]
    assert result == {
        "chat_id": 7,
        "text": "<b>ß</b>",
        "reply_markup": {"inline_keyboard": [[{"text": "Next ▶", "callback_data": "s:l1:2"}]]},
    }


async def test_files_go_as_multipart_with_the_other_parameters(server):
    url, seen = server
    photo = InputFile(b"PNG bytes", filename="card.png")
    async with AiohttpRequest() as request:
        await request.post(f"{url}/sendPhoto", request_data(chat_id=7, photo=photo, caption="Done"))
    assert seen[0]["content_type"] == "multipart/form-data"
    params = seen[0]["params"]
    assert params["chat_id"] == "7" and params["caption"] == "Done"
    (attached,) = [value for value in params.values() if isinstance(value, tuple)]
    assert attached == ("card.png", "PNG bytes")


async def test_an_answer_later_than_the_read_timeout_is_a_timeout(server):
    url, _ = server
    async with AiohttpRequest(read_timeout=0.2) as request:
        with pytest.raises(TimedOut):
            await request.post(f"{url}/slow", request_data(chat_id=7))
        # A call may ask for longer than the default, as getUpdates does.
        with pytest.raises(TimedOut):
            await request.post(f"{url}/slow", request_data(chat_id=7), read_timeout=0.3)


async def test_a_server_that_refuses_the_connection_is_a_network_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: the connection is refused
        async with AiohttpRequest() as request:
            with pytest.raises(NetworkError, match="aiohttp"):
                await request.post(f"http://127.0.0.1:{port}/botTOKEN/getMe")


async def test_a_call_before_initialize_or_after_shutdown_is_refused_and_shutdown_twice_is_fine(server):
    url, _ = server
    request = AiohttpRequest()
    with pytest.raises(NetworkError, match="not initialized"):  # PTB wraps what a transport raises
        await request.post(f"{url}/getMe")
    await request.initialize()
    assert await request.post(f"{url}/getMe") == {}
    await request.shutdown()
    await request.shutdown()
    with pytest.raises(NetworkError, match="not initialized"):  # PTB wraps what a transport raises
        await request.post(f"{url}/getMe")


def test_each_timeout_is_ptbs_and_the_whole_call_is_bounded_by_their_sum():
    request = AiohttpRequest(read_timeout=15, write_timeout=5, connect_timeout=5, pool_timeout=1)
    timeout = request._timeout(request.DEFAULT_NONE, request.DEFAULT_NONE, request.DEFAULT_NONE, 2.0)
    assert (timeout.sock_read, timeout.sock_connect, timeout.connect, timeout.total) == (15, 5, 7.0, 27.0)
    unbounded = request._timeout(None, request.DEFAULT_NONE, request.DEFAULT_NONE, request.DEFAULT_NONE)
    assert unbounded.sock_read is None and unbounded.total is None
    assert json.dumps(request.read_timeout) == "15"
