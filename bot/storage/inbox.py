"""The inbox's table: updates on disk from the moment they are fetched until they are handled (bot.updates)."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Sequence

from bot.storage.engine import Engine, timestamp


class InboxQueries(Engine):
    """The inbox: updates stored, replayed, handled and forgotten."""

    async def accept_updates(self, updates: Sequence[tuple[int, str]], now: dt.datetime) -> set[int]:
        """Store fetched updates (id, JSON) as pending, on disk; return the ids not stored before.

        An id stored before is a redelivery: pending (replayed at start) or handled already, so not new.
        """
        if not updates:
            return set()
        ids = json.dumps([update_id for update_id, _ in updates])
        # Telegram forgets an update once the next getUpdates confirms it, so it must be on disk by then.
        received = timestamp(now)

        def store(conn: sqlite3.Connection) -> set[int]:
            known = conn.execute(
                "SELECT update_id FROM inbox WHERE update_id IN (SELECT value FROM json_each(?))", (ids,)
            ).fetchall()
            fresh = {update_id for update_id, _ in updates} - {row[0] for row in known}
            conn.executemany(
                "INSERT INTO inbox (update_id, payload, received_at) VALUES (?, ?, ?)",
                [(update_id, payload, received) for update_id, payload in updates if update_id in fresh],
            )
            return fresh

        fresh = await self._transaction(store, to_disk=True)
        return fresh

    async def unhandled_updates(
        self, max_crashes: int, now: dt.datetime
    ) -> tuple[list[tuple[int, int, str]], list[int]]:
        """Count a replay for every pending update; return (id, replays, JSON) of each, in order, and the ids given
        up now because the bot died ``max_crashes`` times while handling them alone."""
        async with self._write() as conn:
            # Still pending and handled alone when the bot stopped: it died handling this update, and this one only.
            await conn.execute("UPDATE inbox SET crashes = crashes + 1, alone = 0 WHERE state = 'pending' AND alone")
            abandoned = [
                row[0]
                for row in await conn.execute_fetchall(
                    "SELECT update_id FROM inbox WHERE state = 'pending' AND crashes >= ? ORDER BY update_id",
                    (max_crashes,),
                )
            ]
            await conn.execute(
                "UPDATE inbox SET state = 'abandoned', payload = NULL, handled_at = ?"
                " WHERE state = 'pending' AND crashes >= ?",
                (timestamp(now), max_crashes),
            )
            await conn.execute("UPDATE inbox SET replays = replays + 1 WHERE state = 'pending'")
            rows = await conn.execute_fetchall(
                "SELECT update_id, replays, payload FROM inbox WHERE state = 'pending' ORDER BY update_id"
            )
        return [(row[0], row[1], row[2]) for row in rows], abandoned

    async def give_up_update(self, update_id: int, now: dt.datetime) -> None:
        """Mark a pending update abandoned: it is never handled."""
        await self._write_one(
            "UPDATE inbox SET state = 'abandoned', payload = NULL, handled_at = ? WHERE update_id = ?",
            (timestamp(now), update_id),
        )

    async def handling_alone(self, update_id: int, alone: bool) -> None:
        """Note whether a pending update is being handled alone, so that a crash meanwhile is blamed on it."""
        await self._write_one("UPDATE inbox SET alone = ? WHERE update_id = ?", (int(alone), update_id))

    async def updates_handled(self, update_ids: Sequence[int], now: dt.datetime) -> None:
        """Mark updates handled; their text is dropped, their ids kept to recognise redeliveries."""
        await self._write_one(
            "UPDATE inbox SET state = 'handled', payload = NULL, handled_at = ?"
            " WHERE update_id IN (SELECT value FROM json_each(?)) AND state = 'pending'",
            (timestamp(now), json.dumps(list(update_ids))),
        )

    async def forget_updates(self, received_before: dt.datetime) -> int:
        """Delete handled updates received before ``received_before``; return how many."""
        return await self._write_one(
            "DELETE FROM inbox WHERE state != 'pending' AND received_at < ?", (timestamp(received_before),)
        )
