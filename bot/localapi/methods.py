"""The Bot API methods, implemented against in-memory state, and what users do in their app.

Each method takes the decoded params dict and returns the ``result`` Telegram would
return, or raises ApiError with Telegram's description. Methods are plain functions
(only getUpdates awaits), so a call costs one dict lookup plus its own work.
Methods register themselves in METHODS under their lower-cased name, since Telegram
matches method names case-insensitively.

The other side, what a person does in a Telegram app (write, tap a button, vote, change
the app's language), is here too, in one place: the web chat and the tests' simulated
users both go through it, so both produce exactly the updates Telegram would.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bot.telegram_rules import limits
from bot.telegram_rules.limits import DEFAULT_UPDATE_TYPES
from bot.telegram_rules.units import utf16_len

from . import refusals, webhooks
from .chats import ChatState
from .errors import ApiError, bad_request, forbidden
from .files import Files, StoredFile
from .params import flag, integer, required_integer, string
from .store import Change, Snapshot
from .text import command_entities, format_text
from .updates import UpdateQueue

Json = dict[str, Any]
Method = Callable[..., Any]

# lower-cased name -> (canonical name, function, is coroutine function)
METHODS: dict[str, tuple[str, Method, bool]] = {}

NOT_MODIFIED = (
    "message is not modified: specified new message content and reply markup are exactly "
    "the same as a current content and reply markup of the message"
)
QUERY_TOO_OLD = "query is too old and response timeout expired or query ID is invalid"
_MEDIA_FIELDS = ("photo", "document", "sticker", "video", "animation", "audio", "voice")
FIRST_UPDATE_ID = 700_000_001
_POLL_IDS = 5_000_000_000_000_000_000  # a poll id is this plus a number from _new_id()
_QUERIES_KEPT = 10_000
_UNSAVED = frozenset({"answered", "action"})  # what a chat shows for a moment: a toast, "typing…"


def api_method(name: str) -> Callable[[Method], Method]:
    def register(func: Method) -> Method:
        METHODS[name.lower()] = (name, func, inspect.iscoroutinefunction(func))
        return func

    return register


@dataclass(slots=True)
class CallbackQueryState:
    query_id: str
    chat_id: int | None
    created: float  # time.monotonic()
    answer: Json | None = None  # the answerCallbackQuery params, once answered
    waiters: list[asyncio.Future[Json]] = field(default_factory=list)


@dataclass(slots=True)
class PollState:
    chat_id: int
    message_id: int
    votes: dict[int, list[int]] = field(default_factory=dict)  # user id -> option ids
    timer: asyncio.TimerHandle | None = None


class BotApi:
    """State of one bot as Telegram sees it, and the methods that change it."""

    def __init__(self, token: str, bot_username: str, bot_first_name: str, strict_html: bool):
        bot_id, sep, secret = token.partition(":")
        if not (bot_id.isdigit() and sep and secret):
            raise ValueError(f"not a bot token: {token!r}")
        self.token = token
        self.bot_id = int(bot_id)
        self.bot_user = {"id": self.bot_id, "is_bot": True, "first_name": bot_first_name, "username": bot_username}
        self.strict_html = strict_html
        self.chats: dict[int, ChatState] = {}
        self.users: dict[int, Json] = {}  # known users, for tg://user?id= mentions
        self.updates = UpdateQueue(first_update_id=FIRST_UPDATE_ID, on_fetch=self._touch, on_push=self._pushed)
        self.commands: dict[tuple[str, str], list[Json]] = {}  # (scope key, language code)
        self.bot_texts: dict[tuple[str, str], str] = {}  # (name|description|short_description, language)
        self.callback_queries: dict[str, CallbackQueryState] = {}
        self.polls: dict[str, PollState] = {}
        self.files = Files()  # what the bot uploaded: photos and documents, by file_id
        # What a client app reported and Telegram never tells a bot: a user's IANA time zone (the web
        # chat's browser). Read in process only (time_zone()); no Bot API method returns it.
        self.time_zones: dict[int, str] = {}
        self.callback_query_ttl = 15.0  # seconds a callback query stays answerable
        self.privacy_mode = True  # groups: only commands and replies to the bot reach it
        self.poll_state_updates = True  # a vote also yields a `poll` update (bot's own polls)
        self.webhook_url = ""
        # Webhook delivery (webhooks.WebhookDelivery) while a webhook is set; its durations scale with the timing.
        self.webhook: webhooks.WebhookDelivery | None = None
        self.webhook_timing = webhooks.WebhookTiming()
        self.last_webhook_stats: webhooks.WebhookStats | None = None
        self.default_menu_button: Json = {"type": "commands"}
        # Who else sees a chat change: clients showing the chat (the web chat), by chat id.
        self.observers: dict[int, list[Callable[[ChatState, str, Json], None]]] = {}
        # Where changes are saved so they survive a restart (None: kept in memory only).
        self.journal: Callable[[Change], None] | None = None
        self._ids = itertools.count(1)
        self._now = time.monotonic()  # arrival time of the call being handled

    def _touch(self) -> None:
        """Activity hook (update delivered); the server overrides it."""

    def _pushed(self, next_update_id: int) -> None:
        if self.journal is not None:
            self.journal(Change("update_id", 0, next_update_id))

    def _observe(self, chat: ChatState, kind: str, payload: Json) -> None:
        """Every change in a chat: saved, then shown to whoever shows that chat."""
        if self.journal is not None and kind not in _UNSAVED:
            if kind == "deleted":
                self.journal(Change("deleted", chat.id, payload["message_id"]))
            else:
                self.journal(Change("message", chat.id, payload))
        for observer in self.observers.get(chat.id, ()):
            observer(chat, kind, payload)

    def new_chat(self, chat: Json, *, known: bool) -> ChatState:
        """Register a chat (a user's private chat, or a group the bot is in)."""
        state = self.chats[chat["id"]] = ChatState(chat, known=known, observe=self._observe)
        if self.journal is not None:
            self.journal(Change("chat", chat["id"], chat))
        return state

    def close_poll_timers(self) -> None:
        for poll in self.polls.values():
            self._cancel_poll_timer(poll)

    # ----------------------------------------------------------- saved state

    def restore(self, snapshot: Snapshot) -> None:
        """Take back the users, chats, messages, polls and files saved before a restart."""
        self.users.update(snapshot.users)
        for stored in snapshot.files:
            self.files.add(stored)
        self.time_zones.update(snapshot.time_zones)
        for chat_id, chat in snapshot.chats.items():
            state = self.chats[chat_id] = ChatState(chat, known=True, observe=self._observe)
            messages = snapshot.messages.get(chat_id, {})
            for message_id in sorted(messages):
                message = messages[message_id]
                state.messages[message_id] = message
                if message["from"]["is_bot"]:
                    state.bot_log.append(message_id)
            state.next_message_id = max(snapshot.next_message_ids.get(chat_id, 1), max(messages, default=0) + 1)
        for poll_id, (chat_id, message_id, votes) in snapshot.polls.items():
            self.polls[poll_id] = PollState(chat_id, message_id, votes)
        # new polls must not take the ids of saved ones
        self._ids = itertools.count(max((int(p) - _POLL_IDS for p in snapshot.polls), default=0) + 1)
        self.updates.skip_to(snapshot.next_update_id)

    # ----------------------------------------------------------------- helpers

    def _chat(self, params: Json) -> ChatState:
        chat_id = params.get("chat_id")
        if chat_id is None or chat_id == "":
            raise bad_request("chat_id is empty")
        chat = self.chats.get(chat_id) if isinstance(chat_id, int) else self._chat_by_username(chat_id)
        if chat is None or not chat.known:
            raise bad_request("chat not found")
        if chat.blocked:
            raise forbidden("bot was blocked by the user")
        return chat

    def _chat_by_username(self, name: Any) -> ChatState | None:
        if isinstance(name, str) and name.startswith("@"):
            for chat in self.chats.values():
                if chat.chat.get("username") == name[1:]:
                    return chat
        return None

    def _format(self, text: Any, parse_mode: Any, entities: Any) -> tuple[str, list[Json]]:
        return format_text(text, parse_mode, entities, strict_ampersand=self.strict_html, resolve_user=self.users.get)

    def _bot_message(self, params: Json, missing: str) -> tuple[ChatState, Json]:
        """The bot's message named by chat_id + message_id, for edits."""
        if params.get("inline_message_id"):
            raise bad_request("MESSAGE_ID_INVALID")  # the stand-in has no inline mode
        chat = self._chat(params)
        message_id = required_integer(params, "message_id", missing="message identifier is not specified")
        message = chat.messages.get(message_id)
        if message is None:
            raise bad_request(missing)
        if not message["from"]["is_bot"]:
            raise bad_request("message can't be edited")
        return chat, message

    def _reply_to(self, chat: ChatState, params: Json) -> Json | None:
        reply = params.get("reply_parameters")
        if reply is None and params.get("reply_to_message_id") is not None:
            reply = {
                "message_id": params["reply_to_message_id"],
                "allow_sending_without_reply": flag(params, "allow_sending_without_reply"),
            }
        if reply is None:
            return None
        if not isinstance(reply, dict) or not isinstance(reply.get("message_id"), int):
            raise bad_request("can't parse reply parameters JSON object")
        source: ChatState | None = chat
        if reply.get("chat_id") not in (None, chat.id):
            source = self.chats.get(reply["chat_id"])
        replied = source.messages.get(reply["message_id"]) if source else None
        if replied is None:
            if reply.get("allow_sending_without_reply"):
                return None
            raise bad_request("message to be replied not found")
        return {k: v for k, v in replied.items() if k != "reply_to_message"}

    def _send(self, chat: ChatState, params: Json, content: Json) -> Json:
        """Common tail of every send*: reply, markup, storage, notification."""
        kind = refusals.reply_markup_kind(params.get("reply_markup"))
        reply = self._reply_to(chat, params)
        message = {
            "message_id": chat.allocate_message_id(),
            "from": self.bot_user,
            "chat": chat.chat,
            "date": int(time.time()),
            **content,
        }
        if reply is not None:
            message["reply_to_message"] = reply
        if flag(params, "protect_content"):
            message["has_protected_content"] = True
        markup: Json = params.get("reply_markup") or {}
        if kind == "inline":
            if markup["inline_keyboard"]:
                message["reply_markup"] = {"inline_keyboard": markup["inline_keyboard"]}
        elif kind == "keyboard":
            chat.reply_keyboard, chat.force_reply = markup, None
        elif kind == "remove":
            chat.reply_keyboard = None
        elif kind == "force_reply":
            chat.force_reply = markup
        chat.store(message, "sent")
        return message

    @staticmethod
    def _edited(message: Json, drop: tuple[str, ...], changes: Json, *, edit: bool = True) -> Json:
        """A new message dict: `message` without `drop` keys, plus `changes`."""
        edited = {k: v for k, v in message.items() if k not in drop}
        edited.update(changes)
        if edit:
            edited["edit_date"] = int(time.time())
        return edited

    @staticmethod
    def _inline_markup(params: Json) -> Json | None:
        """Edits take only an inline keyboard; an empty one means none."""
        kind = refusals.reply_markup_kind(params.get("reply_markup"))
        if kind is None:
            return None
        if kind != "inline":
            raise bad_request("inline keyboard expected")
        rows = params["reply_markup"]["inline_keyboard"]
        return {"inline_keyboard": rows} if rows else None

    def _new_id(self) -> int:
        return next(self._ids)

    def new_file_number(self) -> int:
        """A fresh number for made-up file ids."""
        return next(self._ids)

    # ------------------------------------------------------- bot and webhook

    @api_method("getMe")
    def get_me(self, params: Json) -> Json:
        return {
            **self.bot_user,
            "can_join_groups": True,
            "can_read_all_group_messages": not self.privacy_mode,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }

    @api_method("logOut")
    def log_out(self, params: Json) -> bool:
        return True

    @api_method("close")
    def close(self, params: Json) -> bool:
        return True

    @api_method("setWebhook")
    async def set_webhook(self, params: Json) -> bool:
        url = string(params, "url") or ""
        if not url:
            await self.delete_webhook(params)  # an empty url deletes the webhook, as deleteWebhook does
            return True
        problem = webhooks.check_url(url)
        secret = string(params, "secret_token") or ""
        problem = problem or webhooks.check_secret(secret)
        if problem:
            raise bad_request(problem)
        max_connections = integer(params, "max_connections", default=webhooks.DEFAULT_MAX_CONNECTIONS)
        max_connections = min(max(max_connections or 1, 1), webhooks.MAX_CONNECTIONS)  # clamped, as Telegram does
        if params.get("allowed_updates") is not None:
            self.updates.set_allowed(params["allowed_updates"])
        drop = flag(params, "drop_pending_updates")
        current = self.webhook
        if (
            current is not None
            and not drop
            and (current.url, current.secret, current.max_connections) == (url, secret, max_connections)
        ):
            return True  # "Webhook is already set"
        await self._stop_webhook()
        if drop:
            self.updates.drop_pending()
        self.webhook_url = url
        self.webhook = webhooks.WebhookDelivery(
            self.updates,
            url,
            secret=secret,
            max_connections=max_connections,
            timing=self.webhook_timing,
            touch=self._touch,
        )
        self.webhook.start()
        return True

    @api_method("deleteWebhook")
    async def delete_webhook(self, params: Json) -> bool:
        await self._stop_webhook()
        self.webhook_url = ""
        if flag(params, "drop_pending_updates"):
            self.updates.drop_pending()
        return True

    async def _stop_webhook(self) -> None:
        delivery, self.webhook = self.webhook, None
        if delivery is not None:
            self.last_webhook_stats = delivery.stats
            await delivery.stop()

    @api_method("getWebhookInfo")
    def get_webhook_info(self, params: Json) -> Json:
        info: Json = {
            "url": self.webhook_url,
            "has_custom_certificate": False,
            "pending_update_count": self.updates.pending_count,
        }
        delivery = self.webhook
        if delivery is not None:
            if delivery.stats.last_error_date:
                info["last_error_date"] = delivery.stats.last_error_date
                info["last_error_message"] = delivery.stats.last_error_message
            info["max_connections"] = delivery.max_connections
            host = webhooks.ip_literal(delivery.url)
            if host:
                info["ip_address"] = host  # Telegram's resolved address; a name is not resolved here
        if self.updates.allowed != DEFAULT_UPDATE_TYPES:
            info["allowed_updates"] = sorted(self.updates.allowed)
        return info

    @api_method("getUpdates")
    async def get_updates(self, params: Json) -> list[Json]:
        if self.webhook_url:
            raise ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; "
                "use deleteWebhook to delete the webhook first",
            )
        if params.get("allowed_updates") is not None:
            self.updates.set_allowed(params["allowed_updates"])
        timeout = params.get("timeout")
        if isinstance(timeout, str):
            try:
                timeout = float(timeout)
            except ValueError:
                timeout = 0
        return await self.updates.get(integer(params, "offset"), integer(params, "limit"), timeout)

    # -------------------------------------------------- commands and profile

    def _commands_key(self, params: Json) -> tuple[str, str]:
        scope = refusals.command_scope_key(params.get("scope"))
        return scope, refusals.check_language_code(params.get("language_code"))

    @api_method("setMyCommands")
    def set_my_commands(self, params: Json) -> bool:
        if "commands" not in params:
            raise bad_request('parameter "commands" is required')
        commands = refusals.check_commands(params["commands"])
        key = self._commands_key(params)
        if commands:
            self.commands[key] = commands
        else:
            self.commands.pop(key, None)  # an empty list is how Telegram deletes them
        return True

    @api_method("getMyCommands")
    def get_my_commands(self, params: Json) -> list[Json]:
        return list(self.commands.get(self._commands_key(params), []))

    @api_method("deleteMyCommands")
    def delete_my_commands(self, params: Json) -> bool:
        self.commands.pop(self._commands_key(params), None)
        return True

    def _set_bot_text(self, params: Json, name: str, maximum: int) -> bool:
        value = string(params, name) or ""
        if utf16_len(value) > maximum:
            raise bad_request(f"bot {name.replace('_', ' ')} is too long")
        self.bot_texts[(name, refusals.check_language_code(params.get("language_code")))] = value
        return True

    def _get_bot_text(self, params: Json, name: str) -> Json:
        language = refusals.check_language_code(params.get("language_code"))
        default = self.bot_user["first_name"] if name == "name" else ""
        return {name: self.bot_texts.get((name, language), self.bot_texts.get((name, ""), default))}

    @api_method("setChatMenuButton")
    def set_chat_menu_button(self, params: Json) -> bool:
        button = params.get("menu_button") or {"type": "default"}
        if not isinstance(button, dict) or button.get("type") not in ("commands", "web_app", "default"):
            raise bad_request("can't parse menu button JSON object")
        if params.get("chat_id") is None:
            self.default_menu_button = {"type": "commands"} if button["type"] == "default" else button
        else:
            self._chat(params).menu_button = None if button["type"] == "default" else button
        return True

    @api_method("getChatMenuButton")
    def get_chat_menu_button(self, params: Json) -> Json:
        if params.get("chat_id") is None:
            return self.default_menu_button
        return self._chat(params).menu_button or self.default_menu_button

    # ---------------------------------------------------------------- chats

    @api_method("getChat")
    def get_chat(self, params: Json) -> Json:
        chat = self._chat(params)
        return {
            **chat.chat,
            "accent_color_id": 0,
            "max_reaction_count": 11,
            "accepted_gift_types": {
                "unlimited_gifts": False,
                "limited_gifts": False,
                "unique_gifts": False,
                "premium_subscription": False,
                "gifts_from_channels": False,
            },
        }

    @api_method("getChatMember")
    def get_chat_member(self, params: Json) -> Json:
        chat = self._chat(params)
        user_id = required_integer(params, "user_id", missing="user_id is empty")
        if user_id == self.bot_id:
            return {"status": "member", "user": self.bot_user}
        user = self.users.get(user_id)
        if user is None or (chat.chat["type"] == "private" and chat.id != user_id):
            raise bad_request("PARTICIPANT_ID_INVALID")
        return {"status": "member", "user": user}

    @api_method("sendChatAction")
    def send_chat_action(self, params: Json) -> bool:
        chat = self._chat(params)
        if params.get("action") not in limits.CHAT_ACTIONS:
            raise bad_request("wrong parameter action in request")
        self._observe(chat, "action", {"action": params["action"]})  # shown as "typing…", never saved
        return True

    # -------------------------------------------------------------- messages

    @api_method("sendMessage")
    def send_message(self, params: Json) -> Json:
        chat = self._chat(params)
        text, entities = self._format(params.get("text"), params.get("parse_mode"), params.get("entities"))
        refusals.check_message_text(text)
        content: dict[str, Any] = {"text": text}
        if entities:
            content["entities"] = entities
        preview = params.get("link_preview_options")
        if preview is not None:
            if not isinstance(preview, dict):
                raise bad_request("can't parse link preview options JSON object")
            content["link_preview_options"] = preview
        return self._send(chat, params, content)

    def _send_media(self, params: Json, kind: str) -> Json:
        """sendPhoto and sendDocument: the caption as Telegram limits it, then the file, uploaded or reused."""
        chat = self._chat(params)
        media = params.get(kind)
        if media is None or media == "":
            raise bad_request(f"there is no {kind} in the request")
        caption, entities = self._format(
            params.get("caption"), params.get("parse_mode"), params.get("caption_entities")
        )
        refusals.check_caption(caption)
        if isinstance(media, dict) and media.get("uploaded"):
            stored = self.files.upload(kind, media["data"], media.get("file_name"), media.get("content_type"))
            self._save_file(stored)
        elif isinstance(media, str):
            stored = self.files.reuse(kind, media)
        else:
            raise bad_request(f"can't parse {kind}: send a file_id, or upload the file")  # the stand-in's wording
        content: dict[str, Any]
        if kind == "photo":
            content = {"photo": [stored.photo_size()]}
        else:
            document = {"file_id": stored.file_id, "file_unique_id": stored.unique_id}
            document.update({"file_name": stored.file_name or "document", "mime_type": stored.mime})
            content = {"document": {**document, "file_size": len(stored.data)}}
        if caption:
            content["caption"] = caption
            if entities:
                content["caption_entities"] = entities
            if kind == "photo" and flag(params, "show_caption_above_media"):
                content["show_caption_above_media"] = True
        if flag(params, "has_spoiler") and kind == "photo":
            content["has_media_spoiler"] = True
        return self._send(chat, params, content)

    def _save_file(self, stored: StoredFile) -> None:
        if self.journal is not None:
            self.journal(Change("file", stored.file_id, stored))

    @api_method("getFile")
    def get_file(self, params: Json) -> Json:
        stored = self.files.by_id.get(string(params, "file_id", missing="file_id is empty") or "")
        if stored is None:
            raise bad_request("invalid file_id")
        return stored.telegram_file()

    @api_method("sendPhoto")
    def send_photo(self, params: Json) -> Json:
        return self._send_media(params, "photo")

    @api_method("sendDocument")
    def send_document(self, params: Json) -> Json:
        return self._send_media(params, "document")

    def _edit_formatted(self, params: Json, field_name: str) -> Json:
        """editMessageText (field "text") and editMessageCaption (field "caption")."""
        chat, message = self._bot_message(params, "message to edit not found")
        entities_key = "entities" if field_name == "text" else "caption_entities"
        if field_name == "text":
            if "text" not in message:
                raise bad_request("there is no text in the message to edit")
            text, entities = self._format(params.get("text"), params.get("parse_mode"), params.get("entities"))
            refusals.check_message_text(text)
        else:
            if not any(key in message for key in _MEDIA_FIELDS):
                raise bad_request("there is no caption in the message to edit")
            text, entities = self._format(
                params.get("caption"), params.get("parse_mode"), params.get("caption_entities")
            )
            refusals.check_caption(text)
        markup = self._inline_markup(params)  # no reply_markup removes the keyboard, as in Telegram
        if (
            message.get(field_name, "") == text
            and message.get(entities_key, []) == entities
            and message.get("reply_markup") == markup
        ):
            raise bad_request(NOT_MODIFIED)
        changes: dict[str, Any] = {field_name: text} if text else {}
        if entities:
            changes[entities_key] = entities
        if markup:
            changes["reply_markup"] = markup
        preview = params.get("link_preview_options")
        if field_name == "text" and isinstance(preview, dict):
            changes["link_preview_options"] = preview
        edited = self._edited(message, (field_name, entities_key, "reply_markup", "link_preview_options"), changes)
        chat.store(edited, "edited")
        return edited

    @api_method("editMessageText")
    def edit_message_text(self, params: Json) -> Json:
        return self._edit_formatted(params, "text")

    @api_method("editMessageCaption")
    def edit_message_caption(self, params: Json) -> Json:
        return self._edit_formatted(params, "caption")

    @api_method("editMessageReplyMarkup")
    def edit_message_reply_markup(self, params: Json) -> Json:
        chat, message = self._bot_message(params, "message to edit not found")
        markup = self._inline_markup(params)
        if message.get("reply_markup") == markup:
            raise bad_request(NOT_MODIFIED)
        edited = self._edited(message, ("reply_markup",), {"reply_markup": markup} if markup else {})
        chat.store(edited, "edited")
        return edited

    @api_method("deleteMessage")
    def delete_message(self, params: Json) -> bool:
        chat = self._chat(params)
        message_id = required_integer(params, "message_id", missing="message identifier is not specified")
        self._delete(chat, message_id, strict=True)
        return True

    @api_method("deleteMessages")
    def delete_messages(self, params: Json) -> bool:
        chat = self._chat(params)
        ids = params.get("message_ids")
        if not isinstance(ids, list) or not 1 <= len(ids) <= 100 or not all(isinstance(i, int) for i in ids):
            raise bad_request("message_ids must be a list of 1-100 message identifiers")
        for message_id in ids:
            self._delete(chat, message_id, strict=False)  # missing ones are skipped
        return True

    def _delete(self, chat: ChatState, message_id: int, strict: bool) -> None:
        message = chat.messages.get(message_id)
        if message is None:
            if strict:
                raise bad_request("message to delete not found")
            return
        if chat.chat["type"] != "private" and not message["from"]["is_bot"]:
            raise bad_request("message can't be deleted")  # the stand-in's bot is no group admin
        chat.remove(message_id)
        poll = message.get("poll")
        if poll and poll["id"] in self.polls:
            self._cancel_poll_timer(self.polls.pop(poll["id"]))

    # --------------------------------------------------------- callback queries

    @api_method("answerCallbackQuery")
    def answer_callback_query(self, params: Json) -> bool:
        query_id = string(params, "callback_query_id") or ""
        query = self.callback_queries.get(query_id)
        if query is None or query.answer is not None or self._now - query.created > self.callback_query_ttl:
            raise bad_request(QUERY_TOO_OLD)
        refusals.check_callback_answer_text(params.get("text"))
        query.answer = params
        for waiter in query.waiters:
            if not waiter.done():
                waiter.set_result(params)
        query.waiters.clear()
        chat = self.chats.get(query.chat_id) if query.chat_id is not None else None
        if chat is not None:
            self._observe(chat, "answered", params)
        return True

    def new_callback_query(self, user: Json, message: Json, data: str) -> Json:
        """The callback_query update for a tap on `message` (registered so it can be answered)."""
        query_id = str(4_000_000_000_000_000_000 + self._new_id())
        chat = self.chats[message["chat"]["id"]]
        now = time.monotonic()
        if len(self.callback_queries) >= _QUERIES_KEPT:
            # a long-running server forgets queries nobody can answer any more
            self.callback_queries = {
                key: query
                for key, query in self.callback_queries.items()
                if now - query.created <= self.callback_query_ttl
            }
        self.callback_queries[query_id] = CallbackQueryState(query_id, chat.id, now)
        return {
            "callback_query": {
                "id": query_id,
                "from": user,
                "message": message,
                "chat_instance": chat.instance,
                "data": data,
            }
        }

    # ----------------------------------------------------------------- polls

    def _poll_text(self, text: Any, parse_mode: Any, entities: Any) -> tuple[str, list[Json]]:
        """Questions and options keep only custom emoji entities, as in Telegram."""
        text, found = self._format(text, parse_mode, entities)
        return text, [e for e in found if e["type"] == "custom_emoji"]

    @api_method("sendPoll")
    def send_poll(self, params: Json) -> Json:
        chat = self._chat(params)
        question, question_entities = self._poll_text(
            params.get("question"), params.get("question_parse_mode"), params.get("question_entities")
        )
        refusals.check_poll_question(question)
        raw_options = params.get("options")
        if not isinstance(raw_options, list):
            raise bad_request("can't parse options JSON object")
        options = []
        for raw in raw_options:
            if isinstance(raw, str):
                raw = {"text": raw}
            if not isinstance(raw, dict) or not isinstance(raw.get("text"), str):
                raise bad_request('can\'t parse InputPollOption: Field "text" must be of type String')
            options.append(self._poll_text(raw["text"], raw.get("text_parse_mode"), raw.get("text_entities")))
        refusals.check_poll_options([text for text, _ in options])
        kind = params.get("type") or "regular"
        if kind not in ("regular", "quiz"):
            raise bad_request("wrong poll type specified")
        multiple = flag(params, "allows_multiple_answers")
        correct = params.get("correct_option_ids")
        if correct is None:
            correct = params.get("correct_option_id")
        poll_number = self._new_id()
        poll: dict[str, Any] = {
            "id": str(_POLL_IDS + poll_number),
            "question": question,
            "options": [
                {
                    "text": text,
                    "voter_count": 0,
                    "persistent_id": f"{poll_number}.{index}",
                    **({"text_entities": ents} if ents else {}),
                }
                for index, (text, ents) in enumerate(options)
            ],
            "total_voter_count": 0,
            "is_closed": flag(params, "is_closed"),
            "is_anonymous": params.get("is_anonymous") is not False,
            "type": kind,
            "allows_multiple_answers": multiple,
            # Telegram's default: regular polls allow changing the vote, quizzes do not
            "allows_revoting": params["allows_revoting"]
            if isinstance(params.get("allows_revoting"), bool)
            else kind == "regular",
            "members_only": flag(params, "members_only"),
        }
        if question_entities:
            poll["question_entities"] = question_entities
        if kind == "quiz":
            poll["correct_option_ids"] = refusals.check_correct_options(correct, len(options), multiple)
        elif correct is not None:
            raise bad_request("correct option IDs can be specified only for quizzes")  # the stand-in's wording
        if params.get("explanation") is not None:
            if kind != "quiz":
                raise bad_request("explanation can be specified only for quizzes")  # the stand-in's wording
            explanation, explanation_entities = self._format(
                params["explanation"], params.get("explanation_parse_mode"), params.get("explanation_entities")
            )
            refusals.check_explanation(explanation)
            if explanation:
                poll["explanation"] = explanation
                if explanation_entities:
                    poll["explanation_entities"] = explanation_entities
        open_period = integer(params, "open_period")
        if open_period is not None:
            low, high = limits.POLL_OPEN_PERIOD
            if not low <= open_period <= high:
                raise bad_request("wrong open period specified")
            poll["open_period"] = open_period
            poll["close_date"] = int(time.time()) + open_period
        message = self._send(chat, params, {"poll": poll})
        state = self.polls[poll["id"]] = PollState(chat.id, message["message_id"])
        self._save_poll(poll["id"], state)
        if open_period is not None and not poll["is_closed"]:
            state.timer = asyncio.get_running_loop().call_later(open_period, self._close_poll, poll["id"], None)
        return message

    @api_method("stopPoll")
    def stop_poll(self, params: Json) -> Json:
        chat = self._chat(params)
        message_id = required_integer(params, "message_id", missing="message identifier is not specified")
        message = chat.messages.get(message_id)
        if message is None or "poll" not in message or not message["from"]["is_bot"]:
            raise bad_request("message with poll to stop not found")
        if message["poll"]["is_closed"]:
            raise bad_request("poll has already been closed")
        markup = self._inline_markup(params)
        poll: Json = self._close_poll(message["poll"]["id"], markup)["poll"]
        return poll

    def _close_poll(self, poll_id: str, markup: Json | None) -> Json:
        state = self.polls[poll_id]
        self._cancel_poll_timer(state)
        chat = self.chats[state.chat_id]
        message = chat.messages[state.message_id]
        changes: dict[str, Any] = {"poll": {**message["poll"], "is_closed": True}}
        if markup:
            changes["reply_markup"] = markup
        # closing a poll is not an edit: no edit_date
        closed = self._edited(message, ("poll", "reply_markup") if markup else ("poll",), changes, edit=False)
        chat.store(closed, "edited")
        if self.poll_state_updates:
            self.updates.push({"poll": closed["poll"]})  # Telegram reports stopped polls
        return closed

    def _save_poll(self, poll_id: str, state: PollState) -> None:
        if self.journal is not None:
            self.journal(Change("poll", poll_id, (state.chat_id, state.message_id, dict(state.votes))))

    @staticmethod
    def _cancel_poll_timer(state: PollState) -> None:
        if state.timer is not None:
            state.timer.cancel()
            state.timer = None

    def vote(self, user: Json, message: Json, option_ids: list[int]) -> list[Json]:
        """Apply a user's vote and return the updates Telegram sends the bot for it."""
        poll = message.get("poll")
        state = self.polls.get(poll["id"]) if poll else None
        if state is None:
            raise LookupError("that message has no poll the bot sent")
        chat = self.chats[state.chat_id]
        current = chat.messages[state.message_id]
        poll = current["poll"]
        if poll["is_closed"]:
            raise ValueError("the poll is closed")
        previous = state.votes.get(user["id"])
        if previous and not poll["allows_revoting"]:
            raise ValueError("this poll does not allow changing the vote")
        if len(option_ids) > 1 and not poll["allows_multiple_answers"]:
            raise ValueError("this poll allows one answer only")
        if any(not 0 <= i < len(poll["options"]) for i in option_ids) or len(set(option_ids)) != len(option_ids):
            raise ValueError(f"option ids {option_ids} out of range for {len(poll['options'])} options")
        if option_ids:
            state.votes[user["id"]] = sorted(option_ids)
        else:
            state.votes.pop(user["id"], None)  # retracting the vote
        counts = [0] * len(poll["options"])
        for chosen in state.votes.values():
            for i in chosen:
                counts[i] += 1
        options = [{**option, "voter_count": count} for option, count in zip(poll["options"], counts, strict=False)]
        poll = {**poll, "options": options, "total_voter_count": len(state.votes)}
        # stored without telling listeners: a vote is the user's doing, not a reaction of the bot
        voted = chat.messages[state.message_id] = {**current, "poll": poll}
        self._save_poll(poll["id"], state)
        self._observe(chat, "voted", voted)
        updates = []
        if not poll["is_anonymous"]:
            updates.append(
                {
                    "poll_answer": {
                        "poll_id": poll["id"],
                        "user": user,
                        "option_ids": sorted(option_ids),
                        "option_persistent_ids": [options[i]["persistent_id"] for i in sorted(option_ids)],
                    }
                }
            )
        if self.poll_state_updates or poll["is_anonymous"]:
            updates.append({"poll": poll})
        return updates

    # ------------------------------------------------- what a user does in the app

    def add_user(self, user: Json) -> ChatState:
        """Register a user (a dict as in updates) and their private chat with the bot, as yet unstarted."""
        self.users[user["id"]] = user
        chat = {"id": user["id"], "type": "private", "first_name": user["first_name"]}
        for key in ("last_name", "username"):
            if user.get(key):
                chat[key] = user[key]
        if self.journal is not None:
            self.journal(Change("user", user["id"], user))
        return self.new_chat(chat, known=False)

    def set_language(self, user_id: int, language_code: str | None) -> Json:
        """The user switched their app's language: their next updates carry the new language_code."""
        user = {k: v for k, v in self.users[user_id].items() if k != "language_code"}
        if language_code:
            user["language_code"] = language_code
        self.users[user_id] = user
        if self.journal is not None:
            self.journal(Change("user", user_id, user))
        return user

    def report_time_zone(self, user_id: int, zone: str) -> None:
        """The user's app told its time zone (the web chat does, once per learner); the first report stands."""
        if user_id in self.time_zones:
            return
        self.time_zones[user_id] = zone
        if self.journal is not None:
            self.journal(Change("time_zone", user_id, zone))

    def time_zone(self, user_id: int) -> str | None:
        """The time zone a user's app reported, if it did. Telegram gives a bot none: never rely on it."""
        return self.time_zones.get(user_id)

    def post(self, chat: ChatState, sender: Json, content: Json, reply_to: Json | int | None = None) -> Json:
        """Store a message `sender` writes in `chat`, as Telegram would show it to the bot."""
        message = {
            "message_id": chat.allocate_message_id(),
            "from": sender,
            "chat": chat.chat,
            "date": int(time.time()),
            **content,
        }
        if reply_to is not None:
            replied = chat.messages.get(reply_to if isinstance(reply_to, int) else reply_to["message_id"])
            if replied is None:
                raise LookupError(f"cannot reply to message {reply_to}: it is not in chat {chat.id}")
            message["reply_to_message"] = {k: v for k, v in replied.items() if k != "reply_to_message"}
        chat.store(message, "sent")
        return message

    def write(self, user_id: int, content: Json, reply_to: Json | int | None = None) -> int | None:
        """The user writes to the bot in their private chat; returns the update id."""
        chat = self.chats[user_id]
        if not chat.known:
            chat.known = True  # the user has started the bot: it may write here now
            if self.journal is not None:
                self.journal(Change("chat", chat.id, chat.chat))
        message = self.post(chat, self.users[user_id], content, reply_to)
        return self.push_update({"message": message})

    def write_text(self, user_id: int, text: str, entities: list[Json] | None = None) -> int | None:
        """A text message, with the bot_command entities the app finds (unless `entities` are given)."""
        content: Json = {"text": text}
        found = command_entities(text) if entities is None else entities
        if found:
            content["entities"] = found
        return self.write(user_id, content)

    def tap(self, user_id: int, chat_id: int, message_id: int, callback_data: str) -> str:
        """The user taps a callback button; returns the callback query id."""
        message = self.chats[chat_id].messages[message_id]
        update = self.new_callback_query(self.users[user_id], message, callback_data)
        self.push_update(update)
        query_id: str = update["callback_query"]["id"]
        return query_id

    def answer_poll(self, user_id: int, chat_id: int, message_id: int, option_ids: list[int]) -> int | None:
        """The user votes (an empty list retracts); returns the first update id, or raises ValueError."""
        message = self.chats[chat_id].messages.get(message_id)
        if message is None:
            raise LookupError(f"message {message_id} is no longer in chat {chat_id}")
        ids = [self.push_update(update) for update in self.vote(self.users[user_id], message, option_ids)]
        return next((i for i in ids if i is not None), None)

    def push_update(self, update: Json) -> int | None:
        """Queue an update for getUpdates; returns its id (None if allowed_updates excludes it)."""
        message = update.get("message") or update.get("edited_message")
        if message is not None and message.get("chat", {}).get("id") is not None:
            self._learn_chat(message)
        return self.updates.push(update)

    def _learn_chat(self, message: Json) -> None:
        """A raw message update makes its chat and sender known, as a real one would."""
        chat = message["chat"]
        state = self.chats.get(chat["id"])
        if state is None:
            state = self.new_chat(chat, known=True)
        state.known = True
        sender = message.get("from")
        if sender and not sender.get("is_bot"):
            self.users.setdefault(sender["id"], sender)
        if "message_id" in message:
            state.messages.setdefault(message["message_id"], message)
            state.next_message_id = max(state.next_message_id, message["message_id"] + 1)

    def commands_for(self, chat_id: int, language_code: str | None) -> list[Json]:
        """The command menu a Telegram app shows in a private chat, for the app's language.

        The narrowest scope with commands wins; within it, the two-letter language before the default.
        """
        language = (language_code or "")[:2].lower()
        for scope in (f"chat:{chat_id}", "all_private_chats", "default"):
            for key in ((scope, language), (scope, "")):
                commands = self.commands.get(key)
                if commands:
                    return list(commands)
        return []


def _register_profile_texts() -> None:
    """setMyName/getMyName, setMyDescription/..., setMyShortDescription/...: one rule, three fields."""
    for method, name, maximum in (
        ("Name", "name", limits.BOT_NAME_MAX),
        ("Description", "description", limits.BOT_DESCRIPTION_MAX),
        ("ShortDescription", "short_description", limits.BOT_SHORT_DESCRIPTION_MAX),
    ):
        api_method(f"setMy{method}")(
            lambda self, params, name=name, maximum=maximum: self._set_bot_text(params, name, maximum)
        )
        api_method(f"getMy{method}")(lambda self, params, name=name: self._get_bot_text(params, name))


_register_profile_texts()
