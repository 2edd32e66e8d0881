"""What every handler shares: loading the learner, unpacking a tap, replying, and editing in place."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Coroutine, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from telegram import CallbackQuery, MaybeInaccessibleMessage, Message, Update
from telegram.error import BadRequest

from bot import logs, retention_render
from bot.callbacks import CallbackData, CallbackDataError
from bot.changes import Change, Event, ReaderAt, RemindersOffered
from bot.context import CourseContext, stored_learner
from bot.flows.outcome import Outcome, Where, button_refused
from bot.handlers import comeback, outbox
from bot.handlers.outbox import NO_PREVIEW as NO_PREVIEW  # refresh's edits share it
from bot.handlers.outbox import shows as shows
from bot.i18n import current_language
from bot.render import Screen
from bot.snapshot import Snapshot
from bot.storage.outbox import Reply, ReplyKind, StoredReply

log = logging.getLogger(__name__)

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
    """Send ``screen`` as a new message (outside the outbox: see carry_out)."""
    return await outbox.send_message(context.bot, chat_id, screen)


async def retire_keyboard(context: CourseContext, chat_id: int, message_id: int) -> None:
    """Take the buttons off a message that a newer screen supersedes (see outbox.retire_keyboard)."""
    await outbox.retire_keyboard(context.bot, chat_id, message_id)


async def reply(update: Update, context: CourseContext, screen: Screen) -> Message:
    """Send ``screen`` as a new message to the chat the update came from."""
    chat = update.effective_chat
    return await send(context, chat.id if chat else context.learner.chat_id, screen)


async def show(
    context: CourseContext, message: MaybeInaccessibleMessage | int | None, chat_id: int, screen: Screen
) -> int:
    """Show ``screen`` in ``message`` (or the message with that id), edited in place; send it anew if that
    message cannot be edited, or if there is none (see outbox.edit_or_send). Returns the id of the message that
    now shows the screen."""
    target = message if isinstance(message, Message | int) or message is None else message.message_id
    return await outbox.edit_or_send(context.bot, chat_id, target, screen)


async def show_in_tapped(update: Update, context: CourseContext, screen: Screen) -> int:
    """Show ``screen`` in the message whose button was tapped (see show); return the id of the message showing it."""
    message = tapped_message(update)
    return await show(context, message, message.chat.id if message else context.learner.chat_id, screen)


@dataclass(frozen=True)
class Carried:
    """What carrying out an outcome did."""

    stored: bool  # False: what it was decided over changed meanwhile, and nothing of it was stored
    shown: tuple[int, ...]  # the ids of the messages showing its screens, in order (with buttons taken off between)


# The outbox positions the current update has used: its replies may come from several outcomes (a drill refused,
# then shown as it stands; a graded run's verdict, in a task after its handler), each after the last.
_replies_used: ContextVar[tuple[int | None, int]] = ContextVar("replies_used", default=(None, 0))


async def carry_out(
    update: Update | None, context: CourseContext, outcome: Outcome, *, feature: str, kept: bool = True
) -> Carried:
    """Store an outcome and the replies that show its screens in one transaction keyed by the update, then send
    those replies in order (bot.handlers.outbox); see Carried.

    Commit, then send: a replay of the update after a crash sends the stored replies not known to be sent, and
    never decides again (bot.updates.PerLearnerOrder). A screen edited into the tapped message is known to show
    there before it is sent, so the learner's message edited in place is stored with the outcome; a new message
    is known once sent, and its mark as sent notes it (a write after the commit when it becomes the message edited
    in place or another reply follows it; the last one is left to the inbox's handled mark: bot.handlers.outbox).
    ``feature`` names the fault points passed (bot.faults): ``<feature>:stored`` and ``<feature>:shown``.
    ``kept`` False sends the replies without keeping them: for an update that goes on after them with steps of its
    own that a replay must take again (a Quick Check's first poll), so a replay runs its flow again.
    """
    services, user_id = context.services, context.learner.user_id
    faults = services.faults
    update_id = logs.UPDATE_ID.get() if kept else None
    used_by, first = _replies_used.get()
    if used_by != update_id:
        first = 0
    tapped = tapped_message(update) if update is not None else None
    replies, readers, retired = _planned(context, outcome, tapped)
    own = len(replies)  # the outcome's own; store may append what follows them (the reminders' offer)
    stored = await store(
        context, [*outcome.changes, *readers], outcome.events, replies=replies if kept else None, first_reply=first
    )
    faults.reached(f"{feature}:stored")
    if not stored:
        if retired is not None:
            services.superseded_keyboards.setdefault(user_id, retired)
        return Carried(False, ())
    _replies_used.set((update_id, first + len(replies)))
    pending = [StoredReply(first + index, reply, sent=False, shown=None) for index, reply in enumerate(replies)]
    shown = await outbox.send_stored(
        services, context.bot, update_id, user_id, pending, tapped if isinstance(tapped, Message) else None
    )
    faults.reached(f"{feature}:shown")
    if update_id is None:
        # Nothing in the outbox to mark: a new message edited in place from now on is noted on its own.
        late = [
            ReaderAt(message_id, reply.reader)
            for reply, message_id in zip(replies, shown, strict=True)
            if reply.reader is not None and outbox.marked(reply, message_id)
        ]
        if late:
            await store(context, late)
    screens = (m for m, reply in zip(shown[:own], replies[:own], strict=True) if reply.kind != ReplyKind.RETIRE)
    return Carried(True, tuple(screens))


def _planned(
    context: CourseContext, outcome: Outcome, tapped: MaybeInaccessibleMessage | None
) -> tuple[list[Reply], list[ReaderAt], int | None]:
    """Return the replies that show the outcome's screens, the messages edited in place known before sending (an
    edit of the tapped message), and the message whose buttons a superseding screen takes off (None: none)."""
    services, learner = context.services, context.learner
    replies: list[Reply] = []
    readers: list[ReaderAt] = []
    retired = None
    for shown in outcome.screens:
        text, buttons = shown.screen.text, outbox.keyboard(shown.screen.buttons)
        if shown.where is Where.TAPPED and tapped is not None:
            replies.append(Reply(tapped.chat.id, ReplyKind.EDIT, tapped.message_id, text, buttons, shown.reader))
            if shown.reader is not None:
                readers.append(ReaderAt(tapped.message_id, shown.reader))
            continue
        if shown.supersedes and (previous := services.superseded_keyboards.pop(learner.user_id, None)) is not None:
            retired = previous
            replies.append(Reply(learner.chat_id, ReplyKind.RETIRE, previous))
        replies.append(Reply(learner.chat_id, ReplyKind.SEND, None, text, buttons, shown.reader, shown.supersedes))
    return replies, readers, retired


async def store(
    context: CourseContext,
    changes: Sequence[Change],
    events: Sequence[Event] = (),
    *,
    replies: list[Reply] | None = None,
    first_reply: int = 0,
) -> bool:
    """Store what the update changes and the events it records in one transaction, keyed by the update, in the
    course language the learner is shown; False if a drill attempt changed meanwhile (nothing stored).

    What they mean for review and the streak (bot.handlers.comeback) is stored with them, in the same transaction,
    and so is the learner's activity, by the update's first write that can (comeback.activity). ``replies``
    (carry_out's), from position ``first_reply`` on, go to the outbox in it too; the reminders' offer a finished
    lesson makes is appended to them, to go out after them, rather than left to comeback.follow_up.
    """
    more = await comeback.changes_for(context, changes, events)
    changes = [*changes, *more]
    noted = comeback.activity(context)
    update_id = logs.UPDATE_ID.get()
    offered = replies is not None and update_id is not None and any(isinstance(c, RemindersOffered) for c in more)
    if replies is not None and offered:
        offer = retention_render.reminder_offer()
        replies.append(
            Reply(context.learner.chat_id, ReplyKind.SEND, text=offer.text, buttons=outbox.keyboard(offer.buttons))
        )
    written = await context.services.db.write_outcome(
        context.learner.user_id,
        [*changes, *noted],
        events,
        language=current_language(),
        update_id=update_id,
        replies=replies or (),
        first_reply=first_reply,
    )
    if written.stored:
        # What follows them comes after the update's screens (common.for_learner); the offer, in the outbox, with them.
        comeback.stored([c for c in changes if not (offered and isinstance(c, RemindersOffered))])
        await comeback.activity_stored(context, noted, written.activity_added)
    elif offered and replies is not None:
        replies.pop()
    return written.stored
