"""Daily reminders, the learner's side: the one offer after the first lesson, /settings, Snooze and Stop, and a
learner who blocked the bot. The sending is bot.sweep's; the completion card goes out here too, when the last
lesson is finished.

Reminders are never on by default: only the learner's tap on the offer or in /settings turns them on. A 403
or a ``my_chat_member`` update saying the bot was blocked turns them off for good; unblocking changes nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging

from telegram import ChatMemberUpdated, Update
from telegram.constants import ChatMemberStatus
from telegram.error import TelegramError
from telegram.ext import BaseHandler, CallbackQueryHandler, ChatMemberHandler, CommandHandler, filters

from bot import commands, retention_render
from bot.callbacks import ReminderChoice, matches
from bot.context import CourseContext
from bot.course.model import Lesson
from bot.handlers.common import button, for_learner, reply, send, show_in_tapped
from bot.handlers.habits import local_day
from bot.render import Screen
from bot.retention import deeplinks, plan, reminders
from bot.retention.completion_card import completion_card
from bot.retention.plan import Status, reminder_state
from bot.states import Stage, stage
from bot.storage.retention import ReminderRow, RetentionStore

log = logging.getLogger(__name__)


def _epoch(moment: dt.datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp())


async def _row(context: CourseContext, now: dt.datetime) -> ReminderRow | None:
    return await RetentionStore(context.services.db).reminder_row(context.learner.user_id, int(now.timestamp()))


async def _settings_screen(context: CourseContext, now: dt.datetime) -> Screen:
    row = await _row(context, now)
    on = row is not None and row.status == Status.ON
    next_at = dt.datetime.fromtimestamp(row.remind_at, dt.UTC) if row is not None and row.remind_at else None
    shift = row.shift_minutes // 60 if row is not None else 0
    return retention_render.settings(on, next_at, now, shift)


async def turn_on(context: CourseContext, now: dt.datetime) -> None:
    """Turn the learner's reminders on and plan the first."""
    row = await _row(context, now)
    if row is None:
        return
    state = dataclasses.replace(reminder_state(row), status=Status.ON, ignored=0)
    await RetentionStore(context.services.db).set_status(
        context.learner.user_id, Status.ON, _epoch(plan.next_at(state, now))
    )


async def _replan(context: CourseContext, now: dt.datetime) -> None:
    row = await _row(context, now)
    if row is not None and row.status == Status.ON:
        await RetentionStore(context.services.db).plan(
            context.learner.user_id, _epoch(plan.next_at(reminder_state(row), now))
        )


@for_learner
async def settings_command(update: Update, context: CourseContext) -> None:
    """Show whether reminders are on and when the next comes, with buttons to move or stop them (/settings)."""
    await reply(update, context, await _settings_screen(context, context.services.db.clock()))


@button(ReminderChoice)
async def reminder_choice(update: Update, context: CourseContext, data: ReminderChoice) -> str | None:
    """Act on a reminder button: the offer's answer, Snooze, Stop, or a change in /settings."""
    store, user_id = RetentionStore(context.services.db), context.learner.user_id
    now = context.services.db.clock()
    match data.action:
        case "yes":  # the offer's answer
            await turn_on(context, now)
            await show_in_tapped(update, context, retention_render.reminder_answer(True))
            return None
        case "on":
            await turn_on(context, now)
        case "no":
            await store.set_status(user_id, Status.OFF, None)
            await show_in_tapped(update, context, retention_render.reminder_answer(False))
            return None
        case "off":
            await store.set_status(user_id, Status.OFF, None)
            return retention_render.reminders_stopped()
        case "snooze":
            row = await _row(context, now)
            if row is None or row.status != Status.ON:
                return retention_render.reminders_stopped()
            until = reminders.snoozed_until(reminder_state(row).habit(now), now)
            await store.plan(user_id, _epoch(until), snoozed=True)
            return retention_render.snoozed(until, now)
        case "earlier" | "later" | "auto":
            row = await _row(context, now)
            shift = dt.timedelta(minutes=row.shift_minutes if row is not None else 0)
            moved = (
                dt.timedelta() if data.action == "auto" else plan.shifted(shift, -1 if data.action == "earlier" else 1)
            )
            await store.set_shift(user_id, int(moved.total_seconds() // 60))
            await _replan(context, now)
        case _:
            return None
    await show_in_tapped(update, context, await _settings_screen(context, now))
    return None


async def blocked(update: Update, context: CourseContext) -> None:
    """A learner blocked the bot (or left its chat): reminders off for good; unblocking changes nothing."""
    member: ChatMemberUpdated | None = update.my_chat_member
    if member is None or member.chat.type != "private":
        return
    if member.new_chat_member.status in (ChatMemberStatus.BANNED, ChatMemberStatus.LEFT):
        await RetentionStore(context.services.db).blocked(member.from_user.id)
        log.info("user %s blocked the bot: reminders off", member.from_user.id)


async def lesson_finished(context: CourseContext, lesson: Lesson) -> None:
    """After a lesson is finished: offer reminders once (after the first), send the card when the course is done."""
    store, user_id = RetentionStore(context.services.db), context.learner.user_id
    if await store.set_status(user_id, Status.OFFERED, None, only_from=Status.UNASKED):
        await send(context, context.learner.chat_id, retention_render.reminder_offer())
    progress = await context.services.db.progress(user_id)
    course = context.course
    if all(stage(progress[item.id]) is Stage.DONE for item in course.lessons if item.id in progress) and all(
        item.id in progress for item in course.lessons
    ):
        await send_completion_card(context)


async def send_completion_card(context: CourseContext) -> None:
    """Send the completion card: the course's title, the learner's first name and the date, with a share link."""
    link = deeplinks.url(context.bot.username)
    now = context.services.db.clock()
    day = await local_day(context, now)
    chat = await _first_name(context)
    course = context.course
    png = await asyncio.to_thread(completion_card, course.title, chat, day, len(course.lessons), link)
    try:
        await context.bot.send_photo(context.learner.chat_id, png, caption=retention_render.card_caption(link))
    except TelegramError as exc:
        log.warning("the completion card of user %s was not sent: %s", context.learner.user_id, exc)


async def _first_name(context: CourseContext) -> str | None:
    """Return the learner's first name as Telegram gives it (their private chat's)."""
    try:
        chat = await context.bot.get_chat(context.learner.chat_id)
    except TelegramError as exc:
        log.info("no first name for user %s's card: %s", context.learner.user_id, exc)
        return None
    return chat.first_name


def handlers() -> list[BaseHandler[Update, CourseContext, None]]:
    """Return this feature's handlers."""
    return [
        CommandHandler(commands.SETTINGS.name, settings_command, filters=filters.ChatType.PRIVATE),
        CallbackQueryHandler(reminder_choice, pattern=matches(ReminderChoice)),
        ChatMemberHandler(blocked, ChatMemberHandler.MY_CHAT_MEMBER),
    ]
