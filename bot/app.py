"""Wire the bot together: services, handlers in their order, and the polling lifecycle."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import functools
import logging
import signal
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from telegram import Bot, BotCommand, Update
from telegram.error import InvalidToken, NetworkError, TelegramError
from telegram.ext import ApplicationBuilder, BaseHandler, ContextTypes
from telegram.request import HTTPXRequest

from bot import control, events
from bot.commands import COMMANDS
from bot.config import Config
from bot.context import BotData, CourseContext, Services, update_scope
from bot.errors import ClaimLost, ConfigError, StorageError
from bot.handlers import (
    course,
    drills,
    fallback,
    language,
    lessons,
    outbox,
    practice,
    progress,
    quiz,
    reminders,
    review,
    settings,
)
from bot.handlers.router import Router
from bot.i18n import DEFAULT_LANGUAGE, I18n, _, telegram_code
from bot.library.live import Edition, Library, Reloaded
from bot.library.watch import Watcher
from bot.metrics import MeasuredRequest, Metrics
from bot.monitoring import Check, MonitoringServer
from bot.ratelimit import CourseRateLimiter
from bot.refresh import refresh_readers
from bot.retention.bulk_sender import MESSAGES_PER_SECOND
from bot.storage.db import Clock, Database, ensure_writable, utc_now
from bot.sweep import ReminderSweep, telegram_send
from bot.updates import Inbox, InboxApplication, PerLearnerOrder, Polling
from bot.webhook import WebhookReceiver
from runner.client import Runner, RunnerClient, RunnerError

# Application[bot, context, user_data, chat_data, bot_data, job_queue], as build_application makes it.
CourseApplication = InboxApplication

log = logging.getLogger(__name__)

# my_chat_member: a learner who blocks the bot gets no more reminders (bot.handlers.reminders).
ALLOWED_UPDATES = [
    Update.MESSAGE,
    Update.EDITED_MESSAGE,
    Update.CALLBACK_QUERY,
    Update.POLL_ANSWER,
    Update.MY_CHAT_MEMBER,
]
LONG_POLL_SECONDS = 10


def routers() -> list[Router]:
    """Return every feature's router, in the order they are tried."""
    # Order matters: groups get their pointer before any course handler, and the catch-alls in fallback come last.
    return [
        fallback.groups,
        course.router,
        lessons.router,
        quiz.router,
        drills.router,
        progress.router,
        review.router,
        reminders.router,
        settings.router,
        language.router,
        practice.router,
        fallback.router,
    ]


def handlers() -> list[BaseHandler[Update, CourseContext, None]]:
    """Return every handler, in the order they are tried."""
    return [handler for router in routers() for handler in router.handlers()]


def build_application(config: Config, services: Services) -> CourseApplication:
    """Return the PTB application with every handler registered, taking its updates from an inbox."""
    # Updates reach the application through the inbox (see serve_updates), never through PTB's Updater.
    # The database's clock, which is the bot's: claims and their leases are kept by the time writes are stamped with.
    inbox = Inbox(services.db, clock=services.db.clock, lease=config.inbox_lease)
    app = (
        ApplicationBuilder()
        .application_class(InboxApplication, {"inbox": inbox})
        .updater(None)
        .token(config.token)
        .base_url(config.bot_base_url)
        .base_file_url(config.api_base_url.rstrip("/") + "/file/bot")
        .rate_limiter(
            CourseRateLimiter(
                services.metrics,
                # A reply of an update another replica took over is that one's to send.
                guard=inbox.guard,
                overall_max_rate=config.messages_per_second,
                max_retries=config.max_retries,
            )
        )
        .concurrent_updates(
            order := PerLearnerOrder(
                config.concurrent_updates,
                functools.partial(update_scope, services),
                inbox,
                learner_lock=services.db.learner_lock,
                # An update handled again sends the replies it stored, rather than deciding again.
                resend=lambda update: outbox.resend(services, update.get_bot(), update),
            )
        )
        .context_types(ContextTypes(context=CourseContext, bot_data=BotData))
        # Long polling holds one connection open; the others serve replies. Both count their calls.
        .request(MeasuredRequest(services.metrics, connection_pool_size=64))
        .get_updates_request(
            MeasuredRequest(services.metrics, connection_pool_size=1, read_timeout=LONG_POLL_SECONDS + 5)
        )
        .build()
    )
    if not isinstance(app, InboxApplication):
        raise TypeError(f"PTB built a {type(app).__name__}, not the application class it was given")
    app.bot_data.services = services
    order.process = app.process_update  # an earlier update of a learner handled ahead of a later one
    app.add_handlers([timed(handler, services.metrics) for handler in handlers()])
    app.add_error_handler(_on_error)
    return app


def timed(
    handler: BaseHandler[Update, CourseContext, None], metrics: Metrics
) -> BaseHandler[Update, CourseContext, None]:
    """Make ``handler`` measure its callback: a latency per handler for /metrics and a log line per update."""
    callback = handler.callback
    name = getattr(callback, "__name__", type(handler).__name__)

    async def measured(update: Update, context: CourseContext) -> Any:
        started = time.perf_counter()
        try:
            return await callback(update, context)
        finally:
            seconds = time.perf_counter() - started
            metrics.handler_seconds.labels(name).observe(seconds)
            log.info(
                "update %s handled by %s in %.1f ms",
                update.update_id,
                name,
                seconds * 1000,
                extra={"handler": name, "latency_ms": round(seconds * 1000, 3)},
            )

    handler.callback = measured
    return handler


async def _on_error(update: object, context: CourseContext) -> None:
    # Logged once with enough context to find the learner's update, then the learner hears of it.
    user = update.effective_user if isinstance(update, Update) else None
    if isinstance(context.error, ClaimLost):
        # Not a failure: the replica that took the update over handles it, and the learner hears from that one.
        log.warning(
            "update %s from user %s: %s", getattr(update, "update_id", "?"), user.id if user else "?", context.error
        )
        return
    context.services.metrics.errors.inc()
    log.error(
        "update %s from user %s failed",
        update.update_id if isinstance(update, Update) else "?",
        user.id if user else "?",
        exc_info=context.error,
    )
    if not isinstance(update, Update):
        return
    chat = update.effective_chat
    chat_id = chat.id if chat else user.id if user else None
    if chat_id is None:
        return
    # Said in the update's language: the error handler runs inside the update's scope (bot.context.update_scope).
    # Progress is saved unless it was saving that failed: never promise what did not happen.
    if isinstance(context.error, (sqlite3.Error, StorageError)):
        text = _(
            "Sorry, something went wrong on my side, and your last step could not be saved. Please try again later."
        )
    else:
        text = _("Sorry, something went wrong on my side. Your progress is saved; please try again.")
    try:
        if update.callback_query:
            await update.callback_query.answer(text, show_alert=False)
        else:
            await context.bot.send_message(chat_id, text)
    except TelegramError:
        log.warning("could not tell user %s about the failure", user.id if user else "?")


async def register_commands(app: CourseApplication, i18n: I18n) -> None:
    """Publish the command menu in every shipped language (English is the default)."""
    for code in i18n.languages:
        with i18n.use(code):
            menu = [BotCommand(command.name, command.menu_description()) for command in COMMANDS]
        # Telegram keys command menus by a two-letter code, so pt_BR publishes as 'pt'.
        await app.bot.set_my_commands(menu, language_code=None if code == DEFAULT_LANGUAGE else telegram_code(code))


class CourseBot:
    """The running bot: ``async with CourseBot(config) as bot:`` polls until the block ends.

    While it runs, lesson files and catalogs are reloaded when they change (config.watch), on SIGHUP
    (see serve) and on `coursebot reload` (its control socket).
    """

    def __init__(
        self,
        config: Config,
        *,
        clock: Clock = utc_now,
        sweep_every_minute: bool = True,
        time_zone: Callable[[int], str | None] | None = None,
    ):
        self.config = config
        # The time zone a learner's app reported, where one can (the web chat's Bot API server): for reminders.
        self.time_zone = time_zone
        # What time it is for the database and the reminder sweep: the wall clock, or a test's.
        self.clock = clock
        # False: the sweep runs only when called (bot.sweep), as tests on virtual time do.
        self.sweep_every_minute = sweep_every_minute
        self.sweep: ReminderSweep | None = None
        self.library = Library(config.lessons_dir, config.locales_dir)  # invalid lessons raise ContentError here
        self.db: Database | None = None
        self.app: CourseApplication | None = None
        self.monitoring: MonitoringServer | None = None
        self.polling: Polling | WebhookReceiver | None = None  # how updates arrive: polling, or a webhook
        self._stack: contextlib.AsyncExitStack | None = None  # what __aexit__ stops, in reverse order of start
        self.library.prepare = self._adopt

    async def reload(self) -> Reloaded:
        """Read the lessons and catalogs again: in use from the next update if valid, refused if not."""
        before = self.library.newest
        outcome = await self.library.reload()
        if outcome.accepted and self.app is not None and self.db is not None:
            try:
                await register_commands(self.app, outcome.edition.i18n)
                await refresh_readers(self.app.bot, self.db, before, outcome.edition, dt.datetime.now(dt.UTC))
            except TelegramError as exc:
                log.warning("after the reload, the command menu or a slide could not be updated: %s", exc)
        return outcome

    async def _adopt(self, edition: Edition) -> None:
        # Before an edition is put in use: places on slides it no longer has move on (see Database.adopt_course).
        if self.db is not None:
            await self.db.adopt_course(edition.content.english)

    async def __aenter__(self) -> CourseBot:
        # Top to bottom, each part is started and its stop put on the stack; a failure stops what started, in
        # reverse, and so does __aexit__.
        # Before the runner's slow start: a database this process cannot write refuses the start at once.
        if self.config.db_url is None:
            ensure_writable(self.config.db_path)
        async with contextlib.AsyncExitStack() as stack:
            runner = await stack.enter_async_context(connect_runner(self.config))
            server = await control.serve(self.config.control_path, self.reload)
            stack.push_async_callback(_close_control, server, self.config.control_path)
            self.db = db = await Database.open(
                self.config.database, clock=self.clock, events_days=self.config.events_days
            )
            stack.push_async_callback(db.close)
            # Before any learner is served: places on slides the lessons no longer have move on.
            await self._adopt(self.library.current)
            services = Services(self.config, self.library, db, runner)
            if self.time_zone is not None:
                services = dataclasses.replace(services, time_zone=self.time_zone)
            self.app = app = build_application(self.config, services)
            try:
                await app.initialize()
            except BaseException:
                # A refused token or an unreachable API fails getMe inside initialize, and PTB then leaves both
                # HTTP sessions open (aiohttp names each at exit, under the one line the operator should read).
                # PTB keeps its two requests only in this tuple; shutting one down twice does nothing.
                for request in app.bot._request:
                    await request.shutdown()
                raise
            stack.push_async_callback(app.shutdown)
            try:
                await register_commands(app, self.library.current.i18n)
            except TelegramError as exc:
                # The menu published at an earlier start stays; learners need not wait for this one.
                log.warning("the command menu could not be published: %s", exc)
            if self.config.monitoring is not None:
                host, port = self.config.monitoring
                self.monitoring = await stack.enter_async_context(
                    MonitoringServer(host, port, services.metrics, health_checks(services), _runner_load(services))
                )
            await app.start()
            stack.push_async_callback(self._stop_updates, app)
            self.polling = await serve_updates(app, self.config)
            stack.push_async_callback(_cancelled, asyncio.create_task(events.purge_daily(db), name="events purge"))
            self.sweep = sweep = await stack.enter_async_context(reminder_sweep(self.config, self.library, db))
            if self.sweep_every_minute:
                stack.push_async_callback(_cancelled, asyncio.create_task(sweep.run(), name="reminder sweep"))
            if self.config.watch:
                watcher = Watcher([self.config.lessons_dir, self.config.locales_dir], self.reload)
                stack.push_async_callback(_cancelled, asyncio.create_task(watcher.run(), name="content watcher"))
            self._stack = stack.pop_all()
        if isinstance(self.polling, WebhookReceiver):
            log.info("coursebot is receiving updates by webhook at %s as @%s", self.polling.address, app.bot.username)
        else:
            log.info("coursebot is polling as @%s", app.bot.username)
        return self

    async def _stop_updates(self, app: CourseApplication) -> None:
        """Stop polling, let the updates under way finish, and write what the inbox still holds."""
        if self.polling is not None:
            await self.polling.stop()
        if app.running:
            await app.stop()  # waits for the updates under way and the tasks they started
        await app.inbox.close()  # claims are renewed until the updates under way are handled
        await app.inbox.flush()

    async def __aexit__(self, *exc_info: object) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()
            log.info("coursebot stopped; the database is closed")


@contextlib.asynccontextmanager
async def reminder_sweep(config: Config, library: Library, db: Database) -> AsyncIterator[ReminderSweep]:
    """Yield the reminder sweep, sending through a Bot of its own: a 429 reaches its sender, which waits it out
    under the bot-wide pace, instead of the application's limiter retrying it."""
    bot = Bot(
        config.token,
        base_url=config.bot_base_url,
        base_file_url=config.api_base_url.rstrip("/") + "/file/bot",
        request=HTTPXRequest(connection_pool_size=16),
    )
    await bot.initialize()
    try:
        # The bulk sender's pace stays under the bot's ceiling (COURSEBOT_MESSAGES_PER_SECOND), with its own margin.
        yield ReminderSweep(db, library, telegram_send(bot), rate=min(config.messages_per_second, MESSAGES_PER_SECOND))
    finally:
        await bot.shutdown()


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


# The bot long-polls every LONG_POLL_SECONDS: an API silent for much longer is unreachable, not idle.
API_SILENCE_S = 6 * LONG_POLL_SECONDS


def health_checks(services: Services) -> dict[str, Check]:
    """What /healthz asks: the database takes a write, the runner (if any) answers, the Bot API answered lately."""

    async def database() -> str | None:
        await services.db.check_writable()
        return None

    async def runner() -> str | None:
        assert services.runner is not None
        return None if await services.runner.ping() else "the runner did not answer its ping"

    async def telegram() -> str | None:
        silent = services.metrics.seconds_since_api_answered()
        if silent is None:
            return "the Bot API has not answered yet"
        return f"no answer from the Bot API for {silent:.0f} s" if silent > API_SILENCE_S else None

    checks: dict[str, Check] = {"database": database, "telegram": telegram}
    if services.runner is not None:
        checks["runner"] = runner
    return checks


def _runner_load(services: Services) -> Callable[[], Awaitable[None]]:
    async def refresh() -> None:
        if services.runner is not None:
            services.metrics.runner_load(await services.runner.load())

    return refresh


@contextlib.asynccontextmanager
async def connect_runner(config: Config) -> AsyncIterator[Runner | None]:
    """Yield the runner the config names (None when running code is off); the bot never imports torch."""
    if config.runner == "off":
        yield None
        return
    if config.runner == "embedded":
        async with RunnerClient.embedded(config.runner_config) as client:
            yield client
    else:
        # A tcp:// runner wants its token (RUNNER_TOKEN, read with the runner's other settings).
        async with RunnerClient.connect(config.runner, token=config.runner_config.token) as client:
            yield client


async def serve_updates(app: CourseApplication, config: Config | None = None) -> Polling | WebhookReceiver:
    """Hand the application what a crash left unhandled, then poll for updates (or receive them by webhook, when
    ``config`` says so), each on disk before it is confirmed."""
    if config is not None and config.webhook_listen is not None:
        host, port = config.webhook_listen
        receiver = WebhookReceiver(
            app.bot,
            app.inbox,
            app.update_queue,
            host=host,
            port=port,
            secret=config.webhook_secret,
            silence=app.bot_data.services.metrics.seconds_since_api_answered,
        )
        try:
            await receiver.start()
        except OSError as exc:
            raise ConfigError(
                f"cannot receive webhooks on {host}:{port}: {exc.strerror or exc} (check COURSEBOT_WEBHOOK_LISTEN)."
            ) from None
        app.inbox.keep(app.bot, app.update_queue)
        return receiver
    polling = Polling(
        app.bot,
        app.inbox,
        app.update_queue,
        timeout=LONG_POLL_SECONDS,
        allowed_updates=ALLOWED_UPDATES,
        on_error=_polling_error,
    )
    await polling.start()
    app.inbox.keep(app.bot, app.update_queue)
    return polling


def _polling_error(error: Exception) -> None:
    # Polling goes on by itself; one line per failure, without the traceback noise.
    log.warning("polling failed, retrying: %s", error)


async def _close_control(server: asyncio.AbstractServer, path: Path) -> None:
    server.close()
    await server.wait_closed()
    await asyncio.to_thread(path.unlink, missing_ok=True)


async def serve(config: Config) -> None:
    """Run the bot until SIGTERM or SIGINT, then close everything cleanly; SIGHUP reloads the lessons."""
    async with CourseBot(config) as bot:
        await until_stopped(bot)


async def until_stopped(bot: CourseBot, ready: Callable[[], None] | None = None) -> None:
    """Wait for SIGTERM or SIGINT; meanwhile SIGHUP reloads the lessons and catalogs.

    ``ready`` is called once the signals are handled, so whoever it tells may send them.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    reloads: set[asyncio.Task[Reloaded]] = set()  # held until done: the loop keeps only weak references

    def reload() -> None:
        task = loop.create_task(bot.reload())
        reloads.add(task)
        task.add_done_callback(reloads.discard)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, reload)
    try:
        if ready is not None:
            ready()
        await stop.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)


def describe_startup_failure(config: Config, error: Exception) -> str | None:
    """Return one line explaining a failure to reach or log in to the Bot API, or None."""
    if isinstance(error, InvalidToken):
        return (
            f"The Bot API at {config.api_base_url} refused TELEGRAM_BOT_TOKEN: "
            "check it with @BotFather (/mybots → API Token)."
        )
    if isinstance(error, NetworkError):
        return (
            f"Cannot reach the Bot API at {config.api_base_url}: {error.message}. "
            "Check the network or TELEGRAM_API_BASE_URL."
        )
    if isinstance(error, ConfigError):
        return str(error)
    if isinstance(error, RunnerError):
        return f"the runner cannot start, so learners' code cannot run: {error}"
    return None
