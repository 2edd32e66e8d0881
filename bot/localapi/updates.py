"""The update queue behind getUpdates: ids, offsets, long polling, conflicts, redelivery.

Semantics follow Telegram:
* an update stays pending until a getUpdates with a higher offset confirms it, so a bot
  that does not advance its offset gets the same updates again;
* a negative offset keeps only the last -offset updates;
* allowed_updates changes what Telegram *generates* from then on: updates of other
  types are never queued (pending ones are not filtered);
* a new getUpdates terminates a long poll that is still waiting, which then fails with
  409 "Conflict: terminated by other getUpdates request; ..."; that is how Telegram
  tells two bot instances apart, and it keeps a restarted bot working whose previous
  long poll connection is still half-open.

Long polling is event driven: injecting an update resolves the waiting future at once.
While a webhook is set, getUpdates is refused and ``webhooks.WebhookDelivery`` takes the updates instead
(``load``, ``forget``), told of each new one through ``listener``.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import time
from collections.abc import Callable, Container, Iterable
from typing import Any

from bot.telegram_rules.limits import DEFAULT_UPDATE_TYPES, GET_UPDATES_LIMIT_MAX, UPDATE_TYPES

from .errors import ApiError, bad_request

CONFLICT = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
_WOKEN, _TIMED_OUT, _TERMINATED = "woken", "timed out", "terminated"


def update_type(update: dict[str, Any]) -> str:
    for key in update:
        if key != "update_id":
            return key
    return ""


class UpdateQueue:
    def __init__(
        self, first_update_id: int, on_fetch: Callable[[], None], on_push: Callable[[int], None] | None = None
    ):
        self._next_id = first_update_id
        self._on_push = on_push  # told the next free update id, so a restart never reuses one
        self._pending: list[dict[str, Any]] = []  # sorted by update_id, waiting for confirmation
        self._forced: list[dict[str, Any]] = []  # redeliveries, sent once regardless of the offset
        self._unfetched: set[int] = set()  # ids never returned by getUpdates yet
        self._confirmed_below = 0  # every id below this was confirmed by an offset
        self._poller: asyncio.Future[str] | None = None
        self._on_fetch = on_fetch
        self.allowed: frozenset[str] = DEFAULT_UPDATE_TYPES
        self.history: dict[int, dict[str, Any]] = {}  # every queued update by id, for redeliver()
        self.dropped = 0  # updates Telegram would not have generated (allowed_updates)
        self.arrived: dict[int, float] = {}  # update id -> time.monotonic() it was queued (webhook expiry)
        self.listener: Callable[[], None] | None = None  # the webhook delivery, told of each new update

    @property
    def settled(self) -> bool:
        """True when every queued update has been returned by getUpdates at least once."""
        return not self._unfetched and not self._forced

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def push(self, update: dict[str, Any]) -> int | None:
        """Queue an update (assigning update_id if missing); None if allowed_updates excludes it."""
        update_id = update.get("update_id")
        if update_id is None:
            update_id = update["update_id"] = self._next_id
        self._next_id = max(self._next_id, update_id + 1)
        if self._on_push is not None:
            self._on_push(self._next_id)
        if update_type(update) not in self.allowed:
            self.dropped += 1
            return None
        pending = self._pending
        if pending and pending[-1]["update_id"] >= update_id:
            pending.append(update)
            pending.sort(key=lambda u: u["update_id"])  # only for hand-made, out-of-order ids
        else:
            pending.append(update)
        self.history[update_id] = update
        self.arrived[update_id] = time.monotonic()
        self._unfetched.add(update_id)
        self._wake()
        return update_id

    def skip_to(self, next_update_id: int) -> None:
        """Number the next update no lower than `next_update_id` (ids from before a restart stay used)."""
        self._next_id = max(self._next_id, next_update_id)

    def redeliver(self, update_id: int) -> None:
        """Send an already delivered update again with the same id (at-least-once delivery)."""
        update = self.history.get(update_id)
        if update is None:
            raise KeyError(f"update {update_id} was never queued")
        self._forced.append(update)
        self._wake()

    def drop_pending(self) -> None:
        """deleteWebhook/setWebhook with drop_pending_updates."""
        self._pending.clear()
        self._forced.clear()
        self._unfetched.clear()

    def set_allowed(self, allowed: object) -> None:
        if not isinstance(allowed, list) or not all(isinstance(t, str) for t in allowed):
            raise bad_request("can't parse allowed_updates JSON object")
        unknown = [t for t in allowed if t not in UPDATE_TYPES]
        if unknown:
            raise bad_request(f"unknown update type {unknown[0]!r} in allowed_updates")
        self.allowed = frozenset(allowed) if allowed else DEFAULT_UPDATE_TYPES

    async def get(self, offset: int | None, limit: int | None, timeout: int | float | None) -> list[dict[str, Any]]:
        if self._poller is not None and not self._poller.done():
            self._poller.set_result(_TERMINATED)
        self._confirm(offset or 0)
        if limit is None or not 1 <= limit <= GET_UPDATES_LIMIT_MAX:
            limit = GET_UPDATES_LIMIT_MAX  # the Bot API server clamps rather than refuses
        batch = self._take(limit)
        if batch or not timeout or timeout <= 0:
            return batch
        loop = asyncio.get_running_loop()
        waiter = self._poller = loop.create_future()
        timer = loop.call_later(timeout, _resolve, waiter, _TIMED_OUT)
        try:
            reason = await waiter
        finally:
            timer.cancel()
            if self._poller is waiter:
                self._poller = None
        if reason == _TERMINATED:
            raise ApiError(409, CONFLICT)
        return self._take(limit)

    def release(self) -> None:
        """Answer a waiting long poll now, e.g. before the server shuts down."""
        if self._poller is not None and not self._poller.done():
            self._poller.set_result(_TIMED_OUT)

    def load(self, offset: int, limit: int, exclude: Container[int]) -> list[dict[str, Any]]:
        """For the webhook: redeliveries, then pending updates from id ``offset`` on, up to ``limit``, none in
        ``exclude`` (those loaded already)."""
        batch = [u for u in self._forced if u["update_id"] not in exclude][:limit]
        self._forced = []
        start = bisect.bisect_left(self._pending, offset, key=_id)
        for update in itertools.islice(self._pending, start, None):
            if len(batch) >= limit:
                break
            if update["update_id"] not in exclude:
                batch.append(update)
        return batch

    def forget(self, update_id: int) -> None:
        """For the webhook: ``update_id`` was delivered, or dropped; it is no longer pending."""
        pending = self._pending
        at = bisect.bisect_left(pending, update_id, key=_id)
        if at < len(pending) and pending[at]["update_id"] == update_id:
            del pending[at]
        self._unfetched.discard(update_id)
        self._on_fetch()

    def _wake(self) -> None:
        if self.listener is not None:
            self.listener()
        if self._poller is not None and not self._poller.done():
            self._poller.set_result(_WOKEN)

    def _confirm(self, offset: int) -> None:
        pending = self._pending
        if offset < 0:
            keep = pending[offset:]
            self._forget(pending[: len(pending) - len(keep)])
            self._pending = keep
            if keep:
                self._confirmed_below = keep[0]["update_id"]
            return
        if offset <= self._confirmed_below:
            return
        self._confirmed_below = offset
        cut = 0
        while cut < len(pending) and pending[cut]["update_id"] < offset:
            cut += 1
        if cut:
            self._forget(pending[:cut])
            del pending[:cut]

    def _forget(self, updates: Iterable[dict[str, Any]]) -> None:
        for update in updates:
            self._unfetched.discard(update["update_id"])

    def _take(self, limit: int) -> list[dict[str, Any]]:
        batch = self._pending[:limit]
        if self._forced:
            # a redelivered update may still be pending too: send it once
            merged: dict[int, dict[str, Any]] = {u["update_id"]: u for u in self._forced}
            merged.update((u["update_id"], u) for u in batch)
            batch = [merged[i] for i in sorted(merged)[:limit]]
            sent = {u["update_id"] for u in batch}
            self._forced = [u for u in self._forced if u["update_id"] not in sent]
        if batch:
            unfetched = self._unfetched
            if unfetched:
                for update in batch:
                    unfetched.discard(update["update_id"])
            self._on_fetch()
        return batch


def _id(update: dict[str, Any]) -> int:
    return int(update["update_id"])


def _resolve(future: asyncio.Future[str], value: str) -> None:
    if not future.done():
        future.set_result(value)
