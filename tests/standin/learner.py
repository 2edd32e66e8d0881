"""Simulated Telegram users: they write, tap buttons, vote, and watch their chats.

A SimLearner does only what a Telegram client lets a person do (tap a button that is
on the message, vote in an open poll, ...) and raises SimulationError otherwise, so a
test cannot pass by doing the impossible. The one escape hatch is
``tap(..., callback_data=...)``, which forges a callback like a modified client could.

Waiting is event driven: a wait registers a listener on the chat, and the stand-in
calls it while handling the bot's API call, so a wait returns as soon as the call that
satisfies it arrives.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from bot.localapi.chats import ChatState
from bot.localapi.text import command_entities

if TYPE_CHECKING:
    from .server import BotApiStandin

Predicate = Callable[[dict], bool]


class SimulationError(Exception):
    """The simulated user was asked to do something a Telegram client cannot do."""


class TapReaction(NamedTuple):
    """Returned by tap_nowait: the injected update and when the bot visibly reacted."""

    update_id: int | None
    query_id: str
    tapped_at: float  # time.monotonic() of the tap
    reacted: asyncio.Future  # resolves with time.monotonic() of the bot's next send/edit/delete in the chat


class ChatView:
    """One chat as its members see it: the bot's messages, current state, and waits on them."""

    def __init__(self, standin: BotApiStandin, state: ChatState):
        self._standin = standin
        self._state = state

    @property
    def chat_id(self) -> int:
        return self._state.id

    @property
    def messages(self) -> list[dict]:
        """The bot's messages in this chat, current state (edits applied, deleted ones gone)."""
        return self._state.bot_messages()

    @property
    def last(self) -> dict | None:
        messages = self._state.messages
        for message_id in reversed(self._state.bot_log):
            if message_id in messages:
                return messages[message_id]
        return None

    @property
    def reply_keyboard(self) -> dict | None:
        """The custom reply keyboard the bot currently shows in this chat (None if removed)."""
        return self._state.reply_keyboard

    def message(self, message_id: int) -> dict | None:
        return self._state.messages.get(message_id)

    def next_reaction(self) -> asyncio.Future:
        """A future for time.monotonic() of the bot's next send, edit or delete in this chat.

        The cheap primitive behind tap_nowait, for benchmarks that time other inputs too.
        """
        future = asyncio.get_running_loop().create_future()

        def listen(kind: str, message: dict) -> bool:
            if not future.done():
                future.set_result(time.monotonic())
            return True

        self._state.listeners.append(listen)
        return future

    def cursor(self) -> int:
        """A position in the bot's message log; pass it as wait_message(since=...)."""
        return len(self._state.bot_log)

    async def wait_message(
        self, predicate: Predicate | None = None, timeout: float = 5.0, since: int | None = None
    ) -> dict:
        """The next new bot message here (after `since`, else after this call) matching predicate."""
        if since is not None:
            for message in self._state.bot_messages(since):
                if predicate is None or predicate(message):
                    return message
        future = asyncio.get_running_loop().create_future()

        def listen(kind: str, message: dict) -> bool:
            if future.done():
                return True
            if kind != "sent":
                return False
            return _settle_with(future, predicate, message)

        self._state.listeners.append(listen)
        return await self._standin.wait_for(future, timeout, f"a new bot message in chat {self.chat_id}")

    async def wait_edit(self, message_id: int, timeout: float = 5.0) -> dict:
        """The new state of message_id after its next edit."""
        future = asyncio.get_running_loop().create_future()

        def listen(kind: str, message: dict) -> bool:
            if future.done():
                return True
            if message["message_id"] != message_id:
                return False
            if kind == "deleted":
                future.set_exception(LookupError(f"message {message_id} was deleted instead of edited"))
            elif kind == "edited":
                future.set_result(message)
            return kind != "sent"

        self._state.listeners.append(listen)
        return await self._standin.wait_for(future, timeout, f"an edit of message {message_id} in chat {self.chat_id}")

    def _post(self, sender: SimLearner, content: dict, reply_to: dict | int | None) -> dict:
        """Store a message `sender` writes here, as Telegram would show it to the bot."""
        try:
            return self._standin.post(self._state, sender.user, content, reply_to)
        except LookupError as exc:
            raise SimulationError(str(exc)) from None


def _settle_with(future: asyncio.Future, predicate: Predicate | None, message: dict) -> bool:
    """Resolve future with message if it matches; a failing predicate fails the wait, not the API call."""
    try:
        if predicate is not None and not predicate(message):
            return False
    except Exception as exc:
        future.set_exception(exc)
        return True
    future.set_result(message)
    return True


def _text_content(text: str, entities: list[dict] | None) -> dict:
    content: dict[str, Any] = {"text": text}
    found = command_entities(text) if entities is None else entities
    if found:
        content["entities"] = found
    return content


class SimLearner(ChatView):
    """A Telegram user; as a ChatView it is the user's private chat with the bot."""

    def __init__(self, standin: BotApiStandin, user: dict, state: ChatState):
        super().__init__(standin, state)
        self._user_id = user["id"]

    @property
    def user(self) -> dict:
        """The user as the bot sees them now (a language switch replaces it)."""
        return self._standin.users[self._user_id]

    @property
    def user_id(self) -> int:
        return self._user_id

    # ------------------------------------------------------------- writing

    def _write(self, content: dict, reply_to: dict | int | None = None) -> int | None:
        if self._state.blocked:
            self.unblock()  # writing to a blocked bot restarts it, as in Telegram
        try:
            return self._standin.write(self.user_id, content, reply_to)
        except LookupError as exc:
            raise SimulationError(str(exc)) from None

    def send_nowait(
        self, text: str, *, reply_to: dict | int | None = None, entities: list[dict] | None = None
    ) -> int | None:
        """Inject a text message (bot_command entities found as Telegram does); returns the update id."""
        return self._write(_text_content(text, entities), reply_to)

    async def send(
        self, text: str, *, reply_to: dict | int | None = None, entities: list[dict] | None = None
    ) -> int | None:
        return self.send_nowait(text, reply_to=reply_to, entities=entities)

    async def send_sticker(self, emoji: str = "👍") -> int | None:
        number = self._standin.new_file_number()
        return self._write(
            {
                "sticker": {
                    "file_id": f"CAACAgIAAxkBAAI{number:010d}",
                    "file_unique_id": f"AgAD{number:08d}",
                    "type": "regular",
                    "width": 512,
                    "height": 512,
                    "is_animated": False,
                    "is_video": False,
                    "emoji": emoji,
                }
            }
        )

    async def send_photo(self, caption: str | None = None) -> int | None:
        number = self._standin.new_file_number()
        sizes = [
            {
                "file_id": f"AgACAgIAAxkBAAI{number:010d}{s}",
                "file_unique_id": f"AQAD{number:08d}{s}",
                "width": w,
                "height": w,
                "file_size": w * 40,
            }
            for s, w in (("s", 90), ("m", 320), ("x", 800))
        ]
        content: dict[str, Any] = {"photo": sizes}
        if caption:
            content["caption"] = caption
        return self._write(content)

    async def edit(self, message_id: int, text: str) -> int | None:
        """Edit one of this user's own messages: an edited_message update."""
        state = self._state
        old = state.messages.get(message_id)
        if old is None or old["from"]["id"] != self.user_id or "text" not in old:
            raise SimulationError(f"message {message_id} is not a text message of {self.user['first_name']}")
        edited = {k: v for k, v in old.items() if k != "entities"}
        edited.update(_text_content(text, None), edit_date=int(time.time()))
        state.store(edited, "edited")
        return self._standin.inject_nowait({"edited_message": edited})

    # ------------------------------------------------------------ buttons

    def tap_nowait(self, message: dict, text: str | None = None, *, callback_data: str | None = None) -> TapReaction:
        """Tap a callback button (by text, or forge callback_data) without waiting for anything."""
        state, current = self._live(message)
        if callback_data is None:
            if text is None:
                raise SimulationError("tap needs the button text or callback_data")
            button = _find_button(current, text)
            if "callback_data" not in button:
                raise SimulationError(f"button {button['text']!r} sends no callback query: {button}")
            callback_data = button["callback_data"]
        update = self._standin.new_callback_query(self.user, current, callback_data)
        chat = self if state is self._state else ChatView(self._standin, state)  # a tap in a group
        reacted = chat.next_reaction()
        tapped_at = time.monotonic()
        update_id = self._standin.inject_nowait(update)
        return TapReaction(update_id, update["callback_query"]["id"], tapped_at, reacted)

    async def tap(self, message: dict, text: str | None = None, *, callback_data: str | None = None) -> str:
        """Tap a button; returns the callback query id (see wait_callback_answer)."""
        return self.tap_nowait(message, text, callback_data=callback_data).query_id

    async def wait_callback_answer(self, query_id: str, timeout: float = 5.0) -> dict:
        """The answerCallbackQuery params the bot sent for query_id."""
        query = self._standin.callback_queries[query_id]
        if query.answer is not None:
            return query.answer
        future = asyncio.get_running_loop().create_future()
        query.waiters.append(future)
        return await self._standin.wait_for(future, timeout, f"answerCallbackQuery for query {query_id}")

    # -------------------------------------------------------------- polls

    async def answer_poll(self, message: dict, option: int | Sequence[int]) -> int | None:
        """Vote (an empty list retracts); returns the id of the poll_answer (or poll) update."""
        self._live(message)
        option_ids = [option] if isinstance(option, int) else list(option)
        try:
            return self._standin.answer_poll(self.user_id, message["chat"]["id"], message["message_id"], option_ids)
        except (LookupError, ValueError) as exc:
            raise SimulationError(str(exc)) from None

    # --------------------------------------------------------- membership

    def block(self) -> int | None:
        """Block the bot: its sends here fail with 403, and it gets a my_chat_member update."""
        self._state.blocked = True
        return self._membership("member", "kicked")

    def unblock(self) -> int | None:
        self._state.blocked = False
        return self._membership("kicked", "member")

    def _membership(self, old: str, new: str) -> int | None:
        bot = self._standin.bot_user

        def member(status: str) -> dict:
            return {"status": status, "user": bot, **({"until_date": 0} if status == "kicked" else {})}

        return self._standin.inject_nowait(
            {
                "my_chat_member": {
                    "chat": self._state.chat,
                    "from": self.user,
                    "date": int(time.time()),
                    "old_chat_member": member(old),
                    "new_chat_member": member(new),
                }
            }
        )

    def _live(self, message: dict) -> tuple[ChatState, dict]:
        state = self._standin.chats.get(message["chat"]["id"])
        current = state.messages.get(message["message_id"]) if state else None
        if current is None:
            raise SimulationError(f"message {message['message_id']} is no longer in chat {message['chat']['id']}")
        return state, current


class SimGroup(ChatView):
    """A group the bot is a member of; learners write in it with send(learner, text)."""

    async def send(self, learner: SimLearner, text: str, *, reply_to: dict | int | None = None) -> int | None:
        """Post in the group; None when privacy mode keeps the message from the bot."""
        message = self._post(learner, _text_content(text, None), reply_to)
        if not self._delivered(message):
            return None
        return self._standin.inject_nowait({"message": message})

    def _delivered(self, message: dict) -> bool:
        """Privacy mode: commands (not addressed to another bot) and replies to the bot only."""
        if not self._standin.privacy_mode:
            return True
        replied = message.get("reply_to_message")
        if replied and replied["from"]["id"] == self._standin.bot_id:
            return True
        for entity in message.get("entities", ()):
            if entity["type"] == "bot_command" and entity["offset"] == 0:
                command = message["text"][: entity["length"]]
                _, _, addressee = command.partition("@")
                return not addressee or addressee.lower() == self._standin.bot_user["username"].lower()
        return False


def _find_button(message: dict, text: str) -> dict:
    buttons = [b for row in message.get("reply_markup", {}).get("inline_keyboard", ()) for b in row]
    exact = [b for b in buttons if b["text"] == text]
    if exact:
        return exact[0]
    partial = [b for b in buttons if text in b["text"]]
    if len(partial) == 1:
        return partial[0]
    shown = [b["text"] for b in buttons]
    if partial:
        raise SimulationError(f"{text!r} matches several buttons: {[b['text'] for b in partial]}")
    raise SimulationError(f"no button with {text!r} on message {message['message_id']}; buttons: {shown}")
