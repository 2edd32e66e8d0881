"""The learner's own settings: /help and /reset (after a confirmation)."""

from __future__ import annotations

from telegram import Update

from bot import commands, render
from bot.callbacks import Confirm, ConfirmReset
from bot.context import CourseContext
from bot.handlers.common import reply, show_in_tapped
from bot.handlers.router import Router

router = Router("settings")


@router.command(commands.HELP)
async def help_command(update: Update, context: CourseContext) -> None:
    """Explain the commands and the buttons."""
    await reply(update, context, render.help_text())


@router.command(commands.RESET)
async def reset(update: Update, context: CourseContext) -> None:
    """Ask before deleting anything."""
    await reply(update, context, render.reset_question())


@router.button(ConfirmReset)
async def confirm_reset(update: Update, context: CourseContext, data: ConfirmReset) -> None:
    """Reset on 'yes'; leave everything as it is on 'no'."""
    confirmed = data.answer is Confirm.YES
    if confirmed:
        await context.services.db.reset(context.learner.user_id)
    await show_in_tapped(update, context, render.reset_done(confirmed))
