"""/language: the learner picks the language the bot speaks; the choice wins over Telegram's from then on."""

from __future__ import annotations

from telegram import Update

from bot import commands, render
from bot.callbacks import CallbackDataError, ChooseLanguage
from bot.changes import LanguageChosen
from bot.context import CourseContext
from bot.flows.outcome import Outcome, Show, button_refused
from bot.handlers.common import carry_out, reply
from bot.handlers.router import Router

router = Router("language")


@router.command(commands.LANGUAGE)
async def language(update: Update, context: CourseContext) -> None:
    """Show every shipped language in its own name."""
    await reply(update, context, render.language_picker(context.services.i18n.languages, context.learner.language))


@router.button(ChooseLanguage)
async def choose_language(update: Update, context: CourseContext, data: ChooseLanguage) -> str | None:
    """Store the choice and answer in the chosen language; the learner's place is untouched."""
    i18n = context.services.i18n
    try:
        chosen = data.resolve(i18n.languages)
    except CallbackDataError:
        return button_refused()  # the tap is answered once, by the button wrapper
    learner = context.learner
    # The update came in one language and is answered in the new one, chosen as every update's is.
    with i18n.use(i18n.choose(chosen, learner.telegram_language)):
        answer = render.language_chosen(chosen is None)
    await carry_out(
        update, context, Outcome(screens=(Show(answer),), changes=(LanguageChosen(chosen),)), feature="language"
    )
    return None
