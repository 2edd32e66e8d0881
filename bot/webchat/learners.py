"""The web chat's learners: Telegram-like users of the built-in Bot API server.

A learner is a user id the browser remembers. Their progress lives where every
learner's does, in the bot's database, keyed by that id; their chat history lives in
the built-in server's store. So a new learner starts from scratch and leaves the
others as they were.
"""

from __future__ import annotations

from typing import Any

from bot.i18n import _
from bot.localapi import BotApi

# Above every Telegram user id (at most 52 significant bits), so web learners and real
# Telegram learners can share one database; below 2**53, so the page's JavaScript keeps
# the ids exact.
FIRST_LEARNER_ID = 2**52
LAST_LEARNER_ID = 2**53 - 1


def is_learner(user_id: int) -> bool:
    return FIRST_LEARNER_ID <= user_id <= LAST_LEARNER_ID


def learners(api: BotApi) -> list[dict[str, Any]]:
    """Every web learner the server knows, oldest first."""
    return [api.users[user_id] for user_id in sorted(api.users) if is_learner(user_id)]


def new_learner(api: BotApi, language_code: str | None) -> dict[str, Any]:
    """Register the next learner ("Learner 3"), whose app speaks `language_code`."""
    user_id = max((u["id"] for u in learners(api)), default=FIRST_LEARNER_ID - 1) + 1
    number = user_id - FIRST_LEARNER_ID + 1
    user: dict[str, Any] = {
        "id": user_id,
        "is_bot": False,
        "first_name": _("Learner {number}").format(number=number),
    }
    if language_code:
        user["language_code"] = language_code
    api.add_user(user)
    return user
