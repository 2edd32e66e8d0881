"""Inbox benchmark: what making every update durable before it is confirmed costs, per update.

    .venv/bin/python bench/inbox.py [--updates 1000] [--rounds 3]

The inbox (bot.updates.Inbox on a real database file) stores each getUpdates batch, synced to disk, and marks each
update handled once its work ends. Its peer, in the same run and on the same disk, is what it replaced: one
``INSERT OR IGNORE`` into a table of processed ids per update, in autocommit, never synced. Both are timed for
batches of 1 update (a quiet bot: one update per getUpdates, one sync each) and of 20 (a busy one), in
alternating rounds so that a busy disk hurts both alike.

Prints ONE JSON object: for each batch size, ``inbox_ms_per_update``, ``dedup_ms_per_update`` (medians over the
rounds) and ``ratio`` (inbox / dedup); ``sync_ms``, the median time of one batch's synced commit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiosqlite

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from telegram import Update  # noqa: E402

from bot.storage.db import Database  # noqa: E402
from bot.updates import Inbox  # noqa: E402

BATCHES = (1, 20)


def _update(update_id: int) -> Update:
    chat = {"id": 7, "type": "private"}
    user = {"id": 7, "is_bot": False, "first_name": "Ada"}
    message = {"message_id": update_id, "date": 0, "chat": chat, "from": user, "text": "Next ▶ " * 8}
    return Update.de_json({"update_id": update_id, "message": message}, None)


async def inbox_round(path: Path, first: int, count: int, batch: int, syncs: list[float]) -> float:
    """Return seconds per update: each batch accepted, then each update's work begun and ended, marks flushed."""
    db = await Database.open(path)
    try:
        inbox = Inbox(db)
        updates = [_update(first + i) for i in range(count)]
        started = time.perf_counter()
        for at in range(0, count, batch):
            accepting = time.perf_counter()
            accepted = await inbox.accept(updates[at : at + batch])
            syncs.append(time.perf_counter() - accepting)
            for update in accepted:
                inbox.begin(update)
                inbox.end(update, completed=True)
        await inbox.flush()
        return (time.perf_counter() - started) / count
    finally:
        await db.close()


async def dedup_round(path: Path, first: int, count: int) -> float:
    """Return seconds per update of the dedup the inbox replaced (bot.storage.db.first_delivery, as it was)."""
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        await conn.execute("PRAGMA journal_mode = WAL")
        await conn.execute("PRAGMA synchronous = NORMAL")
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS processed_updates (update_id INTEGER PRIMARY KEY, processed_at TEXT NOT NULL)"
        )
        lock = asyncio.Lock()  # the one writer, as the Database has
        started = time.perf_counter()
        for update_id in range(first, first + count):
            async with lock:
                await conn.execute(
                    "INSERT OR IGNORE INTO processed_updates (update_id, processed_at) VALUES (?, ?)",
                    (update_id, "2030-05-01T12:00:00.000+00:00"),
                )
        return (time.perf_counter() - started) / count


async def main_async(args: argparse.Namespace) -> dict:
    out: dict = {"updates": args.updates, "rounds": args.rounds}
    with tempfile.TemporaryDirectory(prefix="coursebot-bench-inbox-", dir=args.dir) as tmp:
        folder = Path(tmp)
        for batch in BATCHES:
            inbox_times, dedup_times, syncs = [], [], []
            for round_ in range(args.rounds):
                first = 1 + round_ * args.updates
                inbox_times.append(
                    await inbox_round(folder / f"inbox-{batch}.sqlite3", first, args.updates, batch, syncs)
                )
                dedup_times.append(await dedup_round(folder / f"dedup-{batch}.sqlite3", first, args.updates))
            inbox_ms, dedup_ms = statistics.median(inbox_times) * 1000, statistics.median(dedup_times) * 1000
            out[f"batch_{batch}"] = {
                "inbox_ms_per_update": round(inbox_ms, 3),
                "dedup_ms_per_update": round(dedup_ms, 3),
                "ratio": round(inbox_ms / dedup_ms, 2),
                "sync_ms": round(statistics.median(syncs) * 1000, 3),
            }
            print(f"batch {batch}: {out[f'batch_{batch}']}", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--updates", type=int, default=1000, help="updates per round (default 1000)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of each (default 3)")
    p.add_argument("--dir", help="where the database files go (default: the system's temporary folder)")
    args = p.parse_args(argv)
    if not 20 <= args.updates <= 1_000_000 or not 1 <= args.rounds <= 50:
        p.error("--updates must be 20..1000000 and --rounds 1..50")
    print(json.dumps(asyncio.run(main_async(args))))


if __name__ == "__main__":
    main()
