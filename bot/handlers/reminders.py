"""Daily reminders, the learner's side: /settings, the offer's answer, Snooze and Stop, and a learner who blocked the
bot. The sending is bot.sweep's; the offer itself is made after the first lesson (bot.handlers.comeback).

Reminders are never on by default: only the learner's tap on the offer or in /settings turns them on. A 403 or a
``my_chat_member`` update saying the bot was blocked turns them off for good; unblocking changes nothing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging

from telegram import ChatMemberUpdated, Update
from telegram.constants import ChatMemberStatus, ChatType
from telegram.ext import ChatMemberHandler

from bot import commands, retention_render
from bot.callbacks import ReminderChoice
from bot.context import CourseContext
from bot.handlers import comeback
from bot.handlers.common import reply, show_in_tapped
from bot.handlers.router import Router
from bot.render import Screen
from bot.retention import plan, reminders
from bot.retention.plan import Status, reminder_state
from bot.storage.retention import RetentionStore

log = logging.getLogger(__name__)

router = Router("reminders")


def _epoch(moment: dt.datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp())


async def _settings_screen(context: CourseContext, now: dt.datetime) -> Screen:
    row = await RetentionStore(context.services.db).reminder_row(context.learner.user_id, int(now.timestamp()))
    on = row is not None and row.status == Status.ON
    next_at = dt.datetime.fromtimestamp(row.remind_at, dt.UTC) if row is not None and row.remind_at else None
    shift = row.shift_minutes // 60 if row is not None else 0
    return retention_render.settings(on, next_at, now, shift)


@router.command(commands.SETTINGS)
async def settings_command(update: Update, context: CourseContext) -> None:
    """Show whether reminders are on and when the next comes, with buttons to move or stop them (/settings)."""
    await reply(update, context, await _settings_screen(context, context.services.db.clock()))


@router.button(ReminderChoice)
async def reminder_choice(update: Update, context: CourseContext, data: ReminderChoice) -> str | None:
    """Act on a reminder button: the offer's answer, Snooze, Stop, or a change in /settings."""
    store, user_id = RetentionStore(context.services.db), context.learner.user_id
    now = context.services.db.clock()
    match data.action:
        case "yes":  # the offer's answer
            await comeback.turn_reminders_on(context)
            await show_in_tapped(update, context, retention_render.reminder_answer(True))
            return None
        case "no":
            await store.set_status(user_id, Status.OFF, None)
            await show_in_tapped(update, context, retention_render.reminder_answer(False))
            return None
        case "on":
            await comeback.turn_reminders_on(context)
        case "off":
            await store.set_status(user_id, Status.OFF, None)
            return retention_render.reminders_stopped()
        case "snooze":
            row = await store.reminder_row(user_id, int(now.timestamp()))
            if row is None or row.status != Status.ON:
                return retention_render.reminders_stopped()
            until = reminders.snoozed_until(reminder_state(row).habit(now), now)
            await store.plan(user_id, _epoch(until), snoozed=True)
            return retention_render.snoozed(until, now)
        case "earlier" | "later" | "auto":
            row = await store.reminder_row(user_id, int(now.timestamp()))
            if row is None:
                return None
            step = -1 if data.action == "earlier" else 1
            shift = (
                dt.timedelta() if data.action == "auto" else plan.shifted(dt.timedelta(minutes=row.shift_minutes), step)
            )
            await store.set_shift(user_id, int(shift.total_seconds() // 60))
            if row.status == Status.ON:
                moved = dataclasses.replace(reminder_state(row), shift=shift)
                await store.plan(user_id, _epoch(plan.next_at(moved, now)))
        case _:
            return None
    await show_in_tapped(update, context, await _settings_screen(context, now))
    return None


async def blocked(update: Update, context: CourseContext) -> None:
    """A learner blocked the bot (or left its chat): reminders off for good; unblocking changes nothing."""
    member: ChatMemberUpdated | None = update.my_chat_member
    if member is None or member.chat.type != ChatType.PRIVATE:
        return
    if member.new_chat_member.status in (ChatMemberStatus.BANNED, ChatMemberStatus.LEFT):
        await RetentionStore(context.services.db).blocked(member.from_user.id)
        log.info("user %s blocked the bot: reminders off", member.from_user.id)


router.add(ChatMemberHandler(blocked, ChatMemberHandler.MY_CHAT_MEMBER))
