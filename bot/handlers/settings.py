"""The learner's own settings: /help and /reset (after a confirmation)."""

from __future__ import annotations

from telegram import Update
from telegram.ext import BaseHandler, CallbackQueryHandler, CommandHandler, filters

from bot import commands, render
from bot.callbacks import ConfirmReset, matches
from bot.context import CourseContext
from bot.handlers.common import button, for_learner, reply, show_in_tapped


@for_learner
async def help_command(update: Update, context: CourseContext) -> None:
    """Explain the commands and the buttons."""
    await reply(update, context, render.help_text())


@for_learner
async def reset(update: Update, context: CourseContext) -> None:
    """Ask before deleting anything."""
    await reply(update, context, render.reset_question())


@button(ConfirmReset)
async def confirm_reset(update: Update, context: CourseContext, data: ConfirmReset) -> None:
    """Reset on 'yes'; leave everything as it is on 'no'."""
    confirmed = data.answer == "yes"
    if confirmed:
        await context.services.db.reset(context.learner.user_id)
    await show_in_tapped(update, context, render.reset_done(confirmed))


def handlers() -> list[BaseHandler[Update, CourseContext, None]]:
    """Return this feature's handlers."""
    private = filters.ChatType.PRIVATE
    return [
        CommandHandler(commands.HELP.name, help_command, filters=private),
        CommandHandler(commands.RESET.name, reset, filters=private),
        CallbackQueryHandler(confirm_reset, pattern=matches(ConfirmReset)),
    ]
