"""The learning events' table: what learners did, for `coursebot stats`."""

from __future__ import annotations

import datetime as dt

from bot.storage.backend import PURGE_LOCK
from bot.storage.engine import Engine, timestamp

# A slide's time on the previous one is worked out in SQL: the learner's last event, if it was a slide (or Back) of
# this lesson. ON CONFLICT DO NOTHING: an event with an update id is unique by (user, update, kind, lesson, item), so
# an update replayed after a crash records it once (migration 9). The casts type a NULL for PostgreSQL, which cannot
# tell the type of a bare parameter.
RECORD_EVENT = (
    "INSERT INTO events (user_id, at, language, lesson_id, kind, item_id, option_id, verdict,"
    " failed_check, seconds, update_id) SELECT :user, :at, :language, :lesson, :kind, :item, :option, :verdict,"
    " :check, CASE WHEN CAST(:seconds AS DOUBLE PRECISION) IS NOT NULL OR :kind != 'slide'"
    " THEN CAST(:seconds AS DOUBLE PRECISION) ELSE ("
    "  SELECT CASE WHEN last.lesson_id = :lesson AND last.kind IN ('slide', 'back')"
    "  THEN round(CASE WHEN last.at > :at THEN 0.0 ELSE (julianday(:at) - julianday(last.at)) * 86400.0 END, 3)"
    "  END FROM events AS last WHERE last.user_id = :user ORDER BY last.at DESC, last.id DESC LIMIT 1"
    " ) END, CAST(:update AS BIGINT) ON CONFLICT DO NOTHING"
)


class EventQueries(Engine):
    """Learning events: purged (they are recorded with their update's outcome, bot.storage.outcomes)."""

    async def purge_events(self) -> int:
        """Delete the learning events older than the days they are kept; return how many went."""
        if self.events_days is None:
            return 0
        cutoff = timestamp(self.clock() - dt.timedelta(days=self.events_days))
        async with self._write() as conn:
            if not await conn.try_lock(PURGE_LOCK):
                return 0  # another process is purging them right now
            return await conn.execute(
                "DELETE FROM events WHERE at < :cutoff OR :days = 0", {"cutoff": cutoff, "days": self.events_days}
            )
