"""The course in a browser, with no Telegram: the real bot, the built-in Bot API server, the web chat.

    async with local_course(config) as course:
        print(course.chat.url)

The bot runs exactly as it does against Telegram: it long-polls the built-in server over
HTTP on loopback, with a token made up for this run (or, with COURSEBOT_WEBHOOK_LISTEN, takes
its updates by webhook: the built-in server is then pointed at the bot's address, as the
deploy step `coursebot webhook set` points Telegram at it). Learners' progress goes to the
bot's database as always; the chats' history goes to the server's own file, so a
restart shows each learner the chat they left.
"""

from __future__ import annotations

import errno
import logging
import secrets
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace

from bot import logs
from bot.app import CourseBot, until_stopped
from bot.config import Config
from bot.errors import ConfigError
from bot.localapi import BotApiServer, StateStore

from .server import WebChat

# The bot's user id in the built-in server. Fixed, so the saved history stays the bot's own
# messages from one run to the next; the token's secret half is new every run.
LOCAL_BOT_ID = 7_000_000_001
LOCAL_BOT_USERNAME = "coursebot_local_bot"


@dataclass(frozen=True)
class LocalCourse:
    """The running parts: the built-in Bot API server, the bot polling it, the web chat."""

    api: BotApiServer
    bot: CourseBot
    chat: WebChat


@asynccontextmanager
async def local_course(config: Config) -> AsyncIterator[LocalCourse]:
    """Run the course for the browser until the block ends: on config.web_host:web_port, chats kept in
    config.web_history."""
    host, port = config.web_host, config.web_port
    api = BotApiServer(
        f"{LOCAL_BOT_ID}:{secrets.token_urlsafe(24)}", LOCAL_BOT_USERNAME, store=StateStore(config.web_history)
    )
    await api.start()
    try:
        # Lessons are checked here; the browser's time zone reaches the reminders.
        bot = CourseBot(replace(config, token=api.token, api_base_url=api.api_base_url), time_zone=api.time_zone)
        chat = WebChat(api, bot.library, host=host, port=port)
        bot.library.listeners.append(chat.reloaded)
        try:
            await chat.start()
        except OSError as exc:
            raise ConfigError(_listen_failure(host, port, exc)) from None
        try:
            async with bot:
                if config.webhook_listen is not None:
                    await api.set_webhook(
                        {"url": _webhook_url(*config.webhook_listen), "secret_token": config.webhook_secret}
                    )
                yield LocalCourse(api, bot, chat)
        finally:
            await chat.stop()
    finally:
        await api.stop()


def _webhook_url(host: str, port: int) -> str:
    """Where the built-in server reaches the bot's webhook: a wildcard address is reached on loopback."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}/"


def _listen_failure(host: str, port: int, error: OSError) -> str:
    if error.errno == errno.EADDRINUSE:
        return (
            f"cannot serve the web chat on {host}:{port}: the port is in use "
            "(set COURSEBOT_WEB_PORT to another port, or stop what uses it)."
        )
    return f"cannot serve the web chat on {host}:{port}: {error.strerror or error} (check COURSEBOT_WEB_HOST)."


async def serve(config: Config) -> None:
    """Serve the web chat until SIGTERM or SIGINT, saying where it is; SIGHUP reloads the lessons."""
    async with local_course(config) as course:

        def announce() -> None:
            json_lines = config.log_format == "json"
            logs.say(f"the course is open in the web chat at {course.chat.url}", json_lines, logging.INFO, sys.stdout)
            if not config.token:
                logs.say(
                    "to serve it on Telegram instead, create a bot with @BotFather and set TELEGRAM_BOT_TOKEN",
                    json_lines,
                    logging.INFO,
                    sys.stdout,
                )

        await until_stopped(course.bot, announce)
