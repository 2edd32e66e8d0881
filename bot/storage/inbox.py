"""The inbox's table: updates on disk from the moment they are fetched until they are handled (bot.updates)."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TypeAlias

from bot.storage.backend import PURGE_LOCK, Row, SyncConnection
from bot.storage.engine import Engine, timestamp

MARK_HANDLED = (
    "UPDATE inbox SET state = 'handled', payload = NULL, handled_at = ? WHERE update_id = ? AND state = 'pending'"
)
RENEW_CLAIMS = (
    "UPDATE inbox SET lease_until = ? WHERE update_id IN"
    " (SELECT update_id FROM inbox WHERE owner = ? AND state = 'pending')"
)
RENEW_CLAIMS_SKIP_LOCKED = (
    "UPDATE inbox SET lease_until = ? WHERE update_id IN"
    " (SELECT update_id FROM inbox WHERE owner = ? AND state = 'pending' FOR UPDATE SKIP LOCKED)"
)


# A learner's pending updates older than one, then that one if it is pending (earlier_pending).
EARLIER_PENDING = (
    "SELECT update_id, owner, lease_until FROM inbox WHERE state = 'pending'"
    " AND (user_id = ? AND update_id < ? OR update_id = ?) ORDER BY update_id"
)

# (update id, owner, lease until) of a pending update.
Pending: TypeAlias = tuple[int, str | None, dt.datetime | None]


def _pending(rows: Sequence[Row]) -> list[Pending]:
    return [(row[0], row[1], dt.datetime.fromisoformat(row[2]) if row[2] is not None else None) for row in rows]


class InboxQueries(Engine):
    """The inbox: updates stored, replayed, handled and forgotten."""

    async def accept_updates(
        self,
        updates: Sequence[tuple[int, str]],
        now: dt.datetime,
        *,
        owner: str | None = None,
        lease_until: dt.datetime | None = None,
        learners: Mapping[int, int] | None = None,
    ) -> set[int]:
        """Store fetched updates (id, JSON) as pending, on disk; return the ids not stored before.

        An id stored before is a redelivery: pending (replayed at start) or handled already, so not new. ``owner``
        (the process that goes on to handle them) claims the new ones until ``lease_until``. ``learners`` gives
        each update's learner (update id -> user id), by which ``earlier_pending`` finds it.
        """
        if not updates:
            return set()
        # Telegram forgets an update once the next getUpdates confirms it, so it must be on disk by then.
        received = timestamp(now)
        lease = timestamp(lease_until) if lease_until is not None else None
        learner = learners or {}

        def store(conn: SyncConnection) -> set[int]:
            # The insert is the claim: of two processes given one update, the second inserts nothing (on PostgreSQL
            # it waits for the first's commit), so the update is new to one of them only. In id order: two processes
            # claiming overlapping batches take the ids' row locks in one order, never waiting in a cycle.
            fresh = set()
            for update_id, payload in sorted(updates):
                claimed = conn.execute(
                    "INSERT INTO inbox (update_id, payload, received_at, owner, lease_until, user_id)"
                    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (update_id) DO NOTHING RETURNING update_id",
                    (update_id, payload, received, owner, lease, learner.get(update_id)),
                ).fetchone()
                if claimed is not None:
                    fresh.add(update_id)
            return fresh

        # One hop to the database's thread for the whole batch (bot.storage.engine._transaction).
        return await self._transaction(store, to_disk=True)

    async def unhandled_updates(
        self,
        max_crashes: int,
        now: dt.datetime,
        *,
        owner: str | None = None,
        lease_until: dt.datetime | None = None,
        take_live: bool = True,
    ) -> tuple[list[tuple[int, int, str]], list[int]]:
        """Claim the pending updates for ``owner`` until ``lease_until`` and count a replay for each; return (id,
        replays, JSON) of each, in order, and the ids given up now because the bot died ``max_crashes`` times while
        handling them alone.

        Only updates nobody holds, or whose lease ran out by ``now``, are taken, unless ``take_live`` (one process
        on an SQLite file: every claim is a dead process's). The claim is one UPDATE: of two processes taking over
        at once, the second finds the rows claimed (on PostgreSQL it waits for the first's commit and reads them
        again), so each update goes to one of them only.
        """
        lease = timestamp(lease_until) if lease_until is not None else None
        async with self._write() as conn:
            # A pending update handled alone when its owner stopped: the owner died handling it, and it only.
            taken = await conn.all(
                "UPDATE inbox SET owner = ?, lease_until = ?, crashes = crashes + alone, alone = 0"
                " WHERE state = 'pending' AND (? OR owner IS NULL OR lease_until IS NULL OR lease_until < ?)"
                # Never its own: a process that could not renew in time is still handling what it holds.
                " AND (owner IS NULL OR owner <> ?)"
                " RETURNING update_id, replays, crashes, payload",
                (owner, lease, take_live, timestamp(now), owner),
            )
            abandoned = sorted(row[0] for row in taken if row[2] >= max_crashes)
            pending = sorted((row[0], row[1] + 1, row[3]) for row in taken if row[2] < max_crashes)
            await conn.executemany(
                "UPDATE inbox SET state = 'abandoned', payload = NULL, handled_at = ? WHERE update_id = ?",
                [(timestamp(now), update_id) for update_id in abandoned],
            )
            await conn.executemany(
                "UPDATE inbox SET replays = replays + 1 WHERE update_id = ?", [(row[0],) for row in pending]
            )
        return pending, abandoned

    async def earlier_pending(self, user_id: int, update_id: int) -> list[Pending]:
        """Return (id, owner, lease until) of the learner's pending updates older than ``update_id``, in order, then
        that of ``update_id`` itself if it is pending (whoever holds it)."""
        return _pending(await self._all(EARLIER_PENDING, (user_id, update_id, update_id)))

    @asynccontextmanager
    async def learner_lock(self, user_id: int, update_id: int | None = None) -> AsyncIterator[list[Pending] | None]:
        """Hold the learner's lock across processes while one update of theirs is handled (PostgreSQL's advisory
        lock; nothing on SQLite, where bot.updates.PerLearnerOrder's in-process lock is the only one needed).

        With ``update_id``, yield what ``earlier_pending`` returns for it, read once the lock is held (on PostgreSQL
        in the lock's own round trip); None without.
        """
        read = (EARLIER_PENDING, (user_id, update_id, update_id)) if update_id is not None else None
        async with self.backend.learner_lock(user_id, read) as rows:
            yield _pending(rows) if rows is not None else None

    async def take_over_update(
        self, update_id: int, owner: str, now: dt.datetime, lease_until: dt.datetime
    ) -> tuple[int, str] | None:
        """Claim one pending update for ``owner`` until ``lease_until`` if nobody holds it or its lease ran out by
        ``now``, counting a replay; return (replays, JSON), or None if it is handled, or held, or taken meanwhile.

        One UPDATE, as in ``unhandled_updates``: of two processes taking it over at once, one gets it.
        """
        taken = await self._all(
            "UPDATE inbox SET owner = ?, lease_until = ?, replays = replays + 1 WHERE update_id = ?"
            " AND state = 'pending' AND (owner IS NULL OR lease_until IS NULL OR lease_until < ?)"
            " AND (owner IS NULL OR owner <> ?) RETURNING replays, payload",
            (owner, timestamp(lease_until), update_id, timestamp(now), owner),
        )
        return (taken[0][0], taken[0][1]) if taken and taken[0][1] is not None else None

    async def renew_claims(self, owner: str, lease_until: dt.datetime) -> int:
        """Extend the lease on every pending update ``owner`` holds to ``lease_until``; return how many.

        On PostgreSQL a row another transaction holds is skipped, not waited for: it is being marked handled (this
        process's own other transaction) or taken over, and locking the rest in another order than that transaction
        deadlocked the two (one then failed, and the claims it was renewing could lapse under a live owner).
        """
        renew = RENEW_CLAIMS_SKIP_LOCKED if self.backend.name == "postgresql" else RENEW_CLAIMS
        return await self._write_one(renew, (timestamp(lease_until), owner))

    async def claims_held(self, update_ids: Sequence[int], owner: str) -> set[int]:
        """Return which of ``update_ids`` are still pending and held by ``owner`` (one read of the few it holds)."""
        if not update_ids:
            return set()
        rows = await self._all("SELECT update_id FROM inbox WHERE owner = ? AND state = 'pending'", (owner,))
        return {int(row[0]) for row in rows} & set(update_ids)

    async def give_up_update(self, update_id: int, now: dt.datetime) -> None:
        """Mark a pending update abandoned: it is never handled."""
        await self._write_one(
            "UPDATE inbox SET state = 'abandoned', payload = NULL, handled_at = ? WHERE update_id = ?",
            (timestamp(now), update_id),
        )

    async def handling_alone(self, update_id: int, alone: bool) -> None:
        """Note whether a pending update is being handled alone, so that a crash meanwhile is blamed on it."""
        await self._write_one("UPDATE inbox SET alone = ? WHERE update_id = ?", (int(alone), update_id))

    async def updates_handled(self, update_ids: Sequence[int], now: dt.datetime, *, owner: str | None = None) -> None:
        """Mark updates handled; their text is dropped, their ids kept to recognise redeliveries.

        With ``owner``, only those it still holds: one taken over meanwhile (its owner frozen past its lease) is the
        new owner's to mark, once it has handled it.
        """
        mark = MARK_HANDLED if owner is None else MARK_HANDLED + " AND owner = ?"
        held = (owner,) if owner is not None else ()
        if len(update_ids) == 1:
            # The usual batch: one statement in autocommit, one round trip (a transaction's BEGIN and COMMIT are two
            # more, on the event loop's thread and the server's). A mark run again leaves the same row.
            await self._write_one(mark, (timestamp(now), update_ids[0], *held))
            return
        async with self._write() as conn:
            await conn.executemany(
                mark,
                [(timestamp(now), update_id, *held) for update_id in sorted(update_ids)],  # rows locked in one order
            )

    async def forget_updates(self, received_before: dt.datetime) -> int:
        """Delete handled updates received before ``received_before``, and the replies stored (bot.storage.outbox)
        as long ago by updates no longer pending; return how many updates (0 when another process is purging right
        now: the daily purge runs in one process across replicas, whichever comes first)."""
        before = timestamp(received_before)
        async with self._write() as conn:
            if not await conn.try_lock(PURGE_LOCK):
                return 0
            await conn.execute(
                "DELETE FROM outbox WHERE stored_at < ? AND update_id NOT IN"
                " (SELECT update_id FROM inbox WHERE state = 'pending')",
                (before,),
            )
            return await conn.execute("DELETE FROM inbox WHERE state != 'pending' AND received_at < ?", (before,))
