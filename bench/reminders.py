"""Benchmark of the reminder schedule as data: the sweep, the database's growth, the sender against Telegram's limit.

    python bench/reminders.py [--learners 100000] [--month-sample 500]

Prints one JSON object:

  learners, cards_per_learner            the database built: every learner with reminders on, cards met in lessons
  find_due_ms / scan_due_ms / find_ratio the sweep's query for learners due now (a typical minute: learners / 1440),
                                         through the remind_at index, against the same query made to scan the table
  due_cards_ms                           the counts of due cards (and the next due) for one minute's learners
  sweep_minute_ms                        one whole sweep of a typical minute: find, read, plan, claim, send (to a
                                         send that answers at once, on virtual time), record outcomes
  sweep_burst_ms, burst                  the same for a burst: 10,000 learners due in the same minute
  bytes_per_learner_month                the database's growth per learner over a month of daily reviews (FSRS
                                         reviews of the cards due each day, the review log, activity, streak days,
                                         one reminder a day), measured on ``--month-sample`` learners
  sender_per_s / limit_per_s / sender_ratio / refused_429
                                         10,000 messages drained on virtual time against the built-in Bot API
                                         server's flood limit (30 a second): the pace reached, how close it comes,
                                         and the 429s the server answered (each waited out)

No target is asserted (tests/test_bench_smoke.py keeps it running at a tiny size).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bot.library.live import Library
from bot.localapi.errors import ApiError
from bot.localapi.floodlimit import FloodLimit
from bot.retention import review
from bot.retention.bulk_sender import BulkSender, Delivery, LocalBudget, Sent, Wait
from bot.retention.review import CardKey, ItemKind, ReviewCard
from bot.storage.db import Database
from bot.sweep import Outgoing, ReminderSweep

ROOT = Path(__file__).resolve().parent.parent
NOW = dt.datetime(2026, 3, 10, 12, 0, tzinfo=dt.UTC)
CARDS = 20  # a learner who met about five lessons' questions and drills
BURST = 10_000


class VirtualClock:
    """Time that moves only when the sender sleeps."""

    def __init__(self, now: dt.datetime):
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


def populate(path: Path, learners: int, rng: random.Random) -> None:
    """Write ``learners`` learners, reminders on and due across the next day, each with CARDS cards."""
    now = int(NOW.timestamp())
    conn = sqlite3.connect(path)
    with conn:
        conn.executemany(
            "INSERT INTO learners (user_id, chat_id, created_at, updated_at, reminders, remind_at)"
            " VALUES (?, ?, 'x', 'x', 'on', ?)",
            ((u, u, now + 60 + rng.randrange(86_400)) for u in range(1, learners + 1)),
        )
        conn.executemany(
            "INSERT INTO review_cards (card_id, user_id, lesson_id, kind, item_id, state, step, stability,"
            " difficulty, due, last_review) VALUES (?, ?, ?, 'question', ?, 2, NULL, 5.0, 5.0, ?, ?)",
            (
                # The first card of each is due: something waits for every learner whose reminder comes.
                (
                    u * CARDS + c,
                    u,
                    f"lesson-{c // 4}",
                    f"q{c}",
                    now - 3600 if c == 0 else now + rng.randrange(20 * 86_400),
                    now - 86_400,
                )
                for u in range(1, learners + 1)
                for c in range(CARDS)
            ),
        )
        conn.executemany(
            "INSERT INTO activity (user_id, at) VALUES (?, ?)",
            ((u, now - day * 86_400 - rng.randrange(3600)) for u in range(1, learners + 1) for day in range(1, 8)),
        )
    conn.close()


def make_due(path: Path, count: int) -> list[int]:
    """Make ``count`` learners due now; return who."""
    conn = sqlite3.connect(path)
    with conn:
        ids = [row[0] for row in conn.execute("SELECT user_id FROM learners ORDER BY random() LIMIT ?", (count,))]
        conn.executemany(
            "UPDATE learners SET remind_at = ?, reminders = 'on', remind_snoozed = 0 WHERE user_id = ?",
            [(int(NOW.timestamp()) - 1, u) for u in ids],
        )
    conn.close()
    return ids


def timed_ms(work, repeat: int = 5) -> float:
    """Return the median wall milliseconds of ``work()``."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        samples.append((time.perf_counter() - start) * 1000)
    return sorted(samples)[len(samples) // 2]


def query_figures(path: Path, learners: int) -> dict[str, float]:
    """Time finding a typical minute's due learners by index and by scan, and their due cards."""
    now = int(NOW.timestamp())
    due = make_due(path, max(1, learners // 1440))
    conn = sqlite3.connect(path)
    find = "SELECT user_id FROM learners WHERE remind_at IS NOT NULL AND remind_at <= ? ORDER BY remind_at LIMIT 2000"
    scan = "SELECT user_id FROM learners NOT INDEXED WHERE remind_at IS NOT NULL AND remind_at <= ? ORDER BY remind_at"
    ids = json.dumps(due)
    cards = (
        "SELECT user_id, sum(due <= ?), min(due) FROM review_cards WHERE user_id IN (SELECT value FROM json_each(?))"
        " GROUP BY user_id"
    )
    figures = {
        "find_due_ms": timed_ms(lambda: conn.execute(find, (now,)).fetchall()),
        "scan_due_ms": timed_ms(lambda: conn.execute(scan, (now,)).fetchall()),
        "due_cards_ms": timed_ms(lambda: conn.execute(cards, (now, ids)).fetchall()),
    }
    conn.close()
    figures["find_ratio"] = figures["scan_due_ms"] / figures["find_due_ms"] if figures["find_due_ms"] else 0.0
    return figures


async def sweep_ms(path: Path, library: Library, count: int) -> float:
    """Run one sweep with ``count`` learners due; return its wall milliseconds (sending on virtual time)."""
    make_due(path, count)
    clock = VirtualClock(NOW)

    async def send(item: Outgoing) -> Delivery:
        return Sent()

    db = await Database.open(path, clock=clock)
    try:
        sweep = ReminderSweep(db, library, send, clock=clock, sleep=clock.sleep)
        start = time.perf_counter()
        report = await sweep.once()
        elapsed = (time.perf_counter() - start) * 1000
    finally:
        await db.close()
    if report.sent + report.paused < count * 0.9:
        raise SystemExit(f"the sweep sent {report.sent} of {count} due reminders: {report}")
    return elapsed


async def month_growth(sample: int, rng: random.Random) -> float:
    """Return the database's growth in bytes per learner over 30 days of daily reviews, on ``sample`` learners."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "month.sqlite3"
        clock = VirtualClock(NOW)
        db = await Database.open(path, clock=clock)
        try:
            conn = sqlite3.connect(path)
            with conn:
                conn.executemany(
                    "INSERT INTO learners (user_id, chat_id, created_at, updated_at, reminders)"
                    " VALUES (?, ?, 'x', 'x', 'on')",
                    [(u, u) for u in range(1, sample + 1)],
                )
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.close()
            await db.check_writable()
            before = _size(path)
            store_cards: dict[int, list[ReviewCard]] = {}
            rows: list[tuple] = []
            logs: list[tuple] = []
            for u in range(1, sample + 1):
                cards = []
                for c in range(CARDS):
                    card, entry = review.meet(
                        u, CardKey(f"lesson-{c // 4}", ItemKind.QUESTION, f"q{c}"), rng.random() < 0.7, NOW
                    )
                    cards.append(card)
                    logs.append(tuple(entry.columns()[k] for k in ("card_id", "learner", "rating", "reviewed_at")))
                store_cards[u] = cards
            for day in range(1, 31):
                moment = NOW + dt.timedelta(days=day, minutes=rng.randrange(60))
                for u, cards in store_cards.items():
                    for i, card in enumerate(cards):
                        if card.due_at <= moment:
                            cards[i], entry = review.review(card, rng.random() < 0.85, moment)
                            logs.append(
                                tuple(entry.columns()[k] for k in ("card_id", "learner", "rating", "reviewed_at"))
                            )
                    rows.append((u, int(moment.timestamp())))
            conn = sqlite3.connect(path)
            with conn:
                conn.executemany(
                    "INSERT INTO review_cards (card_id, user_id, lesson_id, kind, item_id, state, step, stability,"
                    " difficulty, due, last_review) VALUES (:card_id, :learner, :lesson, :kind, :item, :state, :step,"
                    " :stability, :difficulty, :due, :last_review)",
                    [card.columns() for cards in store_cards.values() for card in cards],
                )
                conn.executemany(
                    "INSERT INTO review_log (card_id, user_id, rating, reviewed_at) VALUES (?, ?, ?, ?)", logs
                )
                # A session a day (three activity rows), the day in the streak, the day's reminder.
                conn.executemany(
                    "INSERT OR IGNORE INTO activity (user_id, at) VALUES (?, ?)",
                    [(u, at + step * 300) for u, at in rows for step in range(3)],
                )
                conn.executemany(
                    "INSERT OR IGNORE INTO streak_days (user_id, day) VALUES (?, ?)",
                    [(u, dt.datetime.fromtimestamp(at, dt.UTC).date().isoformat()) for u, at in rows],
                )
                conn.executemany(
                    "INSERT OR IGNORE INTO reminders_sent (user_id, day, snoozed, claimed_at, outcome)"
                    " VALUES (?, ?, 0, ?, 'sent')",
                    [(u, dt.datetime.fromtimestamp(at, dt.UTC).date().isoformat(), at) for u, at in rows],
                )
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.close()
        finally:
            await db.close()
        return (_size(path) - before) / sample


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


async def sender_figures(count: int) -> dict[str, float]:
    """Drain ``count`` messages on virtual time against the built-in server's flood limit; return the pace."""
    clock = VirtualClock(NOW)
    flood = FloodLimit(clock=lambda: clock.now.timestamp())

    async def send(chat: int) -> Delivery:
        try:
            flood.check("sendMessage", chat)
        except ApiError as exc:
            return Wait(float((exc.parameters or {}).get("retry_after", 1)))
        return Sent()

    sender: BulkSender[int] = BulkSender(send, LocalBudget(), lambda: clock.now.timestamp(), clock.sleep)
    start = clock.now
    report = await sender.drain(range(count))
    seconds = (clock.now - start).total_seconds() or 1.0
    rate = report.sent / seconds
    return {
        "sender_per_s": round(rate, 2),
        "limit_per_s": flood.overall_per_second,
        "sender_ratio": round(rate / flood.overall_per_second, 3),
        "refused_429": flood.refused,
    }


async def main(learners: int, sample: int) -> dict[str, object]:
    rng = random.Random(18)
    library = Library(ROOT / "lessons", ROOT / "locales")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "reminders.sqlite3"
        db = await Database.open(path)
        await db.close()
        populate(path, learners, rng)
        result: dict[str, object] = {"learners": learners, "cards_per_learner": CARDS}
        result.update({k: round(v, 3) for k, v in query_figures(path, learners).items()})
        result["sweep_minute_ms"] = round(await sweep_ms(path, library, max(1, learners // 1440)), 1)
        burst = min(BURST, learners)
        result["burst"] = burst
        result["sweep_burst_ms"] = round(await sweep_ms(path, library, burst), 1)
    result["bytes_per_learner_month"] = round(await month_growth(sample, rng))
    result.update(await sender_figures(min(BURST, max(learners, 100))))
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--learners", type=int, default=100_000)
    parser.add_argument("--month-sample", type=int, default=500)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.learners, args.month_sample))))
