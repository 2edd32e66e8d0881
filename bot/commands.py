"""The bot's commands, listed once: the command menu (setMyCommands), /help and the registered handlers
all come from here, and a test ties the three together."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bot.i18n import _
from bot.lessontext import plain


@dataclass(frozen=True)
class Command:
    """A command: its name, and how the menu and /help describe it (each a message, translated when called)."""

    name: str
    menu_text: Callable[[], str]
    help_line: Callable[[], str]

    def menu_description(self) -> str:
        """Return the menu's description as published, in the current language.

        In a right-to-left language its code stays left to right: the menu would show '/run print(1)' as
        'run print(1)/' otherwise.
        """
        return plain(self.menu_text())


START = Command("start", lambda: _("Welcome and the course"), lambda: _("/start – welcome and the course"))
LESSONS = Command("lessons", lambda: _("The course menu"), lambda: _("/lessons – the course menu"))
PROGRESS = Command(
    "progress", lambda: _("Lessons done and your score"), lambda: _("/progress – lessons done and your score")
)
RESET = Command("reset", lambda: _("Start the course over"), lambda: _("/reset – start the course over"))
RUN = Command(
    "run", lambda: _("Run Python code, e.g. /run print(1)"), lambda: _("/run CODE – run Python code and see its output")
)
LANGUAGE = Command(
    "language", lambda: _("Choose the language I speak"), lambda: _("/language – choose the language I speak")
)
REVIEW = Command("review", lambda: _("Review what you learned"), lambda: _("/review – review the cards due now"))
SETTINGS = Command(
    "settings",
    lambda: _("Reminders: your hour, or stop them"),
    lambda: _("/settings – daily reminders: change or stop"),
)
HELP = Command("help", lambda: _("How to use this bot"), lambda: _("/help – this message"))

# In the order the menu and /help list them.
COMMANDS = (START, LESSONS, REVIEW, PROGRESS, SETTINGS, RESET, RUN, LANGUAGE, HELP)
