"""/language: the learner picks the language the bot speaks; the choice wins over Telegram's from then on."""

from __future__ import annotations

from telegram import Update
from telegram.ext import BaseHandler, CallbackQueryHandler, CommandHandler, filters

from bot import commands, render
from bot.callbacks import CallbackDataError, ChooseLanguage, matches
from bot.context import CourseContext
from bot.handlers.common import button, button_refused, for_learner, reply, show_in_tapped


@for_learner
async def language(update: Update, context: CourseContext) -> None:
    """Show every shipped language in its own name."""
    await reply(update, context, render.language_picker(context.services.i18n.languages, context.learner.language))


@button(ChooseLanguage)
async def choose_language(update: Update, context: CourseContext, data: ChooseLanguage) -> str | None:
    """Store the choice and answer in the chosen language; the learner's place is untouched."""
    i18n = context.services.i18n
    try:
        chosen = data.resolve(i18n.languages)
    except CallbackDataError:
        return button_refused()  # the tap is answered once, by the button wrapper
    learner = context.learner
    await context.services.db.set_language(learner.user_id, chosen)
    # The update came in one language and is answered in the new one, chosen as every update's is.
    with i18n.use(i18n.choose(chosen, learner.telegram_language)):
        await show_in_tapped(update, context, render.language_chosen(chosen is None))
    return None


def handlers() -> list[BaseHandler[Update, CourseContext, None]]:
    """Return this feature's handlers."""
    private = filters.ChatType.PRIVATE
    return [
        CommandHandler(commands.LANGUAGE.name, language, filters=private),
        CallbackQueryHandler(choose_language, pattern=matches(ChooseLanguage)),
    ]
