"""What every handler shares: loading the learner, unpacking a tap, replying, and editing in place."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from telegram import CallbackQuery, LinkPreviewOptions, MaybeInaccessibleMessage, Message, Update
from telegram.constants import ParseMode
from telegram.error import BadRequest

from bot import logs
from bot.callbacks import CallbackData, CallbackDataError
from bot.changes import Change, Event, ReaderAt
from bot.context import CourseContext, stored_learner
from bot.flows.outcome import Outcome, Show, Where, button_refused
from bot.handlers import comeback
from bot.i18n import current_language
from bot.render import Screen
from bot.snapshot import Snapshot
from bot.telegram_rules.html import HtmlError
from bot.telegram_rules.text import stored

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
        stored = stored_learner()
        found, place, rhythm = stored if stored is not None else (None, None, None)
        db = context.services.db
        learner = await db.noted(found, user.id, chat.id if chat else user.id, user.language_code)
        context.snapshot = Snapshot(db, learner, place, rhythm)
        comeback.begin_update()
        await handler(update, context)
        await comeback.follow_up(context)  # the reminders' offer, the completion card, the review's next card
        # The learner's habit (the reminder's hour), when no write of the update noted it: a write once a step.
        await comeback.note_activity(context)

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
            context.services.faults.reached("button:answered")

        return wrapper

    return decorate


async def refuse(update: Update) -> None:
    """Answer a tap whose data this bot never made: forged, garbled or from an old version."""
    query = update.callback_query
    if query is None:
        return
    log.info("refused callback data %r from user %s", query.data, query.from_user.id)
    await answer(query, button_refused())


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


async def retire_keyboard(context: CourseContext, chat_id: int, message_id: int) -> None:
    """Take the buttons off a message that a newer screen supersedes.

    Telegram refuses an edit that changes nothing ("message is not modified": it has no buttons already) and one
    of a message gone or too old to edit: each leaves the old buttons where they are, which is harmless.
    """
    try:
        await context.bot.edit_message_reply_markup(chat_id=chat_id, message_id=message_id, reply_markup=None)
    except BadRequest as exc:
        reason = exc.message.lower()
        if not any(r in reason for r in ("message is not modified", "message to edit not found", "can't be edited")):
            raise
        log.debug("buttons of message %s in chat %s stay (%s)", message_id, chat_id, reason)


async def reply(update: Update, context: CourseContext, screen: Screen) -> Message:
    """Send ``screen`` as a new message to the chat the update came from."""
    chat = update.effective_chat
    return await send(context, chat.id if chat else context.learner.chat_id, screen)


async def show(
    context: CourseContext, message: MaybeInaccessibleMessage | int | None, chat_id: int, screen: Screen
) -> int:
    """Show ``screen`` in ``message`` (or the message with that id), edited in place; send it anew if that
    message cannot be edited, or if there is none.

    Returns the id of the message that now shows the screen. An edit that would change nothing is not sent:
    Telegram refuses it ("message is not modified"), and it costs a request under the flood limit.
    """
    if isinstance(message, Message) and shows(message, screen):
        return message.message_id
    message_id = message if isinstance(message, int) or message is None else message.message_id
    if message_id is not None:
        try:
            await context.bot.edit_message_text(
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
    sent = await send(context, chat_id, screen)
    return sent.message_id


async def show_in_tapped(update: Update, context: CourseContext, screen: Screen) -> int:
    """Show ``screen`` in the message whose button was tapped (see show); return the id of the message showing it."""
    message = tapped_message(update)
    return await show(context, message, message.chat.id if message else context.learner.chat_id, screen)


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


@dataclass(frozen=True)
class Carried:
    """What carrying out an outcome did."""

    stored: bool  # False: what it was decided over changed meanwhile, and nothing of it was stored
    shown: tuple[int, ...]  # the ids of the messages showing its screens, in order


async def carry_out(update: Update, context: CourseContext, outcome: Outcome, *, feature: str) -> Carried:
    """Store an outcome in one transaction keyed by the update and show its screens, in the order it asks for
    (see Outcome.show_first); see Carried.

    A new message that becomes the one edited in place is known only once sent: it is noted in a second write.
    ``feature`` names the fault points passed (bot.faults): ``<feature>:shown`` and ``<feature>:stored``.
    """
    faults = context.services.faults
    if outcome.show_first:
        shown = await _show_screens(update, context, outcome)
        faults.reached(f"{feature}:shown")
        readers = [
            ReaderAt(message_id, s.reader) for s, message_id in zip(outcome.screens, shown, strict=True) if s.reader
        ]
        stored = await store(context, [*outcome.changes, *readers], outcome.events)
        faults.reached(f"{feature}:stored")
        return Carried(stored, shown)
    stored = await store(context, outcome.changes, outcome.events)
    faults.reached(f"{feature}:stored")
    if not stored:
        return Carried(False, ())
    shown = await _show_screens(update, context, outcome)
    faults.reached(f"{feature}:shown")
    readers = [ReaderAt(message_id, s.reader) for s, message_id in zip(outcome.screens, shown, strict=True) if s.reader]
    if readers:
        await store(context, readers)
    return Carried(True, shown)


async def _show_screens(update: Update, context: CourseContext, outcome: Outcome) -> tuple[int, ...]:
    """Show the outcome's screens; return the ids of the messages showing them."""
    shown: list[int] = []
    for screen in outcome.screens:
        if screen.where is Where.TAPPED:
            shown.append(await show_in_tapped(update, context, screen.screen))
        else:
            shown.append(await send_shown(context, context.learner.chat_id, screen))
    return tuple(shown)


async def send_shown(context: CourseContext, chat_id: int, shown: Show) -> int:
    """Send a screen as a new message; one that supersedes takes the buttons off the last such screen first."""
    services, user_id = context.services, context.learner.user_id
    if shown.supersedes and (previous := services.superseded_keyboards.pop(user_id, None)) is not None:
        await retire_keyboard(context, chat_id, previous)
    sent = await send(context, chat_id, shown.screen)
    if shown.supersedes and shown.screen.buttons is not None:
        services.superseded_keyboards[user_id] = sent.message_id
    return sent.message_id


async def store(context: CourseContext, changes: Sequence[Change], events: Sequence[Event] = ()) -> bool:
    """Store what the update changes and the events it records in one transaction, keyed by the update, in the
    course language the learner is shown; False if a drill attempt changed meanwhile (nothing stored).

    What they mean for review and the streak (bot.handlers.comeback) is stored with them, in the same transaction,
    and so is the learner's activity, by the update's first write that can (comeback.activity).
    """
    changes = [*changes, *await comeback.changes_for(context, changes, events)]
    noted = comeback.activity(context)
    written = await context.services.db.write_outcome(
        context.learner.user_id,
        [*changes, *noted],
        events,
        language=current_language(),
        update_id=logs.UPDATE_ID.get(),
    )
    if written.stored:
        comeback.stored(changes)  # what follows them comes after the update's screens (common.for_learner)
        await comeback.activity_stored(context, noted, written.activity_added)
    return written.stored
