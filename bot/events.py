"""Learning events (what learners do, for `coursebot stats`): kept COURSEBOT_EVENTS_DAYS days, purged when the
bot starts and once a day after.

Events are recorded where learners act, with the rest of their update's outcome (Database.store; bot.learner.EventKind
lists the kinds and what each row holds); the Telegram user id is the only personal datum they carry.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import sqlite3
from collections.abc import Awaitable, Callable

from bot.errors import StorageError
from bot.storage.db import Database

log = logging.getLogger(__name__)

PURGE_EVERY = dt.timedelta(days=1)

Sleep = Callable[[float], Awaitable[object]]


async def purge_daily(db: Database, sleep: Sleep = asyncio.sleep) -> None:
    """Purge expired events now, then every day until cancelled; the database's clock says what has expired."""
    while True:
        try:
            removed = await db.purge_events()
        except (sqlite3.Error, StorageError):
            # The next day tries again; a failed purge keeps events a little longer, it loses nothing.
            log.exception("purging old learning events from %s failed", db.where)
        else:
            if removed:
                log.info("purged %d learning events older than %s days", removed, db.events_days)
        await sleep(PURGE_EVERY.total_seconds())
