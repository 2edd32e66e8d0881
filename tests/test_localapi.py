"""The built-in Bot API server's own parts: what it keeps across a restart, the command menu an app shows, photos.

Telegram's rules themselves are tested through the stand-in (test_standin.py), which is this server.
"""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
import telegram
from telegram.error import BadRequest

from bot.errors import StorageError
from bot.localapi import BotApiServer, StateStore
from tests.images import jpeg_header, png

TOKEN = "42:LOCAL-TEST"


def _server(path: Path) -> BotApiServer:
    return BotApiServer(TOKEN, "local_bot", store=StateStore(path))


def _bot(api: BotApiServer) -> telegram.Bot:
    """PTB's Bot against the server, downloading files from it as the course bot does."""
    return telegram.Bot(TOKEN, base_url=api.base_url, base_file_url=f"{api.api_base_url}/file/bot")


async def test_chats_polls_and_update_ids_come_back_after_a_restart(tmp_path: Path):
    path = tmp_path / "history.sqlite3"
    async with _server(path) as api:
        api.add_user({"id": 7, "is_bot": False, "first_name": "Ada", "language_code": "en"})
        first = api.write_text(7, "/start")
        api.send_message({"chat_id": 7, "text": "<b>Hi</b>", "parse_mode": "HTML"})
        sent = api.send_poll(
            {"chat_id": 7, "question": "2+2?", "options": ["3", "4"], "type": "quiz", "correct_option_id": 1}
        )
        api.answer_poll(7, 7, sent["message_id"], [1])
        api.delete_message({"chat_id": 7, "message_id": 2})
        api.set_language(7, "ar")
        last = api.write_text(7, "/help")
    async with _server(path) as api:
        chat = api.chats[7]
        assert chat.known
        assert sorted(chat.messages) == [1, 3, 4]  # the deleted one stays deleted
        assert chat.messages[1]["text"] == "/start"
        assert [m["message_id"] for m in chat.bot_messages()] == [3]
        poll = api.polls[sent["poll"]["id"]]
        assert poll.votes == {7: [1]}
        assert chat.messages[3]["poll"]["total_voter_count"] == 1
        assert api.users[7]["language_code"] == "ar"
        # New ids never repeat old ones: the bot would drop a reused update id as a redelivery.
        assert api.write_text(7, "/start") > last > first
        assert chat.messages[5]["text"] == "/start"
        again = api.send_poll({"chat_id": 7, "question": "1+1?", "options": ["2", "3"]})
        assert again["poll"]["id"] != sent["poll"]["id"]


async def test_without_a_store_nothing_is_written(tmp_path: Path):
    async with BotApiServer(TOKEN, "local_bot") as api:
        api.add_user({"id": 7, "is_bot": False, "first_name": "Ada"})
        api.write_text(7, "/start")
    assert list(tmp_path.iterdir()) == []


async def test_the_command_menu_is_the_narrowest_scope_in_the_apps_language_else_the_default(tmp_path: Path):
    async with BotApiServer(TOKEN, "local_bot") as api:
        api.add_user({"id": 7, "is_bot": False, "first_name": "Ada"})
        assert api.commands_for(7, "en") == []
        api.set_my_commands({"commands": [{"command": "start", "description": "Start"}]})
        api.set_my_commands({"commands": [{"command": "start", "description": "Начать"}], "language_code": "ru"})
        assert api.commands_for(7, "ru-RU") == [{"command": "start", "description": "Начать"}]
        assert api.commands_for(7, "de") == [{"command": "start", "description": "Start"}]
        assert api.commands_for(7, None) == [{"command": "start", "description": "Start"}]
        api.set_my_commands(
            {"commands": [{"command": "help", "description": "Help"}], "scope": {"type": "chat", "chat_id": 7}}
        )
        assert api.commands_for(7, "ru") == [{"command": "help", "description": "Help"}]


@pytest.mark.parametrize("content", [b"this is not a database, " * 100, b""])
async def test_a_history_file_that_is_no_database_is_one_clear_error(tmp_path: Path, content: bytes):
    path = tmp_path / "history.sqlite3"
    path.write_bytes(content or b"SQLite format 3\x00" + b"\x00" * 84)  # empty: a header with nothing behind it
    with pytest.raises(StorageError, match="web chat's history"):
        async with _server(path):
            pass


async def test_a_history_in_a_folder_that_cannot_be_made_is_one_clear_error(tmp_path: Path):
    (tmp_path / "file").write_text("in the way")
    with pytest.raises(StorageError, match="cannot open the web chat's history"):
        async with _server(tmp_path / "file" / "history.sqlite3"):
            pass


async def test_a_photo_is_kept_as_uploaded_reused_by_file_id_and_downloaded_by_its_getfile_path(tmp_path: Path):
    image = png(64, 48)
    path = tmp_path / "history.sqlite3"
    async with _server(path) as api, aiohttp.ClientSession() as http, _bot(api) as bot:
        api.add_user({"id": 7, "is_bot": False, "first_name": "Ada"})
        api.write_text(7, "/start")
        sent = await bot.send_photo(7, image, caption="<b>Well done</b>, Ada", parse_mode="HTML")
        (size,) = sent.photo
        assert (size.width, size.height, size.file_size) == (64, 48, len(image))
        assert sent.caption == "Well done, Ada" and sent.caption_entities[0].type == "bold"
        again = await bot.send_photo(7, size.file_id)
        assert again.photo[-1].file_unique_id == size.file_unique_id
        file = await bot.get_file(size.file_id)
        assert file.file_size == len(image)
        assert bytes(await file.download_as_bytearray()) == image  # PTB downloads what getFile names
        path_only = file.file_path.rsplit("/", 2)[-2:]
        async with http.get(f"{api.api_base_url}/file/bot1:WRONG/{'/'.join(path_only)}") as wrong:
            assert wrong.status == 404
    async with _server(path) as api:  # the photo is still there after a restart, under the same id
        assert api.files.by_id[size.file_id].data == image
        assert api.chats[7].messages[sent.message_id]["photo"][0]["file_id"] == size.file_id
        fresh = api.send_photo({"chat_id": 7, "photo": {"uploaded": True, "data": png(2, 2), "file_name": "x.png"}})
        assert fresh["photo"][0]["file_id"] != size.file_id


@pytest.mark.parametrize(
    ("photo", "refusal"),
    [
        (b"print('not an image')\n", "Image_process_failed"),
        (png(10_000, 1), "Photo_invalid_dimensions"),  # over 10000 in total
        (png(2100, 100), "Photo_invalid_dimensions"),  # a ratio over 20
        (jpeg_header(9000, 1200), "Photo_invalid_dimensions"),
        ("AgACunknown", "Wrong file identifier/http url specified"),
        ("https://example.com/cat.jpg", "does not download urls"),
    ],
)
async def test_photos_telegram_refuses_are_refused_with_its_reason(photo: bytes | str, refusal: str):
    async with BotApiServer(TOKEN, "local_bot") as api, _bot(api) as bot:
        api.add_user({"id": 7, "is_bot": False, "first_name": "Ada"})
        api.write_text(7, "/start")
        with pytest.raises(BadRequest) as refused:
            await bot.send_photo(7, photo)
        assert refusal.lower() in refused.value.message.lower()
        assert api.chats[7].bot_messages() == []


async def test_a_document_is_not_a_photo_and_a_jpeg_is_measured_from_its_frame():
    async with BotApiServer(TOKEN, "local_bot") as api, _bot(api) as bot:
        api.add_user({"id": 7, "is_bot": False, "first_name": "Ada"})
        api.write_text(7, "/start")
        document = await bot.send_document(7, b"x = 1\n", filename="x.py")
        with pytest.raises(BadRequest, match=r"(?i)can't use file of type document as photo"):
            await bot.send_photo(7, document.document.file_id)
        sent = await bot.send_photo(7, jpeg_header(1280, 720) + b"\xff\xd9")
        assert (sent.photo[-1].width, sent.photo[-1].height) == (1280, 720)
        assert api.files.by_id[sent.photo[-1].file_id].mime == "image/jpeg"
