"""`coursebot webhook set|info|delete`: the deploy step that points Telegram at the bot's webhook, run once.

Never run by each replica at its start: replicas calling setWebhook together get 429s, and one that starts
with an old URL would take the webhook away from the others. Each function answers the lines to print, or
raises BotApiRefused with one line saying what went wrong (no token, a wrong token, Telegram refusing).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import AsyncIterator, Iterator

from telegram import Bot, WebhookInfo
from telegram.error import BadRequest, Conflict, Forbidden, InvalidToken, NetworkError, RetryAfter, TelegramError

from bot.app import ALLOWED_UPDATES
from bot.config import Config
from bot.errors import BotApiRefused, ConfigError


async def set_webhook(
    config: Config, url: str, *, secret: str, max_connections: int | None, drop_pending_updates: bool
) -> list[str]:
    """Point Telegram at ``url`` with the secret the bot checks and the updates it handles."""
    if not secret:
        raise ConfigError(
            "the webhook needs a secret: give --secret, or set COURSEBOT_WEBHOOK_SECRET as the bot has it."
        )
    async with _session(config) as bot:
        with _refusals(config, "setWebhook"):
            await bot.set_webhook(
                url,
                secret_token=secret,
                max_connections=max_connections,
                allowed_updates=ALLOWED_UPDATES,
                drop_pending_updates=drop_pending_updates,
            )
        with _refusals(config, "getWebhookInfo"):
            info = await bot.get_webhook_info()
    return [f"webhook set: Telegram sends @{bot.username}'s updates to {info.url}", *describe(info)[1:]]


async def webhook_info(config: Config) -> list[str]:
    """What Telegram says about the webhook: where, what waits, the last error."""
    async with _session(config) as bot:
        with _refusals(config, "getWebhookInfo"):
            info = await bot.get_webhook_info()
    return describe(info)


async def delete_webhook(config: Config, *, drop_pending_updates: bool) -> list[str]:
    """Take the webhook away: the bot can poll again (the updates waiting stay, unless dropped)."""
    async with _session(config) as bot:
        with _refusals(config, "deleteWebhook"):
            await bot.delete_webhook(drop_pending_updates=drop_pending_updates)
    dropped = " and the updates waiting dropped" if drop_pending_updates else ""
    return [f"webhook deleted{dropped}: the bot can poll again (unset COURSEBOT_WEBHOOK_LISTEN)"]


def describe(info: WebhookInfo) -> list[str]:
    """Lines for ``info``, the first saying where updates go."""
    if not info.url:
        return ["no webhook is set: the bot polls", f"pending updates: {info.pending_update_count}"]
    lines = [f"webhook: {info.url}", f"pending updates: {info.pending_update_count}"]
    if info.max_connections:
        lines.append(f"max connections: {info.max_connections}")
    if info.allowed_updates:
        lines.append(f"allowed updates: {', '.join(info.allowed_updates)}")
    if info.last_error_date is not None:
        when = info.last_error_date.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        lines.append(f"last error: {when}: {info.last_error_message}")
    return lines


@contextlib.asynccontextmanager
async def _session(config: Config) -> AsyncIterator[Bot]:
    """PTB's Bot, logged in (getMe): a wrong token or an unreachable API is one line here too."""
    if not config.token:
        raise ConfigError("TELEGRAM_BOT_TOKEN is not set: give it the token from @BotFather.")
    with _refusals(config, "getMe"):
        async with Bot(config.token, base_url=config.bot_base_url) as bot:
            yield bot


@contextlib.contextmanager
def _refusals(config: Config, method: str) -> Iterator[None]:
    """Turn a failed call of ``method`` into BotApiRefused, one line with Telegram's reason."""
    try:
        yield
    except RetryAfter as exc:
        raise BotApiRefused(
            f"Telegram refused {method}: too many requests, retry in {exc.retry_after} s "
            "(run this step once per deploy, not from each replica)."
        ) from None
    except InvalidToken:
        raise BotApiRefused(
            f"the Bot API at {config.api_base_url} refused TELEGRAM_BOT_TOKEN: check it with @BotFather."
        ) from None
    except (BadRequest, Conflict, Forbidden) as exc:
        raise BotApiRefused(f"Telegram refused {method}: {exc.message}") from None
    except NetworkError as exc:
        raise BotApiRefused(f"cannot reach the Bot API at {config.api_base_url}: {exc.message}") from None
    except TelegramError as exc:
        raise BotApiRefused(f"{method} failed: {exc.message}") from None
