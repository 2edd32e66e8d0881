"""Webhook mode: Telegram POSTs each update to COURSEBOT_WEBHOOK_LISTEN; it is on disk before the 2xx.

PTB's custom-webhook pattern (its ``examples/customwebhookbot``: a web server of one's own puts each update into
``Application.update_queue``) with no Updater. PTB's own ``run_webhook`` answers 200 as soon as an update is
queued in memory and drops that queue at shutdown, so a crash loses what it acknowledged. Here, as in polling
(bot.updates.Polling), the update goes into the inbox first (synced to disk), and only then is Telegram answered:

* no secret header: 401; a wrong one: 403; nothing is stored;
* a body that is not an update: 400, one log line;
* an update id the inbox holds already (Telegram sends again what it had no 2xx for): 200, nothing else;
* the database failing: 500, so Telegram tries again later;
* otherwise the update is stored, handed to the application, and answered 200.

Requests that arrive while a commit is under way are stored together by the next one (a group commit): Telegram
keeps up to max_connections requests in flight, and each would otherwise wait for a sync of its own.

Telegram sends only the head of each queue (chat, user's button presses, poll) and waits for the answer, so
answering once the update is stored, before it is handled, keeps one learner's updates coming in order while
PerLearnerOrder serialises their handling. Setting the webhook is a deploy step (``coursebot webhook set``), never
done here: replicas that all call setWebhook at start get 429s.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import sqlite3
from collections.abc import Callable

from aiohttp import web
from telegram import Bot, Update
from telegram.error import TelegramError

from bot.http_server import HttpServer
from bot.updates import Inbox

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
MAX_BODY = 1024 * 1024  # an update is a few kB; Telegram's own limit on a message is far below this
# Telegram opens up to 100 connections (setWebhook's max_connections); a few more for health checks and HAProxy.
MAX_CONNECTIONS = 128
# A webhook bot makes no call while nobody writes; every so often it asks getWebhookInfo, so /healthz still
# knows the Bot API answers, and a webhook that went missing or keeps failing is said in the log.
HEARTBEAT_S = 10.0


class WebhookReceiver:
    """Receive updates over HTTP at host:port and hand them to ``queue``, each stored in ``inbox`` before the 2xx."""

    def __init__(
        self,
        bot: Bot,
        inbox: Inbox,
        queue: asyncio.Queue[object],
        *,
        host: str,
        port: int,
        secret: str,
        silence: Callable[[], float | None],
        heartbeat_s: float = HEARTBEAT_S,
    ):
        if not secret:
            raise ValueError("a webhook needs its secret")
        self._bot = bot
        self._inbox = inbox
        self._queue = queue
        self._host = host
        self.port = port
        self._secret = secret.encode()
        self._silence = silence
        self._heartbeat_s = heartbeat_s
        self._server: HttpServer | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        # Requests whose update (and its JSON) is not stored yet.
        self._waiting: list[tuple[Update, str, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None
        self._said = ""  # the last thing the heartbeat logged, so a lasting problem is one line, not one a beat

    @property
    def address(self) -> str:
        return f"http://{self._host}:{self.port}/"

    async def start(self) -> None:
        """Hand over what a crash left unhandled, then listen."""
        await self._inbox.replay(self._bot, self._queue)
        self._server = await HttpServer.start(
            self._handle, self._host, self.port, max_connections=MAX_CONNECTIONS, client_max_size=MAX_BODY
        )
        self.port = self._server.port
        self._heartbeat = asyncio.get_running_loop().create_task(self._beat(), name="webhook heartbeat")

    async def stop(self) -> None:
        """Stop listening; an update being stored is stored first (or, cut short, sent again by Telegram)."""
        task, self._heartbeat = self._heartbeat, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        server, self._server = self._server, None
        if server is not None:
            await server.stop()
        writer = self._writer
        if writer is not None:
            with contextlib.suppress(sqlite3.Error):
                await writer  # what was being stored is handed over before the application stops

    async def _handle(self, request: web.BaseRequest) -> web.Response:
        if request.method != "POST":
            return web.Response(status=405, headers={"Allow": "POST"})
        given = request.headers.get(SECRET_HEADER)
        if given is None:
            return web.Response(status=401, text="the secret header is missing")
        if not hmac.compare_digest(given.encode(), self._secret):
            return web.Response(status=403, text="wrong secret")
        try:
            body = await request.read()
            payload = json.loads(body)
            if not isinstance(payload, dict) or not isinstance(payload.get("update_id"), int):
                raise ValueError("not an object with an integer update_id")
            update = Update.de_json(payload, self._bot)
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("webhook: refused a request that is not a Telegram update: %s", str(exc)[:200])
            return web.Response(status=400, text="not a Telegram update")
        try:
            await self._store(update, _as_text(body, payload))
        except sqlite3.Error as exc:
            # Not stored, so not acknowledged: Telegram sends it again.
            log.warning(
                "webhook: update %s could not be stored, Telegram will send it again: %s", update.update_id, exc
            )
            return web.Response(status=500, text="could not store the update")
        return web.Response(text="ok")

    async def _store(self, update: Update, payload: str) -> None:
        """Store ``update`` (``payload``: its JSON as Telegram sent it) with whatever other requests are waiting: one
        synced commit for all of them."""
        done = asyncio.get_running_loop().create_future()
        self._waiting.append((update, payload, done))
        if self._writer is None or self._writer.done():
            # A task of its own: a client that hangs up mid-way cancels its request, never a batch half handed over.
            self._writer = asyncio.get_running_loop().create_task(self._write(), name="webhook: inbox")
        await done

    async def _write(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, []
            unique = list({update.update_id: (update, payload) for update, payload, _ in batch}.values())
            try:
                # The JSON as it came, stored as is: PTB's to_json would walk every object of the update again.
                fresh = await self._inbox.accept([u for u, _ in unique], [p for _, p in unique])
            except sqlite3.Error as exc:
                for _, _, done in batch:
                    if not done.done():
                        done.set_exception(exc)
                continue
            for stored in fresh:
                self._queue.put_nowait(stored)
            for _, _, done in batch:
                if not done.done():
                    done.set_result(None)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat_s)
            silent = self._silence()
            if silent is not None and silent < self._heartbeat_s:
                continue
            try:
                info = await self._bot.get_webhook_info()
            except TelegramError as exc:
                self._say(f"webhook: the Bot API did not answer getWebhookInfo: {exc}")
                continue
            if not info.url:
                self._say("webhook: no webhook is set, so no update arrives; run coursebot webhook set URL once")
            elif info.last_error_message and info.pending_update_count:
                self._say(
                    f"webhook: Telegram has {info.pending_update_count} updates waiting; its last error sending "
                    f"them: {info.last_error_message}"
                )
            else:
                self._said = ""

    def _say(self, line: str) -> None:
        if line != self._said:
            log.warning("%s", line)
            self._said = line


def _as_text(body: bytes, payload: dict[str, object]) -> str:
    """The update's JSON as Telegram sent it (UTF-8, without a byte order mark, which json.loads refuses in a str), for
    the inbox; written anew only if it came in another encoding (json.loads takes UTF-16 and UTF-32 bytes too)."""
    try:
        return body.decode("utf-8-sig")
    except UnicodeDecodeError:
        return json.dumps(payload)
