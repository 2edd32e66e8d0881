"""The Bot API stand-in refuses what Telegram refuses and behaves like Telegram otherwise.

Driven through real PTB (telegram.Bot over HTTP) and through raw aiohttp requests,
so both PTB's encoding and the wire format are covered.
"""

from __future__ import annotations

import asyncio
import datetime as dtm
import json
import time

import aiohttp
import pytest
import telegram
from telegram import InlineKeyboardButton as Button
from telegram import InlineKeyboardMarkup as Markup
from telegram.error import BadRequest, Conflict, Forbidden, InvalidToken, NetworkError, RetryAfter

from tests.standin import BotApiStandin, SimulationError

USER = 1001


@pytest.fixture
async def standin():
    async with BotApiStandin() as running:
        yield running


@pytest.fixture
async def bot(standin):
    async with telegram.Bot(standin.token, base_url=standin.base_url) as client:
        yield client


@pytest.fixture
async def http():
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def ada(standin, bot):
    """A learner who has started the bot; her /start update is already confirmed."""
    learner = standin.learner(USER, "Ada")
    update_id = await learner.send("/start")
    await bot.get_updates(offset=update_id + 1)
    return learner


async def call(http, standin, method, *, token=None, as_json=False, query=None, **params):
    """A raw Bot API call; returns (HTTP status, decoded body)."""
    url = f"{standin.api_base_url}/bot{token or standin.token}/{method}"
    if as_json:
        response = await http.post(url, json=params, params=query)
    else:
        form = {k: v if isinstance(v, str) else json.dumps(v) for k, v in params.items()}
        response = await http.post(url, data=form, params=query)
    async with response:
        return response.status, await response.json()


def keyboard(*buttons: dict) -> dict:
    return {"inline_keyboard": [list(buttons)]}


# ----------------------------------------------------------------- transport


async def test_get_me_through_ptb(standin, bot):
    assert bot.bot.id == 123456 and bot.bot.username == "coursebot_test_bot" and bot.bot.is_bot
    assert bot.bot.can_join_groups is True
    assert [c.method for c in standin.calls] == ["getMe"]


async def test_wrong_token_is_401_and_malformed_token_404(standin, http):
    status, body = await call(http, standin, "getMe", token="123456:WRONG")
    assert (status, body) == (401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
    status, body = await call(http, standin, "getMe", token="not-a-token")
    assert (status, body["description"]) == (404, "Not Found")
    with pytest.raises(InvalidToken):
        async with telegram.Bot("123456:WRONG", base_url=standin.base_url):
            pass
    assert [c.error_code for c in standin.errors()] == [401, 404, 401]


async def test_unknown_method_is_404_and_names_are_case_insensitive(standin, http):
    assert (await call(http, standin, "sendMessagez"))[0] == 404
    status, body = await call(http, standin, "pinChatMessage", chat_id=1, message_id=1)
    assert (status, body["description"]) == (
        400,
        "Bad Request: method pinChatMessage is not implemented by the Bot API stand-in",
    )
    status, body = await call(http, standin, "GETME")
    assert status == 200 and body["result"]["username"] == "coursebot_test_bot"
    assert standin.calls[-1].method == "getMe"


@pytest.mark.parametrize("encoding", ["query", "form", "multipart", "json"])
async def test_every_parameter_encoding_is_decoded(standin, http, ada, encoding):
    markup = keyboard({"text": "Go", "callback_data": "go"})
    params = {"chat_id": USER, "text": "<b>hi</b>", "parse_mode": "HTML", "reply_markup": markup}
    url = f"{standin.api_base_url}/bot{standin.token}/sendMessage"
    as_strings = {k: v if isinstance(v, str) else json.dumps(v) for k, v in params.items()}
    if encoding == "query":
        response = await http.get(url, params=as_strings)
    elif encoding == "form":
        response = await http.post(url, data=as_strings)
    elif encoding == "multipart":
        form = aiohttp.FormData()
        for key, value in as_strings.items():
            form.add_field(key, value)
        form.add_field("ignored_upload", b"bytes", filename="a.txt")  # forces multipart/form-data
        response = await http.post(url, data=form)
    else:
        response = await http.post(url, json=params)
    async with response:
        body = await response.json()
    assert body["ok"], body
    assert body["result"]["reply_markup"] == markup
    assert body["result"]["entities"] == [{"type": "bold", "offset": 0, "length": 2}]
    recorded = standin.calls[-1].params
    assert recorded["chat_id"] == USER and recorded["reply_markup"] == markup


# ---------------------------------------------------------------------- HTML


@pytest.mark.parametrize(
    "html, text, entities",
    [
        (
            "<b>bold</b> <strong>s</strong>",
            "bold s",
            [{"type": "bold", "offset": 0, "length": 4}, {"type": "bold", "offset": 5, "length": 1}],
        ),
        (
            "<i>a</i><em>b</em><u>c</u><ins>d</ins><s>e</s><strike>f</strike><del>g</del>",
            "abcdefg",
            # Touching entities of a kind are one entity, as tdlib's split_entities stores them.
            [
                {"type": "italic", "offset": 0, "length": 2},
                {"type": "underline", "offset": 2, "length": 2},
                {"type": "strikethrough", "offset": 4, "length": 3},
            ],
        ),
        (
            '<span class="tg-spoiler">x</span> <tg-spoiler>y</tg-spoiler>',
            "x y",
            [{"type": "spoiler", "offset": 0, "length": 1}, {"type": "spoiler", "offset": 2, "length": 1}],
        ),
        (
            '<a href="https://example.com/?a=1&amp;b=2">link</a>',
            "link",
            [{"type": "text_link", "offset": 0, "length": 4, "url": "https://example.com/?a=1&b=2"}],
        ),
        (
            "<code>x &lt; y &amp;&amp; z &gt; 0 &quot;q&quot;</code>",
            'x < y && z > 0 "q"',
            [{"type": "code", "offset": 0, "length": 18}],
        ),
        (
            '<pre><code class="language-python">import torch\n</code></pre>',
            "import torch",
            [{"type": "pre", "offset": 0, "length": 12, "language": "python"}],
        ),
        ("<pre>plain</pre>", "plain", [{"type": "pre", "offset": 0, "length": 5}]),
        (
            "<blockquote>q</blockquote><blockquote expandable>e</blockquote>",
            "qe",
            [
                {"type": "blockquote", "offset": 0, "length": 1},
                {"type": "expandable_blockquote", "offset": 1, "length": 1},
            ],
        ),
        (
            '<tg-emoji emoji-id="5368324170671202286">👍</tg-emoji>',
            "👍",
            [{"type": "custom_emoji", "offset": 0, "length": 2, "custom_emoji_id": "5368324170671202286"}],
        ),
        ("😀 <b>é</b> &#128512;&#x41;", "😀 é 😀A", [{"type": "bold", "offset": 3, "length": 1}]),  # UTF-16 offsets
        ("<B>upper</B> a > b", "upper a > b", [{"type": "bold", "offset": 0, "length": 5}]),
        ("\n  <b>x</b>  \n", "x", [{"type": "bold", "offset": 0, "length": 1}]),  # trimmed like Telegram
    ],
)
async def test_html_accepted(standin, bot, ada, html, text, entities):
    await bot.send_message(USER, html, parse_mode="HTML")
    assert (ada.last["text"], ada.last.get("entities", [])) == (text, entities)
    assert standin.errors() == []


@pytest.mark.parametrize(
    "html, reason",
    [
        ("a < b", 'Unsupported start tag "" at byte offset 2'),
        ("<foo>x</foo>", 'Unsupported start tag "foo" at byte offset 0'),
        ("é<b>never closed", 'Can\'t find end tag corresponding to start tag "b"'),
        ("<b><i>x</b></i>", 'Unmatched end tag at byte offset 7, expected "</i>", found "</b>"'),
        ("x</b>", "Unexpected end tag at byte offset 1"),
        ("fish & chips", 'Character "&" must be escaped as "&amp;" at byte offset 5'),
        ("<span>x</span>", 'Tag "span" must have class "tg-spoiler" at byte offset 0'),
        ('<a href="x>y</a>', "Unclosed start tag at byte offset 0"),
        ("<b", "Unclosed start tag at byte offset 0"),
    ],
)
async def test_html_refused(standin, bot, ada, html, reason):
    with pytest.raises(BadRequest):
        await bot.send_message(USER, html, parse_mode="HTML")
    assert standin.errors()[-1].description == f"Bad Request: can't parse entities: {reason}"
    assert ada.messages == []


async def test_unknown_parse_mode_is_refused(standin, bot, ada):
    with pytest.raises(BadRequest, match="Unsupported parse_mode"):
        await bot.send_message(USER, "x", parse_mode="Textile")


# -------------------------------------------------------------- text limits


@pytest.mark.parametrize(
    "text, parse_mode, ok",
    [
        ("a" * 4096, None, True),
        ("a" * 4097, None, False),
        ("😀" * 2048, None, True),  # 4096 UTF-16 code units
        ("😀" * 2048 + "a", None, False),  # 2049 code points, 4097 code units
        ("<b>" + "a" * 4096 + "</b>", "HTML", True),  # tags do not count
        ("&amp;" * 4096, "HTML", True),  # entities count as one character
        ("&amp;" * 4097, "HTML", False),
    ],
)
async def test_message_length_counts_utf16_after_entity_parsing(standin, bot, ada, text, parse_mode, ok):
    if ok:
        await bot.send_message(USER, text, parse_mode=parse_mode)
        assert standin.errors() == []
    else:
        with pytest.raises(BadRequest, match="Message is too long"):
            await bot.send_message(USER, text, parse_mode=parse_mode)


@pytest.mark.parametrize("text", ["", " \n ", "<b></b>"])
async def test_empty_text_is_refused(standin, bot, ada, text):
    with pytest.raises(BadRequest, match="Message text is empty"):
        await bot.send_message(USER, text, parse_mode="HTML")


# ------------------------------------------------------------------ keyboards


@pytest.mark.parametrize(
    "button, error",
    [
        ({"text": "é", "callback_data": "é" * 32}, None),  # 64 bytes
        ({"text": "a", "callback_data": "a" * 64}, None),
        ({"text": "é", "callback_data": "é" * 32 + "a"}, "BUTTON_DATA_INVALID"),  # 33 characters, 65 bytes
        ({"text": "a", "callback_data": ""}, "BUTTON_DATA_INVALID"),
        ({"text": "", "callback_data": "x"}, "BUTTON_TEXT_INVALID"),
        ({"text": "plain"}, "Text buttons are unallowed in the inline keyboard"),
        ({"text": "two", "callback_data": "x", "url": "https://example.com"}, "exactly one of"),
        ({"text": "link", "url": "javascript:alert(1)"}, "BUTTON_URL_INVALID"),
        ({"text": "link", "url": "https://example.com/x"}, None),
    ],
)
async def test_inline_button_rules(standin, http, ada, button, error):
    status, body = await call(http, standin, "sendMessage", chat_id=USER, text="t", reply_markup=keyboard(button))
    if error is None:
        assert status == 200 and body["result"]["reply_markup"] == keyboard(button)
    else:
        assert status == 400 and error in body["description"]
        assert body["description"].startswith("Bad Request: ")


async def test_reply_keyboard_is_chat_state_not_message_state(bot, ada):
    await bot.send_message(USER, "pick", reply_markup=telegram.ReplyKeyboardMarkup([["Yes", "No"]]))
    assert "reply_markup" not in ada.last
    assert ada.reply_keyboard["keyboard"] == [[{"text": "Yes"}, {"text": "No"}]]
    await bot.send_message(USER, "ok", reply_markup=telegram.ReplyKeyboardRemove())
    assert ada.reply_keyboard is None


# ---------------------------------------------------------------------- edits


async def test_edit_rules(standin, bot, ada):
    markup = Markup([[Button("Next", callback_data="next")]])
    sent = await bot.send_message(USER, "<b>one</b>", parse_mode="HTML", reply_markup=markup)
    with pytest.raises(BadRequest, match="Message is not modified"):
        await bot.edit_message_text("<b>one</b>", USER, sent.message_id, parse_mode="HTML", reply_markup=markup)
    assert standin.errors()[-1].description == (
        "Bad Request: message is not modified: specified new message content and reply markup are exactly "
        "the same as a current content and reply markup of the message"
    )
    # same text, different entities: modified
    await bot.edit_message_text("one", USER, sent.message_id, reply_markup=markup)
    assert "entities" not in ada.message(sent.message_id)
    # no reply_markup removes the keyboard, as in Telegram
    edited = await bot.edit_message_text("one", USER, sent.message_id)
    assert edited.reply_markup is None and "reply_markup" not in ada.last and ada.last["edit_date"]
    with pytest.raises(BadRequest, match="Message is not modified"):
        await bot.edit_message_reply_markup(USER, sent.message_id)
    with pytest.raises(BadRequest, match="Message to edit not found"):
        await bot.edit_message_text("x", USER, 999)
    poll = await bot.send_poll(USER, "Q?", ["a", "b"])
    with pytest.raises(BadRequest, match="There is no text in the message to edit"):
        await bot.edit_message_text("x", USER, poll.message_id)
    own_id = standin.updates.history[await ada.send("my text")]["message"]["message_id"]
    with pytest.raises(BadRequest, match="Message can't be edited"):
        await bot.edit_message_text("x", USER, own_id)


async def test_documents_and_captions(standin, bot, ada):
    sent = await bot.send_document(
        USER, b"print('hi')\n", filename="solution.py", caption="<b>Your</b> file", parse_mode="HTML"
    )
    assert sent.document.file_name == "solution.py" and sent.document.file_size == 12
    assert ada.last["caption_entities"] == [{"type": "bold", "offset": 0, "length": 4}]
    assert standin.calls[-1].params["document"]["uploaded"] is True
    with pytest.raises(BadRequest, match="Message caption is too long"):
        await bot.send_photo(USER, "AgACAgIAAxkBAAI", caption="c" * 1025)
    await bot.edit_message_caption(USER, sent.message_id, caption="new caption")
    assert ada.last["caption"] == "new caption" and "caption_entities" not in ada.last


async def test_wait_edit_and_wait_message(bot, ada):
    sent = await bot.send_message(USER, "v1")
    waiting = asyncio.create_task(ada.wait_edit(sent.message_id))
    cursor = ada.cursor()
    new_message = asyncio.create_task(ada.wait_message(lambda m: m["text"] == "second"))
    await asyncio.sleep(0)
    await bot.send_message(USER, "first")
    await bot.edit_message_text("v2", USER, sent.message_id)
    await bot.send_message(USER, "second")
    assert (await waiting)["text"] == "v2"
    assert (await new_message)["text"] == "second"
    assert (await ada.wait_message(since=cursor))["text"] == "first"  # a cursor sees the past too
    assert [m["text"] for m in ada.messages] == ["v2", "first", "second"]


async def test_wait_timeout_names_what_was_awaited(standin, bot, ada):
    await bot.send_message(USER, "hello")
    with pytest.raises(asyncio.TimeoutError) as caught:
        await ada.wait_message(timeout=0.05)
    assert "a new bot message in chat 1001" in str(caught.value) and "sendMessage(" in str(caught.value)


async def test_delete_message(bot, ada):
    sent = await bot.send_message(USER, "bye")
    assert await bot.delete_message(USER, sent.message_id) is True
    assert ada.messages == []
    with pytest.raises(BadRequest, match="Message to delete not found"):
        await bot.delete_message(USER, sent.message_id)


async def test_reply_parameters(bot, ada, standin):
    update_id = await ada.send("question?")
    asked = standin.updates.history[update_id]["message"]
    reply = await bot.send_message(USER, "answer", reply_parameters=telegram.ReplyParameters(asked["message_id"]))
    assert reply.reply_to_message.text == "question?"
    with pytest.raises(BadRequest, match="Message to be replied not found"):
        await bot.send_message(USER, "x", reply_parameters=telegram.ReplyParameters(999))


# ---------------------------------------------------------------------- chats


async def test_chat_not_found_until_the_user_writes_and_403_when_blocked(standin, bot):
    with pytest.raises(BadRequest, match="Chat not found"):
        await bot.send_message(424242, "hi")
    bob = standin.learner(2002, "Bob")
    with pytest.raises(BadRequest, match="Chat not found"):
        await bot.send_message(bob.chat_id, "hi")
    await bob.send("/start")
    await bot.send_message(bob.chat_id, "hi")
    bob.block()
    with pytest.raises(Forbidden, match="bot was blocked by the user"):
        await bot.send_message(bob.chat_id, "hi again")
    updates = await bot.get_updates()
    assert updates[-1].my_chat_member.new_chat_member.status == "kicked"


async def test_group_privacy_mode(standin, bot):
    ada = standin.learner(USER, "Ada")
    group = standin.group(-100123, "Study group")
    assert await group.send(ada, "just chatting") is None  # privacy mode: not for the bot
    assert await group.send(ada, "/start@other_bot") is None
    first = await group.send(ada, "/start")
    second = await group.send(ada, "/help@coursebot_test_bot")
    updates = await bot.get_updates()
    assert [u.update_id for u in updates] == [first, second]
    assert updates[0].message.chat.type == "supergroup" and updates[0].message.from_user.id == USER
    await bot.send_message(group.chat_id, "hello group")
    assert group.last["text"] == "hello group" and ada.messages == []


# -------------------------------------------------------------------- polls


@pytest.mark.parametrize(
    "overrides, error",
    [
        ({"question": "q" * 301}, "poll question length must not exceed 300"),
        ({"question": ""}, "poll question must be non-empty"),
        ({"options": [{"text": "only"}]}, "poll must have at least 2 option"),
        ({"options": [{"text": str(i)} for i in range(13)]}, "poll can't have more than 12 options"),
        ({"options": [{"text": "a"}, {"text": "b" * 101}]}, "poll options length must not exceed 100"),
        ({"options": [{"text": "a"}, {"text": ""}]}, "poll options must be non-empty"),
        ({"type": "quiz"}, "wrong correct option ID specified"),
        ({"type": "quiz", "correct_option_ids": [2]}, "wrong correct option ID specified"),
        ({"type": "quiz", "correct_option_ids": [0, 1]}, "QUIZ_CORRECT_ANSWERS_TOO_MUCH"),
        ({"type": "quiz", "correct_option_ids": [0], "explanation": "e" * 201}, "explanation is too long"),
        (
            {"type": "quiz", "correct_option_ids": [0], "explanation": "a\nb\nc\nd"},
            "too many line feeds in explanation",
        ),
        (
            {"type": "quiz", "correct_option_ids": [0], "explanation": "<b>x", "explanation_parse_mode": "HTML"},
            "can't parse entities: Can't find end tag corresponding to start tag \"b\"",
        ),
    ],
)
async def test_poll_refusals(standin, http, ada, overrides, error):
    params = {"chat_id": USER, "question": "Q?", "options": [{"text": "a"}, {"text": "b"}], **overrides}
    status, body = await call(http, standin, "sendPoll", **params)
    assert (status, body["description"]) == (400, f"Bad Request: {error}")
    assert ada.messages == []


@pytest.mark.parametrize(
    "explanation",
    [
        "e" * 200,
        "<b>" + "e" * 200 + "</b>",  # limit applies after entity parsing
        "one\ntwo\nthree",  # two line feeds
    ],
)
async def test_quiz_explanation_limits_accepted(bot, ada, explanation):
    message = await bot.send_poll(
        USER,
        "Q?",
        ["a", "b"],
        type="quiz",
        correct_option_ids=[1],
        explanation=explanation,
        explanation_parse_mode="HTML",
    )
    assert message.poll.correct_option_ids == (1,) and message.poll.explanation


async def test_polls_have_unique_ids_and_persistent_option_ids(standin, http, ada, bot):
    # plain strings are accepted as options, as the Bot API allows
    status, body = await call(http, standin, "sendPoll", chat_id=USER, question="Q1", options=["a", "b", "c"])
    assert status == 200, body
    second = await bot.send_poll(USER, "Q2", [telegram.InputPollOption("x"), "y"], is_anonymous=False)
    first = body["result"]["poll"]
    ids = [o["persistent_id"] for o in first["options"]] + [o.persistent_id for o in second.poll.options]
    assert len(set(ids)) == 5 and first["id"] != second.poll.id
    assert first["allows_revoting"] is True and first["members_only"] is False
    closed = await bot.stop_poll(USER, second.message_id)
    assert closed.is_closed and ada.last["poll"]["is_closed"]
    with pytest.raises(BadRequest, match="Poll has already been closed"):
        await bot.stop_poll(USER, second.message_id)


async def test_answer_poll_produces_updates_ptb_parses(standin, bot, ada):
    quiz = await bot.send_poll(USER, "2+2?", ["3", "4"], type="quiz", correct_option_ids=[1], is_anonymous=False)
    update_id = await ada.answer_poll(ada.last, 1)
    updates = await bot.get_updates()
    answer = updates[0]
    assert answer.update_id == update_id
    assert answer.poll_answer.option_ids == (1,) and answer.poll_answer.user.id == USER
    assert answer.poll_answer.option_persistent_ids == (quiz.poll.options[1].persistent_id,)
    assert updates[1].poll.options[1].voter_count == 1 and updates[1].poll.total_voter_count == 1
    with pytest.raises(SimulationError, match="does not allow changing the vote"):
        await ada.answer_poll(ada.last, 0)  # quizzes do not allow revoting


# ----------------------------------------------------------- callback queries


async def test_tap_produces_callback_query_ptb_parses(standin, bot, ada):
    await bot.send_message(
        USER,
        "lesson",
        reply_markup=Markup([[Button("◀ Back", callback_data="back"), Button("Next ▶", callback_data="next")]]),
    )
    query_id = await ada.tap(ada.last, "Next")
    raw = standin.updates.history[max(standin.updates.history)]
    update = telegram.Update.de_json(raw, bot)
    assert update.callback_query.id == query_id and update.callback_query.data == "next"
    assert update.callback_query.message.text == "lesson" and update.callback_query.from_user.id == USER
    forged = await ada.tap(ada.last, callback_data="not-on-any-button")
    assert (
        standin.callback_queries[forged]
        and standin.updates.history[max(standin.updates.history)]["callback_query"]["data"] == "not-on-any-button"
    )
    with pytest.raises(SimulationError, match="no button"):
        await ada.tap(ada.last, "Missing")


async def test_answer_callback_query_rules(standin, bot, ada):
    await bot.send_message(USER, "m", reply_markup=Markup([[Button("Go", callback_data="go")]]))
    query_id = await ada.tap(ada.last, "Go")
    with pytest.raises(BadRequest, match="Message_too_long"):
        await bot.answer_callback_query(query_id, text="x" * 201)
    assert await bot.answer_callback_query(query_id, text="Done")
    assert (await ada.wait_callback_answer(query_id))["text"] == "Done"
    with pytest.raises(BadRequest, match="Query is too old"):
        await bot.answer_callback_query(query_id)  # already answered
    with pytest.raises(BadRequest, match="Query is too old"):
        await bot.answer_callback_query("12345")  # unknown
    standin.callback_query_ttl = 0.05
    stale = await ada.tap(ada.last, "Go")
    await asyncio.sleep(0.1)
    with pytest.raises(BadRequest, match="Query is too old"):
        await bot.answer_callback_query(stale)
    assert standin.errors()[-1].description == (
        "Bad Request: query is too old and response timeout expired or query ID is invalid"
    )
    # Only the answer to the query already answered is a second answer; unknown and expired ones are not.
    assert [call.params["callback_query_id"] for call in standin.answered_again] == [query_id]


async def test_the_test_fixture_fails_a_test_whose_bot_answers_a_query_twice():
    from tests.conftest import standin as standin_fixture

    fixture = standin_fixture.__wrapped__()  # the conftest fixture's generator, driven by hand
    standin = await anext(fixture)
    async with telegram.Bot(standin.token, base_url=standin.base_url) as bot:
        ada = standin.learner(USER, "Ada")
        await bot.get_updates(offset=await ada.send("/start") + 1)
        await bot.send_message(USER, "m", reply_markup=Markup([[Button("Go", callback_data="go")]]))
        query_id = await ada.tap(ada.last, "Go")
        assert await bot.answer_callback_query(query_id)
        with pytest.raises(BadRequest, match="Query is too old"):
            await bot.answer_callback_query(query_id, text="again")
    with pytest.raises(AssertionError, match="a callback query was answered twice"):
        await anext(fixture)


# ---------------------------------------------------------------- commands


async def test_bot_commands_are_stored_per_scope_and_language(standin, bot):
    commands = [telegram.BotCommand("start", "Start the course"), telegram.BotCommand("next_lesson", "Go on")]
    assert await bot.set_my_commands(commands)
    assert await bot.set_my_commands(
        [("start", "Kurs starten")], scope=telegram.BotCommandScopeAllPrivateChats(), language_code="de"
    )
    assert standin.commands[("default", "")] == [c.to_dict() for c in commands]
    assert standin.commands[("all_private_chats", "de")] == [{"command": "start", "description": "Kurs starten"}]
    assert await bot.get_my_commands() == tuple(commands)
    assert await bot.get_my_commands(language_code="fr") == ()
    assert await bot.delete_my_commands()
    assert ("default", "") not in standin.commands


@pytest.mark.parametrize(
    "commands, error",
    [
        ([("Start", "upper case")], "BOT_COMMAND_INVALID"),
        ([("a" * 33, "too long")], "BOT_COMMAND_INVALID"),
        ([("with-dash", "bad char")], "BOT_COMMAND_INVALID"),
        ([("start", "")], "BOT_COMMAND_DESCRIPTION_INVALID"),
        ([("start", "d" * 257)], "BOT_COMMAND_DESCRIPTION_INVALID"),
        ([(f"c{i}", "d") for i in range(101)], "BOT_COMMANDS_TOO_MUCH"),
    ],
)
async def test_bot_command_refusals(standin, bot, commands, error):
    with pytest.raises(BadRequest):
        await bot.set_my_commands(commands)
    assert standin.errors()[-1].description == f"Bad Request: {error}"
    assert standin.commands == {}


# -------------------------------------------------------------- faults


@pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")
async def test_429_surfaces_as_retry_after(standin, bot, ada):
    standin.fail_next("sendMessage", status=429, retry_after=3)
    with pytest.raises(RetryAfter) as caught:
        await bot.send_message(USER, "hi")
    assert "Retry in 3 seconds" in str(caught.value)
    failed = standin.calls[-1]
    assert (failed.ok, failed.injected, failed.error_code) == (False, True, 429)
    assert failed.description == "Too Many Requests: retry after 3"
    await bot.send_message(USER, "hi")  # only the next call failed
    assert standin.errors() == [] and ada.last["text"] == "hi"


@pytest.mark.parametrize("status, description", [(500, "Internal Server Error"), (502, "Bad Gateway")])
async def test_5xx_faults(standin, bot, http, ada, status, description):
    standin.fail_next("sendmessage", status=status, count=2)
    for _ in range(2):
        with pytest.raises(NetworkError, match=description):
            await bot.send_message(USER, "hi")
    got_status, body = await call(http, standin, "sendMessage", chat_id=USER, text="hi")
    assert got_status == 200 and body["ok"]
    assert [c.error_code for c in standin.calls if c.injected] == [status, status]


async def test_faults_at_random_fail_about_their_share_the_same_way_for_the_same_seed(standin, http, ada):
    def outcomes() -> list[int | None]:
        return [c.error_code for c in standin.calls if c.method == "sendMessage"]

    standin.faults.at_random(0.1, (429, 502), seed=7)
    for _ in range(400):
        await call(http, standin, "sendMessage", chat_id=USER, text="hi")
    first = outcomes()
    failed = [code for code in first if code is not None]
    assert 20 <= len(failed) <= 60
    assert set(failed) == {429, 502}
    assert all(c.injected for c in standin.calls if c.error_code) and standin.errors() == []

    standin.clear_calls()
    standin.faults.at_random(0.1, (429, 502), seed=7)
    for _ in range(400):
        await call(http, standin, "sendMessage", chat_id=USER, text="hi")
    assert outcomes() == first


async def test_spared_methods_never_fail_at_random_and_clear_stops_the_faults(standin, http, ada):
    standin.faults.at_random(1.0, (503,), spare=["getMe"])
    status, _ = await call(http, standin, "getMe")
    assert status == 200
    status, _ = await call(http, standin, "sendMessage", chat_id=USER, text="hi")
    assert status == 503
    standin.faults.clear()
    status, _ = await call(http, standin, "sendMessage", chat_id=USER, text="hi")
    assert status == 200


# ------------------------------------------------------------ getUpdates


async def test_long_poll_returns_as_soon_as_an_update_is_injected(standin, bot):
    ada = standin.learner(USER, "Ada")
    poll = asyncio.create_task(bot.get_updates(timeout=5))
    await asyncio.sleep(0.1)
    assert not poll.done()
    injected_at = time.monotonic()
    update_id = await ada.send("/start")
    updates = await asyncio.wait_for(poll, 1)
    assert time.monotonic() - injected_at < 0.3
    assert [u.update_id for u in updates] == [update_id] and updates[0].message.text == "/start"
    assert updates[0].message.entities[0].type == "bot_command"


async def test_long_poll_times_out_empty(standin, http):
    started = time.monotonic()
    status, body = await call(http, standin, "getUpdates", timeout="0.2")
    assert (status, body["result"]) == (200, [])
    assert 0.15 < time.monotonic() - started < 1.0


async def test_offset_confirms_and_limit_and_negative_offset(standin, bot):
    ada = standin.learner(USER, "Ada")
    ids = [await ada.send(f"m{i}") for i in range(4)]
    assert [u.update_id for u in await bot.get_updates()] == ids
    assert [u.update_id for u in await bot.get_updates()] == ids  # not confirmed yet: delivered again
    assert [u.update_id for u in await bot.get_updates(offset=ids[1], limit=2)] == ids[1:3]
    assert [u.update_id for u in await bot.get_updates()] == ids[1:]  # ids[0] is gone for good
    assert [u.update_id for u in await bot.get_updates(offset=-1)] == ids[-1:]
    assert await bot.get_updates(offset=ids[-1] + 1) == ()
    assert (await bot.get_webhook_info()).pending_update_count == 0


async def test_redelivery_keeps_the_update_id(standin, bot):
    ada = standin.learner(USER, "Ada")
    update_id = await ada.send("/start")
    (first,) = await bot.get_updates()
    assert await bot.get_updates(offset=update_id + 1) == ()
    standin.redeliver(update_id)
    (again,) = await bot.get_updates(offset=update_id + 1)
    assert again.update_id == update_id and again.message.text == first.message.text
    assert await bot.get_updates(offset=update_id + 1) == ()  # once


async def test_concurrent_get_updates_conflict(standin, bot):
    waiting = asyncio.create_task(bot.get_updates(timeout=5))
    await asyncio.sleep(0.1)
    async with telegram.Bot(standin.token, base_url=standin.base_url) as second_instance:
        assert await second_instance.get_updates(timeout=0) == ()  # the newer request wins, as on Telegram...
    with pytest.raises(Conflict, match="terminated by other getUpdates request"):
        await asyncio.wait_for(waiting, 1)  # ...and the waiting one is terminated
    assert standin.errors()[-1].description == (
        "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
    )


async def test_allowed_updates_stops_generating_other_types(standin, bot, ada):
    await bot.send_message(USER, "m", reply_markup=Markup([[Button("Go", callback_data="go")]]))
    await bot.get_updates(allowed_updates=["message"])
    assert ada.tap_nowait(ada.last, "Go").update_id is None
    assert await ada.send("still here") is not None
    assert [u.message.text for u in await bot.get_updates()] == ["still here"]


async def test_learner_updates_parse_in_ptb(standin, bot):
    ada = standin.learner(USER, "Ada", username="ada_l")
    sent_id = await ada.send("hello /help there")
    await ada.send_sticker("🔥")
    await ada.send_photo(caption="my plot")
    message_id = standin.updates.history[sent_id]["message"]["message_id"]
    await ada.edit(message_id, "hello again")
    updates = await bot.get_updates()
    assert updates[0].message.parse_entities() == {updates[0].message.entities[0]: "/help"}
    assert updates[1].message.sticker.emoji == "🔥"
    assert updates[2].message.photo[-1].width == 800 and updates[2].message.caption == "my plot"
    assert updates[3].edited_message.text == "hello again" and updates[3].edited_message.message_id == message_id
    assert updates[0].message.from_user.username == "ada_l"


async def test_settle_waits_for_fetch_and_quiet(standin, bot):
    ada = standin.learner(USER, "Ada")
    await ada.send("/start")
    with pytest.raises(asyncio.TimeoutError, match="still waiting for getUpdates"):
        await standin.settle(quiet=0.05, timeout=0.2)
    await bot.get_updates()
    started = time.monotonic()
    await standin.settle(quiet=0.1, timeout=2)
    assert time.monotonic() - started >= 0.09


# ------------------------------------------------ a real PTB application


async def test_ptb_application_end_to_end(standin):
    from telegram.ext import ApplicationBuilder, CallbackQueryHandler, CommandHandler

    async def start(update, context):
        await update.message.reply_text(
            "<b>Lesson 1</b>", parse_mode="HTML", reply_markup=Markup([[Button("Next", callback_data="next")]])
        )

    async def next_step(update, context):
        await update.callback_query.answer("ok")
        await update.callback_query.edit_message_text("Lesson 2")

    app = ApplicationBuilder().token(standin.token).base_url(standin.base_url).build()
    app.add_handler(CommandHandler("start", start))
    app.add_handler(CallbackQueryHandler(next_step))
    ada = standin.learner(USER, "Ada")
    async with app:
        await app.start()
        await app.updater.start_polling(timeout=dtm.timedelta(seconds=5))
        reaction = ada.next_reaction()
        await ada.send("/start")
        lesson = await ada.wait_message()
        assert reaction.done() and reaction.result() <= time.monotonic()
        assert lesson["entities"] == [{"type": "bold", "offset": 0, "length": 8}]
        tap = ada.tap_nowait(lesson, "Next")
        reacted_at = await asyncio.wait_for(tap.reacted, 5)
        assert reacted_at >= tap.tapped_at
        assert (await ada.wait_callback_answer(tap.query_id))["text"] == "ok"
        await standin.settle(quiet=0.05)
        assert ada.last["text"] == "Lesson 2" and "reply_markup" not in ada.last
        await app.updater.stop()
        await app.stop()
    assert standin.errors() == []
    methods = {c.method for c in standin.calls}
    assert {"getMe", "deleteWebhook", "getUpdates", "sendMessage", "answerCallbackQuery", "editMessageText"} <= methods
