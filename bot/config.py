"""Read the bot's configuration from the environment, once, in one place."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bot.errors import ConfigError

TELEGRAM_API = "https://api.telegram.org"


@dataclass(frozen=True)
class Config:
    """Everything the bot reads from its environment. The token never shows in a repr."""

    token: str = field(repr=False)
    api_base_url: str = TELEGRAM_API
    db_path: Path = Path("data/coursebot.sqlite3")
    lessons_dir: Path = Path("lessons")
    locales_dir: Path = Path("locales")
    # Telegram's documented ceiling for messages to different chats; edits answering a tap are exempt.
    messages_per_second: float = 30.0
    # Retries for a 429 before giving up; each waits Telegram's retry_after.
    max_retries: int = 5
    # Updates processed at once; updates of one learner are always handled in order.
    concurrent_updates: int = 256
    log_level: str = "INFO"
    # "embedded" starts the runner beside the bot; "off" disables running code; else a
    # runner elsewhere: unix:///path/to/socket or tcp://host:port.
    runner: str = "embedded"

    @property
    def bot_base_url(self) -> str:
        """Return the URL prefix PTB puts before the token, e.g. https://api.telegram.org/bot."""
        return self.api_base_url.rstrip("/") + "/bot"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, require_token: bool = True) -> Config:
        """Build a Config from ``env`` (default: os.environ), naming the variable in every error."""
        env = os.environ if env is None else env
        token = env.get("TELEGRAM_BOT_TOKEN", "").strip()
        if require_token and not token:
            raise ConfigError(
                "TELEGRAM_BOT_TOKEN is missing: create a bot with @BotFather in Telegram "
                "(send /newbot), then export TELEGRAM_BOT_TOKEN=<the token it gives you>."
            )
        if token and (":" not in token or any(c.isspace() for c in token)):
            raise ConfigError(
                "TELEGRAM_BOT_TOKEN does not look like a bot token "
                "(expected the form 123456789:ABC..., as @BotFather gives it)."
            )
        api = env.get("TELEGRAM_API_BASE_URL", "").strip() or TELEGRAM_API
        if not api.startswith(("http://", "https://")):
            raise ConfigError(f"TELEGRAM_API_BASE_URL must start with http:// or https://, got {api!r}.")
        return cls(
            token=token,
            api_base_url=api.rstrip("/"),
            db_path=Path(env.get("COURSEBOT_DB", "").strip() or "data/coursebot.sqlite3"),
            lessons_dir=Path(env.get("COURSEBOT_LESSONS", "").strip() or "lessons"),
            locales_dir=Path(env.get("COURSEBOT_LOCALES", "").strip() or "locales"),
            messages_per_second=_number(env, "COURSEBOT_MESSAGES_PER_SECOND", 30.0, float, 0.1),
            max_retries=_number(env, "COURSEBOT_MAX_RETRIES", 5, int, 0),
            concurrent_updates=_number(env, "COURSEBOT_CONCURRENT_UPDATES", 256, int, 1),
            log_level=_log_level(env),
            runner=_runner(env),
        )


def _number(env: Mapping[str, str], name: str, default, cast, minimum):
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = cast(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}.") from None
    if not math.isfinite(value) or value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {raw!r}.")
    return value


def _log_level(env: Mapping[str, str]) -> str:
    level = env.get("COURSEBOT_LOG_LEVEL", "").strip().upper() or "INFO"
    if level not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
        raise ConfigError(f"COURSEBOT_LOG_LEVEL must be DEBUG, INFO, WARNING or ERROR, got {level!r}.")
    return level


def _runner(env: Mapping[str, str]) -> str:
    value = env.get("COURSEBOT_RUNNER_URL", "").strip() or env.get("COURSEBOT_RUNNER", "").strip() or "embedded"
    if value in ("embedded", "off") or value.startswith(("unix://", "tcp://")):
        return value
    if value.startswith("/"):
        return "unix://" + value  # a bare socket path
    raise ConfigError(
        f"COURSEBOT_RUNNER_URL must be 'embedded', 'off', unix:///path/to/socket or tcp://host:port, got {value!r}."
    )
