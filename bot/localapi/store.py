"""What the built-in Bot API server keeps across restarts: users, chats, messages, polls, files, time zones.

Telegram keeps a chat's history; so does the built-in server, in its own SQLite file
(the bot's progress stays in the bot's database). Changes are saved in the order they
happen by one writer thread, so the event loop never waits on the disk. Update ids
continue after a restart: the bot remembers the ids it has handled and would drop a
reused one as a redelivery.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from bot.errors import StorageError

from .files import StoredFile

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS users (id INTEGER PRIMARY KEY, user TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chats (id INTEGER PRIMARY KEY, chat TEXT NOT NULL, next_message_id INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    chat_id INTEGER NOT NULL, message_id INTEGER NOT NULL, message TEXT NOT NULL,
    PRIMARY KEY (chat_id, message_id)
);
CREATE TABLE IF NOT EXISTS polls (
    id TEXT PRIMARY KEY, chat_id INTEGER NOT NULL, message_id INTEGER NOT NULL, votes TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    file_id TEXT PRIMARY KEY, unique_id TEXT NOT NULL, kind TEXT NOT NULL, mime TEXT NOT NULL,
    width INTEGER NOT NULL, height INTEGER NOT NULL, file_name TEXT, data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS time_zones (user_id INTEGER PRIMARY KEY, zone TEXT NOT NULL);
"""


class Change(NamedTuple):
    """One change to save: kind is user, chat, message, deleted, poll, file, time_zone or update_id."""

    kind: str
    key: int | str  # user id, chat id, poll id or file id (0 for update_id)
    value: Any  # a user, chat or message dict; a message id; (chat id, message id, votes); a StoredFile; a time
    # zone's name; a number


@dataclass
class Snapshot:
    """Everything saved, as the server takes it back at start."""

    users: dict[int, dict[str, Any]] = field(default_factory=dict)
    chats: dict[int, dict[str, Any]] = field(default_factory=dict)
    next_message_ids: dict[int, int] = field(default_factory=dict)
    messages: dict[int, dict[int, dict[str, Any]]] = field(default_factory=dict)
    polls: dict[str, tuple[int, int, dict[int, list[int]]]] = field(default_factory=dict)
    files: list[StoredFile] = field(default_factory=list)
    time_zones: dict[int, str] = field(default_factory=dict)
    next_update_id: int = 0


class StateStore:
    """The server's SQLite file. open(), load(), then save() each change; close() is idempotent."""

    def __init__(self, path: Path):
        self.path = path
        self._writer: ThreadPoolExecutor | None = None
        self._db: sqlite3.Connection | None = None
        self._failed = False

    async def open(self) -> None:
        """Open (or create) the file; StorageError in one line if it cannot be."""
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="localapi-store")
        try:
            await asyncio.get_running_loop().run_in_executor(self._writer, self._connect)
        except (sqlite3.Error, OSError) as exc:
            self._writer.shutdown()
            self._writer = None
            raise StorageError(f"cannot open the web chat's history {self.path}: {exc}") from None

    def _connect(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Only the writer thread uses the connection; check_same_thread guards nothing here.
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(_SCHEMA)
        self._db = db

    async def load(self) -> Snapshot:
        """Everything saved; StorageError in one line if the file is not the web chat's history."""
        assert self._writer is not None, "open() first"
        try:
            return await asyncio.get_running_loop().run_in_executor(self._writer, self._load)
        except (sqlite3.Error, ValueError, KeyError) as exc:
            raise StorageError(f"cannot read the web chat's history {self.path}: {exc}") from None

    def _load(self) -> Snapshot:
        assert self._db is not None
        snapshot = Snapshot()
        for user_id, user in self._db.execute("SELECT id, user FROM users"):
            snapshot.users[user_id] = json.loads(user)
        for chat_id, chat, next_message_id in self._db.execute("SELECT id, chat, next_message_id FROM chats"):
            snapshot.chats[chat_id] = json.loads(chat)
            snapshot.next_message_ids[chat_id] = next_message_id
        for chat_id, message_id, message in self._db.execute("SELECT chat_id, message_id, message FROM messages"):
            snapshot.messages.setdefault(chat_id, {})[message_id] = json.loads(message)
        for poll_id, chat_id, message_id, votes in self._db.execute("SELECT id, chat_id, message_id, votes FROM polls"):
            snapshot.polls[poll_id] = (chat_id, message_id, {int(k): v for k, v in json.loads(votes).items()})
        for file_id, unique_id, kind, mime, width, height, file_name, data in self._db.execute(
            "SELECT file_id, unique_id, kind, mime, width, height, file_name, data FROM files"
        ):
            snapshot.files.append(StoredFile(file_id, unique_id, kind, bytes(data), mime, width, height, file_name))
        snapshot.time_zones.update(self._db.execute("SELECT user_id, zone FROM time_zones"))
        row = self._db.execute("SELECT value FROM counters WHERE name = 'next_update_id'").fetchone()
        snapshot.next_update_id = row[0] if row else 0
        return snapshot

    def save(self, change: Change) -> None:
        """Queue a change; it is written after every change queued before it."""
        if self._writer is not None:
            self._writer.submit(self._write, change)

    def _write(self, change: Change) -> None:
        db = self._db
        if db is None:
            return
        kind, key, value = change
        try:
            if kind == "message":
                db.execute(
                    "INSERT OR REPLACE INTO messages (chat_id, message_id, message) VALUES (?, ?, ?)",
                    (key, value["message_id"], json.dumps(value, ensure_ascii=False)),
                )
                db.execute(
                    "UPDATE chats SET next_message_id = max(next_message_id, ?) WHERE id = ?",
                    (value["message_id"] + 1, key),
                )
            elif kind == "deleted":
                db.execute("DELETE FROM messages WHERE chat_id = ? AND message_id = ?", (key, value))
            elif kind == "chat":
                db.execute(
                    "INSERT INTO chats (id, chat, next_message_id) VALUES (?, ?, 1) "
                    "ON CONFLICT (id) DO UPDATE SET chat = excluded.chat",
                    (key, json.dumps(value, ensure_ascii=False)),
                )
            elif kind == "user":
                db.execute(
                    "INSERT OR REPLACE INTO users (id, user) VALUES (?, ?)",
                    (key, json.dumps(value, ensure_ascii=False)),
                )
            elif kind == "poll":
                chat_id, message_id, votes = value
                db.execute(
                    "INSERT OR REPLACE INTO polls (id, chat_id, message_id, votes) VALUES (?, ?, ?, ?)",
                    (key, chat_id, message_id, json.dumps(votes)),
                )
            elif kind == "file":
                stored: StoredFile = value
                db.execute(
                    "INSERT OR IGNORE INTO files (file_id, unique_id, kind, mime, width, height, file_name, data) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        stored.file_id,
                        stored.unique_id,
                        stored.kind,
                        stored.mime,
                        stored.width,
                        stored.height,
                        stored.file_name,
                        stored.data,
                    ),
                )
            elif kind == "time_zone":
                db.execute("INSERT OR IGNORE INTO time_zones (user_id, zone) VALUES (?, ?)", (key, value))
            elif kind == "update_id":
                db.execute(
                    "INSERT INTO counters (name, value) VALUES ('next_update_id', ?) "
                    "ON CONFLICT (name) DO UPDATE SET value = max(value, excluded.value)",
                    (value,),
                )
        except sqlite3.Error as exc:
            if not self._failed:  # once: a full disk would otherwise log every message
                log.error("cannot save the web chat's history in %s: %s", self.path, exc)
                self._failed = True

    async def close(self) -> None:
        """Write what is queued and close the file. Safe to call twice."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        await asyncio.get_running_loop().run_in_executor(writer, self._close)
        writer.shutdown(wait=True)

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
