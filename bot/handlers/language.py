"""/language: the learner picks the language the bot speaks; the choice wins over Telegram's from then on."""

from __future__ import annotations

from telegram import Update
from telegram.ext import CallbackQueryHandler, CommandHandler, filters

from bot import render
from bot.callbacks import CallbackDataError, ChooseLanguage, matches
from bot.context import CourseContext
from bot.handlers.common import button, for_learner, refuse, send, show


@for_learner
async def language(update: Update, context: CourseContext) -> None:
    """Show every shipped language in its own name."""
    i18n = context.services.i18n
    await send(context, update.effective_chat.id, render.language_picker(i18n.languages, context.learner.language))


@button(ChooseLanguage)
async def choose_language(update: Update, context: CourseContext, data: ChooseLanguage) -> None:
    """Store the choice and answer in the chosen language; the learner's place is untouched."""
    i18n = context.services.i18n
    try:
        chosen = data.resolve(i18n.languages)
    except CallbackDataError:
        await refuse(update)
        return
    learner = context.learner
    await context.services.db.set_language(learner.user_id, chosen)
    query = update.callback_query
    with i18n.use(chosen or i18n.negotiate(learner.telegram_language)):
        await show(context, query.message, query.message.chat.id, render.language_chosen(chosen is None))


def handlers() -> list:
    """Return this feature's handlers."""
    private = filters.ChatType.PRIVATE
    return [
        CommandHandler("language", language, filters=private),
        CallbackQueryHandler(choose_language, pattern=matches(ChooseLanguage)),
    ]
