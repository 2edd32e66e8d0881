"""The database as a file: checked writable before it is opened, and backed up while the bot writes."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

from bot.errors import StorageError
from bot.storage.engine import BUSY_TIMEOUT_MS


def ensure_writable(path: Path) -> None:
    """Refuse, in one line naming the uid that must own them, a database or folder this process cannot write.

    SQLite would open such a file read-only and fail only at the first write, with every learner's update.
    """
    path = Path(path)
    folder = path.parent if path.parent.exists() else next(p for p in path.parents if p.exists())
    if os.statvfs(folder).f_flag & os.ST_RDONLY:
        # No owner could write it: saying who should own it would send the operator the wrong way.
        raise StorageError(
            f"cannot write the database {path}: {folder} is on a read-only file system (a volume mounted "
            "with :ro?); mount it read-write"
        )
    uid = os.geteuid()
    for place in (folder, path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if place.exists() and not os.access(place, os.W_OK):
            owner = place.stat().st_uid
            raise StorageError(
                f"cannot write the database {path}: {place} belongs to uid {owner} and coursebot runs as uid "
                f"{uid}; make uid {uid} its owner (chown -R {uid}:{os.getegid()} {folder})"
            )


def backup(source: Path, target: Path) -> None:
    """Copy a live database to ``target`` with SQLite's online backup; safe while the bot writes."""
    source, target = Path(source), Path(target)
    if not source.is_file():
        raise StorageError(f"there is no database at {source} (set COURSEBOT_DB to its path)")
    if target.exists() and target.resolve() == source.resolve():
        raise StorageError("the backup must go to another file than the database itself")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    try:
        with (
            closing(
                sqlite3.connect(source.resolve().as_uri() + "?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
            ) as src,
            closing(sqlite3.connect(partial)) as dst,
        ):
            src.backup(dst)
        # Only a complete copy takes the target's name, so a failed backup never leaves half a file.
        partial.replace(target)
    except sqlite3.Error as exc:
        partial.unlink(missing_ok=True)
        raise StorageError(f"backup of {source} failed: {exc}") from exc
