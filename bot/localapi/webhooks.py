"""Webhook delivery as Telegram's Bot API server does it: queues by kind, only each queue's head in flight.

Followed from tdlib/telegram-bot-api (commit 01a3679c, telegram-bot-api/WebhookActor.cpp and Client.cpp):

* **Queues.** Every update carries a webhook queue id (``Client::add_update``'s last argument): the chat for
  messages (``add_message_update(..., chat_id)``), the sender for callback queries (``user_id + (3 << 33)``),
  the poll for polls and poll answers (``poll_id``); an update with none gets a queue of its own
  (``unique_queue_id_``). Only the head of a queue is sent, and the next one after it was answered with a 2xx
  or dropped (``WebhookActor::drop_event``).
* **Window.** At most ``2 * max_connections`` updates are loaded from the update queue at once, in id order
  (``max_loaded_updates_``, ``load_updates``); later ones wait for room.
* **Connections.** Up to ``max_connections`` (1 to 100, default 40: ``get_webhook_max_connections``), each
  carrying one request at a time (``create_new_connections``, ``send_update``).
* **Retries.** A failed request (not 2xx, no answer within 60 s: ``HttpOutboundConnection``'s timeout, a closed
  connection) is sent again: at once the first time, then after 2, 4, 8, ... s, capped at a random 60 to 120 s;
  a ``Retry-After`` (up to 3600 s) is waited instead (``on_update_error``).
* **Expiry.** An update is dropped when its next try would come after it expires: a callback query 150 s after
  it was made, a message 24 h after it was sent, a poll answer after 24 h (``add_update``'s ``timeout``).
  Loading skips updates already expired (``TQueue::get``).
* **Secret.** ``X-Telegram-Bot-Api-Secret-Token`` carries setWebhook's ``secret_token`` (``send_update``).

All durations are multiplied by ``WebhookTiming.scale`` (a setting of the server), so tests can compress them.
One difference: a connection that cannot be made counts as that update's failed try here (Telegram retries the
connection without charging the update), which is what makes a webhook that is down lose callback queries
after 150 s, as the issue and Telegram's documentation describe.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from .updates import UpdateQueue, update_type

log = logging.getLogger(__name__)

Json = dict[str, Any]
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
DEFAULT_MAX_CONNECTIONS = 40  # telegram-bot-api.cpp: default_max_webhook_connections_ (100 in --local mode)
MAX_CONNECTIONS = 100
MAX_SECRET_LENGTH = 256
_SECRET_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_MESSAGE_KINDS = ("message", "edited_message", "channel_post", "edited_channel_post")


@dataclass(frozen=True)
class WebhookTiming:
    """Telegram's webhook durations in seconds; each is multiplied by ``scale`` (tests compress them)."""

    scale: float = 1.0
    reply_timeout: float = 60.0  # how long an answer is waited for
    first_delay: float = 1.0  # Update::delay_ at load; doubled per failure after the first
    resend_cap: float = 60.0  # WEBHOOK_MAX_RESEND_TIMEOUT: the cap is drawn between it and twice it
    max_retry_after: float = 3600.0
    callback_ttl: float = 150.0
    message_ttl: float = 86400.0
    other_ttl: float = 86400.0

    def ttl(self, update: Json) -> float:
        """Seconds ``update`` may wait for delivery, from its arrival."""
        kind = update_type(update)
        if kind == "callback_query":
            return self.callback_ttl * self.scale
        if kind in _MESSAGE_KINDS:
            return self.message_ttl * self.scale
        return self.other_ttl * self.scale


def queue_key(update: Json) -> tuple[str, Any]:
    """Which webhook queue ``update`` waits in: per chat, per user, per poll, or its own."""
    kind = update_type(update)
    body = update.get(kind) or {}
    if kind in _MESSAGE_KINDS:
        return ("chat", body.get("chat", {}).get("id"))
    if kind == "callback_query":
        return ("callback", body.get("from", {}).get("id"))
    if kind == "poll_answer":
        return ("poll", body.get("poll_id"))
    if kind == "poll":
        return ("poll", body.get("id"))
    if kind in ("my_chat_member", "chat_member"):
        return (kind, body.get("chat", {}).get("id"))
    return ("own", update["update_id"])


def check_url(url: str) -> str:
    """Return the problem with ``url`` as Telegram words it, or "" when it may be a webhook.

    Plain HTTP is taken to loopback and private addresses only (a network namespace's), as Telegram's server in
    ``--local`` mode takes it; anything else must be HTTPS.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return "invalid webhook URL specified"
    if parts.scheme == "https" and host:
        return ""
    if parts.scheme == "http" and _local_host(host):
        return ""
    if parts.scheme not in ("http", "https") or not host:
        return "invalid webhook URL specified"
    return "bad webhook: An HTTPS URL must be provided for webhook"


def ip_literal(url: str) -> str:
    """The IP address ``url`` names, or "" when it names a host."""
    host = urlsplit(url).hostname or ""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return ""


def _local_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private


def check_secret(secret: str) -> str:
    """Return the problem with ``secret`` as Telegram words it, or ""."""
    if len(secret) > MAX_SECRET_LENGTH:
        return "secret token is too long"
    if not set(secret) <= _SECRET_CHARACTERS:
        return "secret token contains unallowed characters"
    return ""


@dataclass(slots=True)
class _Loaded:
    update: Json
    key: tuple[str, Any]
    expires_at: float
    wakeup_at: float
    delay: float
    fails: int = 0


@dataclass
class WebhookStats:
    """What getWebhookInfo reports and tests read: the last error, and counts."""

    last_error_date: int = 0
    last_error_message: str = ""
    delivered: int = 0
    dropped: list[int] = field(default_factory=list)  # update ids given up (expired)
    attempts: int = 0
    in_flight_max: int = 0


class WebhookDelivery:
    """Send the update queue's updates to one URL, as Telegram's WebhookActor does (see the module docstring)."""

    def __init__(
        self,
        updates: UpdateQueue,
        url: str,
        *,
        secret: str,
        max_connections: int,
        timing: WebhookTiming,
        touch: Callable[[], None],
    ):
        self.url = url
        self.secret = secret
        self.max_connections = max_connections
        self.timing = timing
        self.stats = WebhookStats()
        self._updates = updates
        self._touch = touch
        self._loaded: dict[int, _Loaded] = {}
        self._queues: dict[tuple[str, Any], deque[int]] = {}
        self._in_flight: dict[tuple[str, Any], asyncio.Task[None]] = {}
        self._offset = 0  # the next update id to load (tqueue_offset_)
        self._wake = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Begin delivering in the background (from inside the running loop)."""
        connector = aiohttp.TCPConnector(limit=self.max_connections, force_close=False)
        self._session = aiohttp.ClientSession(connector=connector)
        self._updates.listener = self._wake.set
        self._task = asyncio.get_running_loop().create_task(self._run(), name="webhook delivery")

    async def stop(self) -> None:
        """Stop delivering; what was not answered yet stays in the update queue. Safe to call twice."""
        if self._updates.listener == self._wake.set:
            self._updates.listener = None
        task, self._task = self._task, None
        tasks = [*self._in_flight.values(), *([task] if task is not None else [])]
        for pending in tasks:
            pending.cancel()
        for pending in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await pending
        self._in_flight.clear()
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    # -------------------------------------------------------------- the loop

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            self._load()
            wait = self._send_ready()
            if wait is None:
                await self._wake.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait)

    def _load(self) -> None:
        room = 2 * self.max_connections - len(self._loaded)
        if room <= 0:
            return
        now = time.monotonic()
        for update in self._updates.load(self._offset, room, exclude=self._loaded):
            update_id = update["update_id"]
            self._offset = max(self._offset, update_id + 1)
            expires_at = self._updates.arrived.get(update_id, now) + self.timing.ttl(update)
            if expires_at < now:
                self._drop(update_id, "expired before it was loaded")
                continue
            key = queue_key(update)
            self._loaded[update_id] = _Loaded(update, key, expires_at, now, self.timing.first_delay)
            self._queues.setdefault(key, deque()).append(update_id)

    def _send_ready(self) -> float | None:
        """Send every queue head that is due while connections are free; return seconds to the next due head."""
        now = time.monotonic()
        due: list[tuple[float, int]] = []
        later: float | None = None
        for key, ids in self._queues.items():
            if key in self._in_flight:
                continue
            head = self._loaded[ids[0]]
            if head.wakeup_at <= now:
                due.append((head.wakeup_at, ids[0]))
            else:
                later = head.wakeup_at - now if later is None else min(later, head.wakeup_at - now)
        due.sort()  # std::set<Queue> orders queues by wakeup_at, then id
        for _, update_id in due:
            if len(self._in_flight) >= self.max_connections:
                return later
            loaded = self._loaded[update_id]
            self._in_flight[loaded.key] = asyncio.get_running_loop().create_task(
                self._send(loaded), name=f"webhook update {update_id}"
            )
        self.stats.in_flight_max = max(self.stats.in_flight_max, len(self._in_flight))
        return later

    async def _send(self, loaded: _Loaded) -> None:
        assert self._session is not None
        update_id = loaded.update["update_id"]
        headers = {"Content-Type": "application/json"}
        if self.secret:
            headers[SECRET_HEADER] = self.secret
        body = json.dumps(loaded.update, ensure_ascii=False).encode()
        error, retry_after = "", 0.0
        self.stats.attempts += 1
        try:
            timeout = aiohttp.ClientTimeout(total=self.timing.reply_timeout * self.timing.scale)
            async with self._session.post(self.url, data=body, headers=headers, timeout=timeout) as response:
                await response.read()
                if not 200 <= response.status <= 299:
                    error = f"Wrong response from the webhook: {response.status} {response.reason}"
                    retry_after = _retry_after(response.headers.get("Retry-After"))
        except TimeoutError:
            error = "Webhook connection closed: no answer in time"
        except aiohttp.ClientError as exc:
            error = f"Connection failed: {exc}"
        finally:
            self._in_flight.pop(loaded.key, None)
            self._wake.set()
        self._touch()
        if error:
            self._failed(loaded, error, retry_after)
        else:
            self.stats.delivered += 1
            self._done(update_id)

    def _failed(self, loaded: _Loaded, error: str, retry_after: float) -> None:
        """WebhookActor::on_update_error: back off (or wait Retry-After), or drop what would expire first."""
        self.stats.last_error_date = int(time.time())
        self.stats.last_error_message = error
        timing = self.timing
        retry_after = min(max(retry_after, 0.0), timing.max_retry_after)
        next_delay, wait = loaded.delay, retry_after
        if retry_after == 0 and loaded.fails > 0:
            cap = random.uniform(timing.resend_cap, 2 * timing.resend_cap)
            next_delay = min(cap, loaded.delay * 2)
            wait = next_delay
        now = time.monotonic()
        if now + wait * timing.scale > loaded.expires_at:
            log.warning("webhook: dropped update %s: %s", loaded.update["update_id"], error)
            self._drop(loaded.update["update_id"], error)
            return
        loaded.delay = next_delay
        loaded.wakeup_at = now + wait * timing.scale
        loaded.fails += 1

    def _done(self, update_id: int) -> None:
        loaded = self._loaded.pop(update_id, None)
        if loaded is not None:
            ids = self._queues[loaded.key]
            ids.popleft()
            if not ids:
                del self._queues[loaded.key]
        self._updates.forget(update_id)
        self._wake.set()

    def _drop(self, update_id: int, reason: str) -> None:
        self.stats.dropped.append(update_id)
        self._done(update_id)


def _retry_after(header: str | None) -> float:
    try:
        return float(header) if header else 0.0
    except ValueError:
        return 0.0
