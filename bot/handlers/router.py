"""A router per feature, aiogram's style on top of PTB: a handler is registered where it is written.

``@router.button(ShowSlide)`` unpacks the tap's typed data, loads the learner and answers the tap once;
``@router.command(commands.START)`` takes the command in private chats. ``app`` includes every feature's router in
order; tests/test_routes.py checks that every callback kind and every command has exactly one route.
"""

from __future__ import annotations

from collections.abc import Callable

from telegram import Update
from telegram.ext import BaseHandler, CallbackQueryHandler, CommandHandler, filters

from bot.callbacks import CallbackData, matches
from bot.commands import Command
from bot.context import CourseContext
from bot.handlers.common import ButtonHandler, D, Handler, button, for_learner

PTBHandler = BaseHandler[Update, CourseContext, None]


class Router:
    """One feature's routes, in the order they are written."""

    def __init__(self, name: str):
        self.name = name
        self.buttons: list[type[CallbackData]] = []  # the callback kinds routed here
        self.commands: list[Command] = []  # the commands routed here
        self._handlers: list[PTBHandler] = []

    def button(self, kind: type[D]) -> Callable[[ButtonHandler[D]], Handler]:
        """Route taps carrying ``kind`` to the decorated handler (see bot.handlers.common.button)."""

        def decorate(handler: ButtonHandler[D]) -> Handler:
            wrapped = button(kind)(handler)
            self.buttons.append(kind)
            self._handlers.append(CallbackQueryHandler(wrapped, pattern=matches(kind)))
            return wrapped

        return decorate

    def command(self, command: Command) -> Callable[[Handler], Handler]:
        """Route ``command`` in private chats to the decorated handler, run for the learner."""

        def decorate(handler: Handler) -> Handler:
            wrapped = for_learner(handler)
            self.commands.append(command)
            self._handlers.append(CommandHandler(command.name, wrapped, filters=filters.ChatType.PRIVATE))
            return wrapped

        return decorate

    def add(self, handler: PTBHandler) -> None:
        """Route what is neither a button nor a command (poll answers, messages) to a PTB handler."""
        self._handlers.append(handler)

    def handlers(self) -> list[PTBHandler]:
        """Return this feature's PTB handlers, in the order they were routed."""
        return list(self._handlers)
