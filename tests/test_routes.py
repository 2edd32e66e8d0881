"""One route per button: every callback kind and every command is routed exactly once, by the feature's router."""

from __future__ import annotations

from collections import Counter

from telegram.ext import CallbackQueryHandler, CommandHandler

from bot.app import handlers, routers
from bot.callbacks import CallbackData
from bot.commands import COMMANDS


def _kinds() -> set[type[CallbackData]]:
    """Return every kind of button data the bot declares (tests may declare their own)."""
    found: set[type[CallbackData]] = set()
    todo = list(CallbackData.__subclasses__())
    while todo:
        kind = todo.pop()
        found.add(kind)
        todo += kind.__subclasses__()
    return {kind for kind in found if kind.__module__.startswith("bot.")}


def test_every_callback_kind_has_exactly_one_route():
    routed = Counter(kind for router in routers() for kind in router.buttons)
    assert set(routed) == _kinds(), f"kinds without a route: {_kinds() - set(routed)}"
    assert [kind for kind, n in routed.items() if n > 1] == []


def test_every_command_has_exactly_one_route():
    routed = Counter(command.name for router in routers() for command in router.commands)
    assert routed == Counter(command.name for command in COMMANDS)


def test_a_route_is_the_handler_the_application_tries():
    # The router's record and the PTB handlers it hands over cannot drift apart: each button route is one
    # CallbackQueryHandler, each command route one CommandHandler, in the order written.
    patterned = [h for h in handlers() if isinstance(h, CallbackQueryHandler) and h.pattern is not None]
    assert len(patterned) == sum(len(router.buttons) for router in routers())
    commands = [name for h in handlers() if isinstance(h, CommandHandler) for name in h.commands]
    assert sorted(commands) == sorted(c.name for router in routers() for c in router.commands)
