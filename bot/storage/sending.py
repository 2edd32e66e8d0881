"""The bot-wide send budget on PostgreSQL: Telegram's ~30 messages a second are the bot's, not each replica's.

One row holds the next free slot (wall-clock seconds, as every replica reads the same clock); taking a slot is one
atomic statement that does what bot.retention.bulk_sender.take_slot does in memory, so replicas sending at once get
slots ``interval`` apart, never the same one. A 429 raises the next free slot to the end of its wait, and a second
row keeps that end, so a replica whose message took its slot before the hold gives it up. It is the database-backed
``SendBudget`` every replica's reminder sweep takes (bot.sweep.send_budget). On SQLite, one process sends, and its
budget stays in memory (bulk_sender.LocalBudget).
"""

from __future__ import annotations

from bot.errors import StorageError
from bot.storage.engine import Engine

# The budget's row: the bot's only one today (a name leaves room for, say, a separate budget per bot token).
BUDGET = "bot"
# The end of the latest hold (a 429's retry_after), in a row of its own: a replica whose message took its slot before
# another replica's 429 reads it before sending, and takes a new slot instead (the hold moved ``next_free`` past it).
HOLD = "bot:held"


class SendingQueries(Engine):
    """Slots of the shared send budget."""

    def _shared(self) -> None:
        if self.backend.name != "postgresql":
            raise StorageError("the shared send budget is PostgreSQL's; one SQLite process keeps its own in memory")

    async def reserve_send_slot(self, now: float, interval: float) -> float:
        """Take the next free slot at or after ``now`` (wall-clock seconds); return when it starts."""
        self._shared()
        row = await self._one(
            "INSERT INTO send_budget (name, next_free) VALUES (:name, CAST(:now AS DOUBLE PRECISION) + :interval)"
            " ON CONFLICT (name) DO UPDATE SET next_free = CASE WHEN send_budget.next_free > :now"
            " THEN send_budget.next_free ELSE :now END + :interval"
            " RETURNING next_free - :interval AS slot",
            {"name": BUDGET, "now": now, "interval": interval},
        )
        if row is None:
            raise StorageError("the send budget returned no slot")
        return float(row["slot"])

    async def hold_sends(self, until: float) -> None:
        """Give out no slot before ``until`` (Telegram answered 429 with a retry_after), and note the hold's end."""
        self._shared()
        await self._write_one(
            "INSERT INTO send_budget (name, next_free) VALUES (:name, CAST(:until AS DOUBLE PRECISION)),"
            " (:hold, CAST(:until AS DOUBLE PRECISION))"
            " ON CONFLICT (name) DO UPDATE SET next_free = CASE WHEN send_budget.next_free > :until"
            " THEN send_budget.next_free ELSE :until END",
            {"name": BUDGET, "hold": HOLD, "until": until},
        )

    async def sends_held_until(self) -> float:
        """Return when the latest hold ends (wall-clock seconds); minus infinity if sending was never held."""
        self._shared()
        row = await self._one("SELECT next_free FROM send_budget WHERE name = ?", (HOLD,))
        return float("-inf") if row is None else float(row["next_free"])


class SharedBudget:
    """bot.retention.bulk_sender's SendBudget, shared by every replica through the database."""

    def __init__(self, db: SendingQueries, rate: float):
        self._db = db
        self.interval = 1.0 / rate

    async def reserve(self, now: float) -> float:
        return await self._db.reserve_send_slot(now, self.interval)

    async def hold(self, until: float) -> None:
        await self._db.hold_sends(until)

    async def held_until(self) -> float:
        return await self._db.sends_held_until()
