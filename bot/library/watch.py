"""Watch the lesson files and catalogs; when they change and then hold still, reload.

A scan compares each file's size and modification time, so it needs nothing from the
platform and costs a few dozen stat calls. Editors save in bursts (a temporary file, a
rename, a second write); the watcher reloads only once two scans in a row agree, so a
half-written file is not linted. The waiting goes through an injected sleep, which
tests replace to step the watcher without waiting.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

log = logging.getLogger(__name__)

Fingerprint = frozenset[tuple[str, int, int]]
WATCHED = ("*.yaml", "*.yml", "*.po")
INTERVAL = 1.0  # seconds between scans


def fingerprint(roots: Iterable[Path]) -> Fingerprint:
    """(path, size, mtime in ns) of every watched file under `roots` (blocking: stat calls)."""
    found = set()
    for root in roots:
        for pattern in WATCHED:
            for path in root.rglob(pattern):
                try:
                    stat = path.stat()
                except OSError:
                    continue  # removed between listing and stat: the next scan sees it gone
                found.add((str(path), stat.st_size, stat.st_mtime_ns))
    return frozenset(found)


class Watcher:
    """Call `on_change` after the files under `roots` changed and settled. ``await run()`` until cancelled."""

    def __init__(
        self,
        roots: Iterable[Path],
        on_change: Callable[[], Awaitable[object]],
        *,
        interval: float = INTERVAL,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ):
        self.roots = tuple(roots)
        self.on_change = on_change
        self.interval = interval
        self._sleep = sleep

    async def scan(self) -> Fingerprint:
        return await asyncio.to_thread(fingerprint, self.roots)

    async def run(self) -> None:
        seen = await self.scan()
        while True:
            await self._sleep(self.interval)
            now = await self.scan()
            if now == seen:
                continue
            while True:  # wait until two scans agree: the save is over
                await self._sleep(self.interval)
                settled = await self.scan()
                if settled == now:
                    break
                now = settled
            seen = now
            log.info("lesson files or catalogs changed; reloading")
            try:
                await self.on_change()
            except Exception:
                # a failed reload must not stop watching; the next change tries again
                log.exception("reloading after a file change failed")
