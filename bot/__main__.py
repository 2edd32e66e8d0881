"""``python -m bot`` starts the bot, as ``coursebot run`` does; other subcommands pass through."""

import sys

from bot.cli import main

sys.exit(main(sys.argv[1:] or ["run"]))
