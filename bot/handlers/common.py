"""What every handler shares: loading the learner, unpacking a tap, replying, and editing in place."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from telegram import CallbackQuery, LinkPreviewOptions, MaybeInaccessibleMessage, Message, Update
from telegram.constants import ParseMode
from telegram.error import BadRequest

from bot.callbacks import CallbackData, CallbackDataError
from bot.context import CourseContext, stored_learner
from bot.i18n import _
from bot.render import Screen

log = logging.getLogger(__name__)

NO_PREVIEW = LinkPreviewOptions(is_disabled=True)

Handler = Callable[[Update, CourseContext], Coroutine[Any, Any, None]]
D = TypeVar("D", bound=CallbackData)
# A button handler gets the tap's typed data and returns the toast to answer the tap with, if any.
ButtonHandler = Callable[[Update, CourseContext, D], Coroutine[Any, Any, str | None]]


def for_learner(handler: Handler) -> Handler:
    """Run ``handler`` for the update's learner, created on first contact (the update's language is set already)."""

    @functools.wraps(handler)
    async def wrapper(update: Update, context: CourseContext) -> None:
        user = update.effective_user
        if user is None or user.is_bot:
            return
        chat = update.effective_chat
        context.learner = await context.services.db.noted(
            stored_learner(), user.id, chat.id if chat else user.id, user.language_code
        )
        await handler(update, context)

    return wrapper


def button(kind: type[D]) -> Callable[[ButtonHandler[D]], Handler]:
    """Wrap a button handler: unpack its typed data, run it for the learner, answer the tap once."""

    def decorate(handler: ButtonHandler[D]) -> Handler:
        @for_learner
        @functools.wraps(handler)
        async def wrapper(update: Update, context: CourseContext) -> None:
            query = update.callback_query
            if query is None:
                return
            try:
                data: CallbackData | None = CallbackData.unpack(query.data)
            except CallbackDataError:
                data = None
            if not isinstance(data, kind):
                await refuse(update)
                return
            toast = await handler(update, context, data)
            await answer(query, toast)

        return wrapper

    return decorate


def lesson_gone() -> str:
    """Return the toast for a button naming a lesson the course no longer has."""
    return _("This lesson is no longer in the course. Send /lessons to see the course.")


async def refuse(update: Update) -> None:
    """Answer a tap whose data this bot never made: forged, garbled or from an old version."""
    query = update.callback_query
    if query is None:
        return
    log.info("refused callback data %r from user %s", query.data, query.from_user.id)
    await answer(query, button_refused())


def button_refused() -> str:
    """Return the toast for a tap whose data this bot never made."""
    return _("This button is not valid any more. Send /lessons to see the course.")


async def answer(query: CallbackQuery, text: str | None = None) -> None:
    """Answer a button tap; a tap too old to answer (e.g. from before a restart) is fine."""
    try:
        await query.answer(text)
    except BadRequest as exc:
        if "query is too old" not in exc.message and "query id is invalid" not in exc.message.lower():
            raise
        log.debug("callback query %s expired before it was answered", query.id)


def tapped_message(update: Update) -> MaybeInaccessibleMessage | None:
    """Return the message whose button was tapped, if Telegram says which."""
    return update.callback_query.message if update.callback_query else None


async def send(context: CourseContext, chat_id: int, screen: Screen) -> Message:
    """Send ``screen`` as a new message."""
    return await context.bot.send_message(
        chat_id,
        screen.text,
        parse_mode=ParseMode.HTML,
        reply_markup=screen.buttons,
        link_preview_options=NO_PREVIEW,
    )


async def reply(update: Update, context: CourseContext, screen: Screen) -> Message:
    """Send ``screen`` as a new message to the chat the update came from."""
    chat = update.effective_chat
    return await send(context, chat.id if chat else context.learner.chat_id, screen)


async def show(context: CourseContext, message: MaybeInaccessibleMessage | None, chat_id: int, screen: Screen) -> int:
    """Show ``screen`` in ``message``, edited in place; send it anew if that message cannot be edited.

    Returns the id of the message that now shows the screen.
    """
    if message is not None:
        try:
            await context.bot.edit_message_text(
                screen.text,
                chat_id=chat_id,
                message_id=message.message_id,
                parse_mode=ParseMode.HTML,
                reply_markup=screen.buttons,
                link_preview_options=NO_PREVIEW,
            )
            return message.message_id
        except BadRequest as exc:
            reason = exc.message.lower()
            # A double tap edits to what is already shown: the learner sees the right slide.
            if "message is not modified" in reason:
                return message.message_id
            if not any(r in reason for r in ("message to edit not found", "can't be edited", "no text in the message")):
                raise
            log.info(
                "message %s in chat %s cannot be edited (%s); sending a new one", message.message_id, chat_id, reason
            )
    sent = await send(context, chat_id, screen)
    return sent.message_id


async def show_in_tapped(update: Update, context: CourseContext, screen: Screen) -> int:
    """Show ``screen`` in the message whose button was tapped (see show); return the id of the message showing it."""
    message = tapped_message(update)
    return await show(context, message, message.chat.id if message else context.learner.chat_id, screen)
