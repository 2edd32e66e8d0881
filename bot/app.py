"""Wire the bot together: services, handlers in their order, and the polling lifecycle."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
from collections.abc import AsyncIterator
from typing import Any

from telegram import BotCommand, Update
from telegram.error import InvalidToken, NetworkError, TelegramError
from telegram.ext import Application, ApplicationBuilder, BaseHandler, ContextTypes

from bot.commands import COMMANDS
from bot.config import Config
from bot.content.load import load_valid
from bot.content.model import Content
from bot.context import BotData, CourseContext, Services, SnippetRunner, update_scope
from bot.errors import ConfigError
from bot.handlers import course, drills, fallback, language, lessons, practice, progress, quiz, settings
from bot.i18n import DEFAULT_LANGUAGE, I18n, _, telegram_code
from bot.ratelimit import CourseRateLimiter
from bot.storage.db import Database
from bot.updates import PerLearnerOrder, deduplication
from runner.client import RunnerClient

# Application[bot, context, user_data, chat_data, bot_data, job_queue], as build_application makes it.
CourseApplication = Application[Any, CourseContext, Any, Any, BotData, Any]

log = logging.getLogger(__name__)

ALLOWED_UPDATES = [Update.MESSAGE, Update.EDITED_MESSAGE, Update.CALLBACK_QUERY, Update.POLL_ANSWER]
LONG_POLL_SECONDS = 10


def handlers() -> list[BaseHandler[Update, CourseContext, None]]:
    """Return every handler but deduplication, in the order they are tried."""
    # Order matters: groups get their pointer before any course handler, and the catch-alls in fallback come last.
    return [
        *fallback.group_handlers(),
        *course.handlers(),
        *lessons.handlers(),
        *quiz.handlers(),
        *drills.handlers(),
        *progress.handlers(),
        *settings.handlers(),
        *language.handlers(),
        *practice.handlers(),
        *fallback.handlers(),
    ]


def build_application(config: Config, services: Services) -> CourseApplication:
    """Return the PTB application with every handler registered."""
    app: CourseApplication = (
        ApplicationBuilder()
        .token(config.token)
        .base_url(config.bot_base_url)
        .base_file_url(config.api_base_url.rstrip("/") + "/file/bot")
        .rate_limiter(CourseRateLimiter(overall_max_rate=config.messages_per_second, max_retries=config.max_retries))
        .concurrent_updates(PerLearnerOrder(config.concurrent_updates, functools.partial(update_scope, services)))
        .context_types(ContextTypes(context=CourseContext, bot_data=BotData))
        # Long polling holds one connection open; the others serve replies.
        .connection_pool_size(64)
        .get_updates_read_timeout(LONG_POLL_SECONDS + 5)
        .build()
    )
    app.bot_data.services = services
    # Order matters: redeliveries stop before anything else sees them.
    app.add_handler(deduplication(), group=-1)
    app.add_handlers(handlers())
    app.add_error_handler(_on_error)
    return app


async def _on_error(update: object, context: CourseContext) -> None:
    # Logged once with enough context to find the learner's update, then the learner hears of it.
    user = update.effective_user if isinstance(update, Update) else None
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
            menu = [BotCommand(command.name, command.menu_text()) for command in COMMANDS]
        # Telegram keys command menus by a two-letter code, so pt_BR publishes as 'pt'.
        await app.bot.set_my_commands(menu, language_code=None if code == DEFAULT_LANGUAGE else telegram_code(code))


class CourseBot:
    """The running bot: ``async with CourseBot(config) as bot:`` polls until the block ends."""

    def __init__(self, config: Config, content: Content | None = None):
        self.config = config
        self.i18n = I18n(config.locales_dir)
        self.content = content or load_valid(config.lessons_dir, self.i18n)
        self.db: Database | None = None
        self.app: CourseApplication | None = None

    async def __aenter__(self) -> CourseBot:
        self._stack = contextlib.AsyncExitStack()
        await self._stack.__aenter__()
        try:
            runner = await self._stack.enter_async_context(connect_runner(self.config))
        except BaseException:
            await self._stack.aclose()
            raise
        self.db = await Database.open(self.config.db_path)
        try:
            services = Services(self.config, self.content, self.i18n, self.db, runner)
            self.app = build_application(self.config, services)
            await self.app.initialize()
            try:
                await register_commands(self.app, self.i18n)
                await self.app.start()
                if self.app.updater is None:
                    raise RuntimeError("the application was built without an updater")
                await self.app.updater.start_polling(
                    timeout=LONG_POLL_SECONDS,
                    allowed_updates=ALLOWED_UPDATES,
                    drop_pending_updates=False,
                    error_callback=_polling_error,
                )
            except BaseException:
                await self.app.shutdown()
                raise
        except BaseException:
            await self.db.close()
            await self._stack.aclose()
            raise
        log.info("coursebot is polling as @%s", self.app.bot.username)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        app, db = self.app, self.db
        if app is None or db is None:
            return
        try:
            if app.updater is not None and app.updater.running:
                await app.updater.stop()
            if app.running:
                await app.stop()
            await app.shutdown()
        finally:
            await db.close()
            await self._stack.aclose()
        log.info("coursebot stopped; the database is closed")


@contextlib.asynccontextmanager
async def connect_runner(config: Config) -> AsyncIterator[SnippetRunner | None]:
    """Yield the runner the config names (None when running code is off); the bot never imports torch."""
    if config.runner == "off":
        yield None
        return
    if config.runner == "embedded":
        async with RunnerClient.embedded(config.runner_config) as client:
            yield client
    else:
        async with RunnerClient.connect(config.runner) as client:
            yield client


def _polling_error(error: TelegramError) -> None:
    # PTB retries polling by itself; one line per failure, without the traceback noise.
    log.warning("polling failed, retrying: %s", error)


async def serve(config: Config) -> None:
    """Run the bot until SIGTERM or SIGINT, then close everything cleanly."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with CourseBot(config):
        await stop.wait()


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
    return None
