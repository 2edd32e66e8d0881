"""Per-chat state: the messages as they are now, and the hooks that wake waiting tests.

Message dicts are never mutated after they are stored: an edit stores a new dict.
So a message a test holds is a snapshot of that moment, and handing out the stored
dicts needs no copying (the benchmark reads them on every step).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# A listener gets (kind, message) for kind in "sent", "edited", "deleted" about the bot's
# messages, and returns True when it is finished and should be dropped.
Listener = Callable[[str, dict[str, Any]], bool]
# An observer sees every change in the chat, both sides: (chat, kind, payload) for kind in
# "sent", "edited", "deleted" (payload: the message), "voted" (the poll message after a
# vote), "answered" (the answerCallbackQuery params) and "action" (sendChatAction's action,
# {"action": "typing"}). Clients and the state store observe.
Observer = Callable[["ChatState", str, dict[str, Any]], None]


class ChatState:
    __slots__ = (
        "blocked",
        "bot_log",
        "chat",
        "force_reply",
        "instance",
        "known",
        "listeners",
        "menu_button",
        "messages",
        "next_message_id",
        "observe",
        "reply_keyboard",
    )

    def __init__(self, chat: dict[str, Any], *, known: bool, observe: Observer | None = None):
        self.chat = chat  # the Chat object as it appears in messages
        self.known = known  # a private chat becomes known when the user first writes
        self.blocked = False  # the user blocked the bot: sending fails with 403
        self.messages: dict[int, dict[str, Any]] = {}  # message_id -> current state, both directions
        self.bot_log: list[int] = []  # ids of the bot's messages in the order they were sent
        self.next_message_id = 1
        self.listeners: list[Listener] = []
        self.observe = observe
        self.reply_keyboard: dict[str, Any] | None = None  # the custom keyboard the user sees now
        self.force_reply: dict[str, Any] | None = None
        self.instance = str(8_000_000_000_000_000_000 + abs(chat["id"]) * 7919 % 10**18)
        self.menu_button: dict[str, Any] | None = None

    @property
    def id(self) -> int:
        chat_id: int = self.chat["id"]
        return chat_id

    def allocate_message_id(self) -> int:
        message_id = self.next_message_id
        self.next_message_id += 1
        return message_id

    def bot_messages(self, since: int = 0) -> list[dict[str, Any]]:
        """The bot's messages (current state, deleted ones left out), in send order."""
        messages = self.messages
        return [messages[i] for i in self.bot_log[since:] if i in messages]

    def store(self, message: dict[str, Any], kind: str) -> None:
        """Store a new or edited message; the bot's own ones are logged and announced."""
        self.messages[message["message_id"]] = message
        if message["from"]["is_bot"]:
            if kind == "sent":
                self.bot_log.append(message["message_id"])
            self.notify(kind, message)
        if self.observe is not None:
            self.observe(self, kind, message)

    def remove(self, message_id: int) -> dict[str, Any] | None:
        message = self.messages.pop(message_id, None)
        if message is not None:
            self.notify("deleted", message)
            if self.observe is not None:
                self.observe(self, "deleted", message)
        return message

    def notify(self, kind: str, message: dict[str, Any]) -> None:
        if self.listeners:
            self.listeners = [listen for listen in self.listeners if not listen(kind, message)]
