"""The tables of what brings a learner back (migration 9): review cards and their log, the reminder schedule,
activity for the learner's habit, and the streak's days.

Plain rows in and out (bot.retention turns them into cards and plans; storage sits below it). Times are
whole seconds since the Unix epoch, UTC; every value is bound; each method is one transaction. Activity is noted in
the update's own write (bot.changes.ActivityNoted, bot.storage.outcomes).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.storage.backend import Row
from bot.storage.engine import Engine

# A card met for the first time; one met before is kept (its first answer stays its first review).
MEET_CARD = (
    "INSERT INTO review_cards (card_id, user_id, lesson_id, kind, item_id, state, step, stability,"
    " difficulty, due, last_review) VALUES (:card_id, :learner, :lesson, :kind, :item, :state, :step, :stability,"
    " :difficulty, :due, :last_review) ON CONFLICT DO NOTHING"
)
# A card rescheduled, by compare-and-set on its last review: a second answer to the same showing changes nothing.
REVIEW_CARD = (
    "UPDATE review_cards SET state = :state, step = :step, stability = :stability, difficulty = :difficulty,"
    " due = :due, last_review = :last_review WHERE card_id = :card_id AND last_review IS NOT DISTINCT FROM :before"
)
# The review log's entry: the caller appends it only when MEET_CARD or REVIEW_CARD just wrote its card (their
# rows-changed count), so a replayed answer logs nothing twice; an update's entry is unique (review_log_once).
LOG_REVIEW = (
    "INSERT INTO review_log (card_id, user_id, rating, reviewed_at, duration_ms, update_id)"
    " VALUES (:card_id, :learner, :rating, :reviewed_at, :duration_ms, :update_id) ON CONFLICT DO NOTHING"
)
STREAK_DAY = "INSERT INTO streak_days (user_id, day) VALUES (:user, :day) ON CONFLICT DO NOTHING"


def card_params(card: Mapping[str, Any]) -> dict[str, Any]:
    """Return a card's columns (ReviewCard.columns) as MEET_CARD and REVIEW_CARD bind them."""
    names = ("card_id", "learner", "lesson", "kind", "item", "state", "step", "stability", "difficulty", "due")
    return {**{name: card[name] for name in names}, "last_review": card["last_review"]}


def log_params(entry: Mapping[str, Any], update_id: int | None) -> dict[str, Any]:
    """Return a review's entry (ReviewEntry.columns) as LOG_REVIEW binds it."""
    names = ("card_id", "learner", "rating", "reviewed_at", "duration_ms")
    return {**{name: entry[name] for name in names}, "update_id": update_id}


CARD_COLUMNS = (
    "card_id, user_id AS learner, lesson_id AS lesson, kind, item_id AS item, state, step, stability, difficulty,"
    " due, last_review"
)


@dataclass(frozen=True)
class ReminderRow:
    """A learner's reminder record as stored, with what waits for them: the sweep plans from it."""

    user_id: int
    chat_id: int
    language: str | None
    telegram_language: str | None
    status: str
    remind_at: int | None
    snoozed: bool
    shift_minutes: int
    ignored: int
    last_reminder: int | None
    utc_offset_minutes: int | None
    activity: tuple[int, ...]
    cards_due: int
    next_card_due: int | None
    unfinished_lesson: str | None


@dataclass(frozen=True)
class Claim:
    """A reminder claimed under its unique key, not yet known to be delivered."""

    user_id: int
    day: str
    snoozed: bool


class RetentionStore:
    """Review cards, reminders, activity and streak days, in the progress database."""

    def __init__(self, db: Engine):
        self._db = db

    # Review cards

    async def cards(self, user_id: int) -> list[dict[str, Any]]:
        """Return every card of the learner, as rows by column name (ReviewCard.from_columns reads them)."""
        rows = await self._db._all(f"SELECT {CARD_COLUMNS} FROM review_cards WHERE user_id = ?", (user_id,))
        return [dict(row) for row in rows]

    async def due_cards(self, user_id: int, now: int, limit: int) -> list[dict[str, Any]]:
        """Return up to ``limit`` cards due at ``now``, most overdue first."""
        rows = await self._db._all(
            f"SELECT {CARD_COLUMNS} FROM review_cards WHERE user_id = ? AND due <= ?"
            " ORDER BY due, lesson_id, kind, item_id LIMIT ?",
            (user_id, now, limit),
        )
        return [dict(row) for row in rows]

    async def card(self, user_id: int, card_id: int) -> dict[str, Any] | None:
        """Return one card of the learner, or None."""
        row = await self._db._one(
            f"SELECT {CARD_COLUMNS} FROM review_cards WHERE card_id = ? AND user_id = ?", (card_id, user_id)
        )
        return dict(row) if row is not None else None

    async def start_review(self, user_id: int, seed: int) -> None:
        """Note the shuffle of the review starting now: every card it shows draws its order from it."""
        await self._db._write_one("UPDATE learners SET review_seed = ? WHERE user_id = ?", (seed, user_id))

    async def review_seed(self, user_id: int) -> int:
        """Return the shuffle of the learner's review under way."""
        row = await self._db._one("SELECT review_seed FROM learners WHERE user_id = ?", (user_id,))
        return int(row["review_seed"]) if row is not None else 0

    async def review_poll_sent(
        self, poll_id: str, user_id: int, card_id: int, options: Sequence[str], now: int
    ) -> None:
        """Remember a review poll sent, with its options in the order shown."""
        await self._db._write_one(
            "INSERT INTO review_polls (poll_id, user_id, card_id, options, sent_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (poll_id) DO UPDATE SET user_id = excluded.user_id, card_id = excluded.card_id,"
            " options = excluded.options, sent_at = excluded.sent_at",
            (poll_id, user_id, card_id, " ".join(options), now),
        )

    async def review_poll(self, poll_id: str) -> tuple[int, int, tuple[str, ...]] | None:
        """Return (learner, card id, option ids as shown) of a review poll, or None if it is not one."""
        row = await self._db._one("SELECT user_id, card_id, options FROM review_polls WHERE poll_id = ?", (poll_id,))
        if row is None:
            return None
        return int(row["user_id"]), int(row["card_id"]), tuple(row["options"].split())

    # Activity and the streak

    async def streak_days(self, user_id: int, since: str) -> list[str]:
        """Return the learner's streak days from ``since`` on (ISO dates)."""
        rows = await self._db._all(
            "SELECT day FROM streak_days WHERE user_id = ? AND day >= ? ORDER BY day", (user_id, since)
        )
        return [row["day"] for row in rows]

    async def forget_activity(self, before: int) -> int:
        """Delete activity older than ``before`` (the habit reads only the last weeks); return how many rows."""
        return await self._db._write_one("DELETE FROM activity WHERE at < ?", (before,))

    # Reminders

    async def reminder_row(self, user_id: int, now: int) -> ReminderRow | None:
        """Return the learner's reminder record and what waits for them at ``now``."""
        rows = await self.reminder_rows([user_id], now)
        return rows[0] if rows else None

    async def reminder_rows(self, user_ids: Sequence[int], now: int) -> list[ReminderRow]:
        """Return the reminder records of these learners, in one pass per table (the sweep's batch)."""
        if not user_ids:
            return []
        # The learners as one bound JSON array, its elements read back as integers (an index range each).
        ids = json.dumps(list(user_ids))
        learners = await self._db._all(
            "SELECT user_id, chat_id, language, telegram_language, reminders, remind_at, remind_snoozed,"
            " reminder_shift, reminders_ignored, last_reminder, utc_offset FROM learners"
            " WHERE user_id IN (SELECT CAST(value AS BIGINT) FROM json_each(?))",
            (ids,),
        )
        cards = {
            row["user_id"]: row
            for row in await self._db._all(
                "SELECT user_id, sum(CASE WHEN due <= ? THEN 1 ELSE 0 END) AS due_now, min(due) AS next_due"
                " FROM review_cards WHERE user_id IN (SELECT CAST(value AS BIGINT) FROM json_each(?)) GROUP BY user_id",
                (now, ids),
            )
        }
        unfinished = {
            row["user_id"]: row["lesson_id"]
            for row in await self._db._all(
                "SELECT user_id, min(lesson_id) AS lesson_id FROM lesson_progress"
                " WHERE user_id IN (SELECT CAST(value AS BIGINT) FROM json_each(?)) AND completed_at IS NULL"
                " GROUP BY user_id",
                (ids,),
            )
        }
        activity: dict[int, list[int]] = {}
        for row in await self._db._all(
            "SELECT user_id, at FROM activity WHERE user_id IN (SELECT CAST(value AS BIGINT) FROM json_each(?))"
            " ORDER BY user_id, at",
            (ids,),
        ):
            activity.setdefault(row["user_id"], []).append(row["at"])
        return [_reminder_row(row, cards.get(row["user_id"]), unfinished, activity) for row in learners]

    async def due_reminders(self, now: int, limit: int) -> list[int]:
        """Return learners whose reminder time has come, soonest first (through the remind_at index)."""
        rows = await self._db._all(
            "SELECT user_id FROM learners WHERE remind_at IS NOT NULL AND remind_at <= ? ORDER BY remind_at LIMIT ?",
            (now, limit),
        )
        return [row["user_id"] for row in rows]

    async def plan(self, user_id: int, remind_at: int | None, *, snoozed: bool = False) -> None:
        """Set when the learner's next reminder is due (None: none planned)."""
        await self._db._write_one(
            "UPDATE learners SET remind_at = ?, remind_snoozed = ? WHERE user_id = ?",
            (remind_at, int(snoozed), user_id),
        )

    async def set_status(
        self, user_id: int, status: str, remind_at: int | None, *, only_from: str | None = None
    ) -> bool:
        """Set the learner's reminder status and next time; with ``only_from``, only if the status is that now."""
        changed = await self._db._write_one(
            "UPDATE learners SET reminders = ?, remind_at = ?, remind_snoozed = 0,"
            " reminders_ignored = CASE WHEN ? = 'on' THEN 0 ELSE reminders_ignored END"
            " WHERE user_id = ? AND (CAST(? AS TEXT) IS NULL OR reminders = ?)",
            (status, remind_at, status, user_id, only_from, only_from),
        )
        return changed == 1

    async def set_shift(self, user_id: int, minutes: int) -> None:
        """Store how far the learner moved their reminder (minutes, + later)."""
        await self._db._write_one("UPDATE learners SET reminder_shift = ? WHERE user_id = ?", (minutes, user_id))

    async def claim(self, claims: Sequence[tuple[Claim, int | None, str]], now: int) -> list[Claim]:
        """Claim reminders under their unique (learner, day) keys and plan each learner's next; return the claimed.

        Each item is (key, the next reminder time, the status after). A key claimed before (another sweep, a
        start before a crash) claims nothing: that reminder went out or is on its way already.
        """
        claimed: list[Claim] = []
        async with self._db._write() as conn:
            # In learner order: two replicas sweeping at once claim overlapping learners, and rows locked in one
            # order never wait on each other in a cycle (PostgreSQL found such a deadlock on reminders_sent).
            for claim, remind_at, status in sorted(claims, key=lambda item: (item[0].user_id, item[0].day)):
                claimed_now = await conn.execute(
                    "INSERT INTO reminders_sent (user_id, day, snoozed, claimed_at) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT DO NOTHING",
                    (claim.user_id, claim.day, int(claim.snoozed), now),
                )
                await conn.execute(
                    "UPDATE learners SET remind_at = ?, remind_snoozed = 0, reminders = ? WHERE user_id = ?"
                    " AND reminders IN ('on', 'paused')",
                    (remind_at, status, claim.user_id),
                )
                if claimed_now == 1:
                    await conn.execute(
                        "UPDATE learners SET last_reminder = ?, reminders_ignored = reminders_ignored + 1"
                        " WHERE user_id = ?",
                        (now, claim.user_id),
                    )
                    claimed.append(claim)
        return claimed

    async def unsent(self, claimed_before: int) -> list[Claim]:
        """Return reminders claimed before ``claimed_before`` whose sending never finished (the bot stopped)."""
        rows = await self._db._all(
            "SELECT user_id, day, snoozed FROM reminders_sent WHERE outcome IS NULL AND claimed_at < ?",
            (claimed_before,),
        )
        return [Claim(row["user_id"], row["day"], bool(row["snoozed"])) for row in rows]

    async def delivered(self, outcomes: Sequence[tuple[Claim, str]]) -> None:
        """Record how each claimed reminder went: sent, blocked, failed or paused."""
        async with self._db._write() as conn:
            await conn.executemany(
                "UPDATE reminders_sent SET outcome = ? WHERE user_id = ? AND day = ? AND snoozed = ?",
                [(outcome, c.user_id, c.day, int(c.snoozed)) for c, outcome in outcomes],
            )

    async def blocked(self, user_id: int) -> None:
        """The learner blocked the bot: no reminder any more, until they turn reminders on themselves."""
        await self._db._write_one(
            "UPDATE learners SET reminders = 'blocked', remind_at = NULL WHERE user_id = ? AND reminders != 'off'",
            (user_id,),
        )

    async def offer_and_card(self, user_id: int) -> tuple[str, bool]:
        """Return the learner's reminder status and whether their completion card went out (what a finished lesson
        may change, in the update's own write: bot.changes.RemindersOffered, CompletionCardClaimed)."""
        row = await self._db._one("SELECT reminders, completion_card_at FROM learners WHERE user_id = ?", (user_id,))
        return ("unasked", False) if row is None else (str(row["reminders"]), row["completion_card_at"] is not None)


def _reminder_row(
    row: Row, cards: Row | None, unfinished: Mapping[int, str], activity: Mapping[int, list[int]]
) -> ReminderRow:
    user_id = int(row["user_id"])
    return ReminderRow(
        user_id=user_id,
        chat_id=int(row["chat_id"]),
        language=row["language"],
        telegram_language=row["telegram_language"],
        status=str(row["reminders"]),
        remind_at=row["remind_at"],
        snoozed=bool(row["remind_snoozed"]),
        shift_minutes=int(row["reminder_shift"]),
        ignored=int(row["reminders_ignored"]),
        last_reminder=row["last_reminder"],
        utc_offset_minutes=row["utc_offset"],
        activity=tuple(activity.get(user_id, ())),
        cards_due=int(cards["due_now"] or 0) if cards is not None else 0,
        next_card_due=cards["next_due"] if cards is not None else None,
        unfinished_lesson=unfinished.get(user_id),
    )
