"""Everything else a learner may send: a short, helpful answer, never silence."""

from __future__ import annotations

from telegram import Update
from telegram.ext import CallbackQueryHandler, MessageHandler, filters

from bot import render
from bot.context import CourseContext
from bot.handlers.common import for_learner, refuse, reply
from bot.handlers.router import Router
from bot.i18n import _


async def group_chat(update: Update, context: CourseContext) -> None:
    """Point a group to a private chat, where lessons and progress are personal."""
    # No learner is created here: a group is nobody's progress.
    text = _("I teach one learner at a time. Open a private chat with me: @{username}").format(
        username=context.bot.username
    )
    await reply(update, context, render.notice(text))


@for_learner
async def edited(update: Update, context: CourseContext) -> None:
    """Explain that edits change nothing."""
    await reply(
        update,
        context,
        render.notice(
            _("I saw your edit, but edits don't change anything here. Send a new message instead, or /help.")
        ),
    )


@for_learner
async def unknown_command(update: Update, context: CourseContext) -> None:
    """Name the commands that exist."""
    await reply(update, context, render.notice(_("I don't know that command. /help lists the ones I understand.")))


@for_learner
async def anything_else(update: Update, context: CourseContext) -> None:
    """Answer stickers, photos, voice and the rest."""
    await reply(
        update,
        context,
        render.notice(_("I can only read text and buttons. Send /lessons to open the course, or /help.")),
    )


@for_learner
async def invalid_button(update: Update, context: CourseContext) -> None:
    """Answer a tap whose data this bot never made."""
    await refuse(update)


# Groups get their pointer before any course handler (app includes this router first) ...
groups = Router("groups")
groups.add(MessageHandler(filters.ChatType.GROUPS & filters.UpdateType.MESSAGE, group_chat))

# ... and the catch-alls come after every other router: they take what nothing else handled.
router = Router("fallback")
router.add(MessageHandler(filters.ChatType.PRIVATE & filters.UpdateType.EDITED_MESSAGE, edited))
router.add(MessageHandler(filters.ChatType.PRIVATE & filters.COMMAND, unknown_command))
router.add(MessageHandler(filters.ChatType.PRIVATE & filters.UpdateType.MESSAGE, anything_else))
router.add(CallbackQueryHandler(invalid_button))
