"""One command registry (bot.commands): the handlers, /help and the menu Telegram shows all come from it."""

from __future__ import annotations

import re

import pytest
from telegram.ext import CommandHandler

from bot import render
from bot.app import handlers
from bot.bidi import LRI, PDI
from bot.commands import COMMANDS
from bot.i18n import DEFAULT_LANGUAGE, I18n, telegram_code
from bot.telegram_rules.text import visible_text
from tests.conftest import LOCALES

I18N = I18n(LOCALES)
NAMES = [command.name for command in COMMANDS]


def test_the_registered_command_handlers_are_exactly_the_registry():
    handled = [name for handler in handlers() if isinstance(handler, CommandHandler) for name in handler.commands]
    assert sorted(handled) == sorted(NAMES)
    assert len(handled) == len(set(handled)), "a command is handled twice"


@pytest.mark.parametrize("language", I18N.languages)
def test_help_lists_every_command_in_the_menus_order(language):
    with I18N.use(language):
        shown = visible_text(render.help_text().text)
    # In Arabic each line is wrapped in isolates, so that '/start' keeps reading left to right.
    listed = re.findall(r"^/([a-z]+)", shown.replace(LRI, "").replace(PDI, ""), re.MULTILINE)
    assert listed == NAMES


async def test_the_menu_telegram_shows_is_the_registry_in_every_language(bot, standin):
    for language in I18N.languages:
        scope = ("default", "" if language == DEFAULT_LANGUAGE else telegram_code(language))
        published = standin.commands[scope]
        assert [c["command"] for c in published] == NAMES, language
        with I18N.use(language):
            assert [c["description"] for c in published] == [command.menu_description() for command in COMMANDS]
