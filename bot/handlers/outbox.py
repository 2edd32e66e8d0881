"""Replies through the outbox (bot.storage.outbox): each update's replies are stored with what it changes, in one
transaction; after the commit they go out in order, each marked sent; a replay of an update that stored replies
sends those never marked sent instead of running its flow again.

Why: a replay runs over the state the update itself stored. A graded run that passed took the learner out of practice,
so its replay found them outside it and showed "(no output)" where the verdict was due. What the update decided is
stored; its replay only finishes showing it.

Also the Telegram calls every reply is made of, shared with ``common``: a new message, an edit in place (a new
message where the old one cannot be edited), buttons taken off.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Sequence
from contextvars import ContextVar

from telegram import Bot, InlineKeyboardMarkup, LinkPreviewOptions, Message, Update
from telegram.constants import ParseMode
from telegram.error import BadRequest, TelegramError

from bot.context import Services
from bot.errors import ClaimLost, StorageError
from bot.render import Screen
from bot.safehtml import Html
from bot.storage.outbox import Reply, ReplyKind, StoredReply
from bot.telegram_rules.html import HtmlError
from bot.telegram_rules.text import stored

log = logging.getLogger(__name__)

NO_PREVIEW = LinkPreviewOptions(is_disabled=True)


# Telegram's calls


async def send_message(bot: Bot, chat_id: int, screen: Screen) -> Message:
    """Send ``screen`` as a new message."""
    return await bot.send_message(
        chat_id,
        screen.text,
        parse_mode=ParseMode.HTML,
        reply_markup=screen.buttons,
        link_preview_options=NO_PREVIEW,
    )


async def retire_keyboard(bot: Bot, chat_id: int, message_id: int) -> None:
    """Take the buttons off a message that a newer screen supersedes.

    Telegram refuses an edit that changes nothing ("message is not modified": it has no buttons already) and one
    of a message gone or too old to edit: each leaves the old buttons where they are, which is harmless.
    """
    try:
        await bot.edit_message_reply_markup(chat_id=chat_id, message_id=message_id, reply_markup=None)
    except BadRequest as exc:
        reason = exc.message.lower()
        if not any(r in reason for r in ("message is not modified", "message to edit not found", "can't be edited")):
            raise
        log.debug("buttons of message %s in chat %s stay (%s)", message_id, chat_id, reason)


async def edit_or_send(bot: Bot, chat_id: int, message: Message | int | None, screen: Screen) -> int:
    """Show ``screen`` in ``message`` (or the message with that id), edited in place; send it anew if that message
    cannot be edited, or if there is none. Return the id of the message that now shows the screen.

    An edit that would change nothing is not sent: Telegram refuses it ("message is not modified"), and it costs a
    request under the flood limit.
    """
    if isinstance(message, Message) and shows(message, screen):
        return message.message_id
    message_id = message if isinstance(message, int) or message is None else message.message_id
    if message_id is not None:
        try:
            await bot.edit_message_text(
                screen.text,
                chat_id=chat_id,
                message_id=message_id,
                parse_mode=ParseMode.HTML,
                reply_markup=screen.buttons,
                link_preview_options=NO_PREVIEW,
            )
            return message_id
        except BadRequest as exc:
            reason = exc.message.lower()
            # Still harmless: the message changed between the tap and this edit (a double tap, a replay).
            if "message is not modified" in reason:
                return message_id
            if not any(r in reason for r in ("message to edit not found", "can't be edited", "no text in the message")):
                raise
            log.info("message %s in chat %s cannot be edited (%s); sending a new one", message_id, chat_id, reason)
    sent = await send_message(bot, chat_id, screen)
    return sent.message_id


def shows(message: Message, screen: Screen) -> bool:
    """Return whether ``message``, as Telegram last showed it, already shows ``screen``: text, entities, buttons.

    The screen's HTML is read as Telegram reads it (bot.telegram_rules).
    """
    # Buttons first: they are cheap to compare and differ on most taps (a slide turned), sparing the parse.
    if message.text is None or message.reply_markup != screen.buttons:
        return False
    try:
        text, entities = stored(screen.text)
    except HtmlError:
        return False  # Telegram would refuse it; let the edit say so
    shown = [entity.to_dict() for entity in message.entities]
    return message.text == text and shown == entities


# Replies as the outbox keeps them


def keyboard(markup: InlineKeyboardMarkup | None) -> str | None:
    """Return inline buttons as the outbox stores them: Telegram's JSON."""
    return None if markup is None else json.dumps(markup.to_dict(), ensure_ascii=False, separators=(",", ":"))


def screen_of(reply: Reply) -> Screen:
    """Return the screen a stored reply shows."""
    buttons = InlineKeyboardMarkup.de_json(json.loads(reply.buttons)) if reply.buttons is not None else None
    return Screen(Html(reply.text or ""), buttons)


def marked(reply: Reply, shown: int) -> bool:
    """Whether a reply, once shown in message ``shown``, is marked sent: a new message (sent again, it would be a
    second one), or an edit that had to become one. An edit that went where it was stored to go is not: sent again,
    it changes nothing, and the message it shows in was known, and stored, before it went out."""
    return reply.kind is ReplyKind.SEND or (reply.kind is ReplyKind.EDIT and shown != reply.message_id)


async def deliver(bot: Bot, reply: Reply, tapped: Message | None = None) -> int:
    """Send one reply; return the id of the message that shows it. ``tapped``: the message as the update saw it,
    which an edit of it that would change nothing spares sending."""
    match reply.kind:
        case ReplyKind.SEND:
            return (await send_message(bot, reply.chat_id, screen_of(reply))).message_id
        case ReplyKind.EDIT:
            target: Message | int | None = reply.message_id
            if tapped is not None and tapped.message_id == reply.message_id:
                target = tapped
            return await edit_or_send(bot, reply.chat_id, target, screen_of(reply))
        case ReplyKind.RETIRE:
            if reply.message_id is None:
                raise ValueError("a reply taking buttons off names no message")
            await retire_keyboard(bot, reply.chat_id, reply.message_id)
            return reply.message_id


# A new message sent and not marked yet: (update, position, user, message). It is marked just before the update's
# next reply goes out; if none does, never: once its update is handled (the inbox's own write, which comes anyway) it
# is never replayed. So a graded run's verdict costs no write after its commit, and a kill still repeats at most one
# message: the last one sent, whose mark was still to come.
_unmarked: ContextVar[tuple[int, int, int, int] | None] = ContextVar("unmarked", default=None)


async def _mark_last(services: Services) -> None:
    held = _unmarked.get()
    if held is not None:
        _unmarked.set(None)
        update_id, position, user_id, message_id = held
        await services.db.reply_sent(update_id, position, user_id, message_id, None)


async def send_stored(
    services: Services,
    bot: Bot,
    update_id: int | None,
    user_id: int,
    replies: Sequence[StoredReply],
    tapped: Message | None = None,
) -> tuple[int, ...]:
    """Send, in order, the replies not marked sent, marking each one sent that needs it (``marked``: a new message
    just before the next reply goes out, see ``_unmarked``); return the ids of the messages showing each reply (sent
    ones included). Without ``update_id`` (an update that did not come through the inbox) nothing was stored, and
    nothing is marked."""
    shown: list[int] = []
    for stored_reply in replies:
        reply = stored_reply.reply
        if stored_reply.sent and stored_reply.shown is not None:
            shown.append(stored_reply.shown)
            continue
        await _mark_last(services)
        try:
            message_id = await deliver(bot, reply, tapped)
        except TelegramError:
            if reply.kind is ReplyKind.EDIT and reply.reader is not None and reply.message_id is not None:
                # Stored before it was sent, the learner's view says the message shows this screen; it does not.
                await services.db.reader_not_shown(user_id, reply.message_id)
            raise
        if update_id is not None and marked(reply, message_id):
            if reply.kind is ReplyKind.SEND and reply.reader is None:
                _unmarked.set((update_id, stored_reply.position, user_id, message_id))
            else:
                # Marked at once: the learner's next update reads the message edited in place.
                await services.db.reply_sent(update_id, stored_reply.position, user_id, message_id, reply.reader)
        if reply.supersedes and reply.kind is ReplyKind.SEND and reply.buttons is not None:
            services.superseded_keyboards[user_id] = message_id
        shown.append(message_id)
    return tuple(shown)


async def resend(services: Services, bot: Bot, update: Update) -> bool:
    """For an update handled again (a replay after a crash, a redelivery taken over): send the replies it stored and
    never marked sent; return whether it stored any, in which case its flow must not run again."""
    try:
        replies = await services.db.replies(update.update_id)
    except (sqlite3.Error, StorageError):
        log.exception("cannot read the replies of update %s; handling it again", update.update_id)
        return False
    if not replies:
        return False
    user = update.effective_user
    unsent = sum(not r.sent for r in replies)
    log.info(
        "update %s stored %d replies (%d not known sent): sending those, not deciding again",
        update.update_id,
        len(replies),
        unsent,
    )
    try:
        await send_stored(services, bot, update.update_id, user.id if user else replies[0].reply.chat_id, replies)
    except ClaimLost as exc:
        log.warning("update %s: %s", update.update_id, exc)
        return True  # another process sends them
    except (TelegramError, sqlite3.Error, StorageError):
        log.exception("the stored replies of update %s were not all sent", update.update_id)
    query = update.callback_query
    if query is not None:
        # The tap's spinner stops (its toast was not stored: bot.handlers.common.button answers it after the flow).
        try:
            await query.answer()
        except (TelegramError, ClaimLost) as exc:
            log.debug("replayed tap %s not answered: %s", query.id, exc)
    return True
