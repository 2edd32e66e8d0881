"""Read the bot's configuration from the environment, once, in one place (the runner's RUNNER_* included)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from bot.errors import ConfigError
from runner.client import RunnerConfig, RunnerConfigError, parse_address

N = TypeVar("N", int, float)

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS = ("text", "json")


@dataclass(frozen=True)
class Config:
    """Everything the bot reads from its environment; the defaults are stated here only. The token never shows
    in a repr."""

    token: str = field(repr=False)
    api_base_url: str = "https://api.telegram.org"
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
    # Days learning events are kept for `coursebot stats`; 0 records none. Purged at start and daily.
    events_days: int = 365
    # "text" lines for people, or "json": one object per line with the update's id, handler and latency.
    log_format: str = "text"
    # Where GET /healthz and GET /metrics are served, as (host, port); None: not served. The image serves
    # them on 0.0.0.0:9464 and its HEALTHCHECK asks /healthz.
    monitoring: tuple[str, int] | None = None
    # "embedded" starts the runner beside the bot; "off" disables running code; else the address of a
    # runner elsewhere, as runner.client.parse_address reads it: unix:///path/to/socket or tcp://host:port.
    runner: str = "embedded"
    # How the embedded runner is started and sized (RUNNER_POOL, RUNNER_QUEUE, ...): the runner's own config,
    # read by the runner's own reader.
    runner_config: RunnerConfig = field(default_factory=RunnerConfig)
    # The web chat, a local preview of the course: where it listens (port 0: any free port).
    web_host: str = "127.0.0.1"
    web_port: int = 8080
    # Reload lessons and catalogs when their files change; SIGHUP and `coursebot reload` work either way.
    watch: bool = True
    # Where `coursebot reload` reaches the running bot; None: control.sock beside the database.
    control_socket: Path | None = None

    @property
    def bot_base_url(self) -> str:
        """Return the URL prefix PTB puts before the token, e.g. https://api.telegram.org/bot."""
        return self.api_base_url.rstrip("/") + "/bot"

    @property
    def control_path(self) -> Path:
        """Return the control socket's path."""
        return self.control_socket or self.db_path.parent / "control.sock"

    @property
    def web_history(self) -> Path:
        """Return where the web chat's built-in Bot API server keeps the chats: beside the database."""
        return self.db_path.parent / "webchat.sqlite3"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Config:
        """Build a Config from ``env`` (default: os.environ), naming the variable in every error.

        A variable that is unset or blank leaves the field at its default above. No token is no error:
        the course is then served in the web chat.
        """
        env = os.environ if env is None else env
        token = env.get("TELEGRAM_BOT_TOKEN", "").strip()
        if token and (":" not in token or any(c.isspace() for c in token)):
            raise ConfigError(
                "TELEGRAM_BOT_TOKEN does not look like a bot token "
                "(expected the form 123456789:ABC..., as @BotFather gives it)."
            )
        values: dict[str, Any] = {"token": token}
        if api := _text(env, "TELEGRAM_API_BASE_URL"):
            if not api.startswith(("http://", "https://")):
                raise ConfigError(f"TELEGRAM_API_BASE_URL must start with http:// or https://, got {api!r}.")
            values["api_base_url"] = api.rstrip("/")
        for name, key in (
            ("COURSEBOT_DB", "db_path"),
            ("COURSEBOT_LESSONS", "lessons_dir"),
            ("COURSEBOT_LOCALES", "locales_dir"),
        ):
            if raw := _text(env, name):
                values[key] = Path(raw)
        _set(values, "messages_per_second", _number(env, "COURSEBOT_MESSAGES_PER_SECOND", float, 0.1))
        _set(values, "max_retries", _number(env, "COURSEBOT_MAX_RETRIES", int, 0))
        _set(values, "concurrent_updates", _number(env, "COURSEBOT_CONCURRENT_UPDATES", int, 1))
        _set(values, "events_days", _number(env, "COURSEBOT_EVENTS_DAYS", int, 0))
        _set(values, "log_level", _log_level(env))
        _set(values, "log_format", _choice(env, "COURSEBOT_LOG_FORMAT", LOG_FORMATS))
        _set(values, "monitoring", _monitoring(env))
        _set(values, "runner", _runner(env))
        _set(values, "web_host", _text(env, "COURSEBOT_WEB_HOST"))
        port = _number(env, "COURSEBOT_WEB_PORT", int, 0)
        if port is not None and port > 65535:
            raise ConfigError(f"COURSEBOT_WEB_PORT must be a port number up to 65535, got {port}.")
        _set(values, "web_port", port)
        _set(values, "watch", _switch(env, "COURSEBOT_WATCH"))
        if raw := _text(env, "COURSEBOT_CONTROL_SOCKET"):
            values["control_socket"] = Path(raw)
        try:
            values["runner_config"] = RunnerConfig.from_env(env)
        except RunnerConfigError as exc:
            raise ConfigError(str(exc)) from None
        return cls(**values)


def _text(env: Mapping[str, str], name: str) -> str | None:
    return env.get(name, "").strip() or None


def _set(values: dict[str, Any], key: str, value: object) -> None:
    if value is not None:
        values[key] = value


def _number(env: Mapping[str, str], name: str, cast: Callable[[str], N], minimum: float) -> N | None:
    raw = _text(env, name)
    if raw is None:
        return None
    try:
        value = cast(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}.") from None
    if not math.isfinite(value) or value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {raw!r}.")
    return value


def _switch(env: Mapping[str, str], name: str) -> bool | None:
    raw = _text(env, name)
    if raw is None:
        return None
    if raw.lower() in ("on", "true", "yes", "1"):
        return True
    if raw.lower() in ("off", "false", "no", "0"):
        return False
    raise ConfigError(f"{name} must be on or off, got {raw!r}.")


def _log_level(env: Mapping[str, str]) -> str | None:
    level = _text(env, "COURSEBOT_LOG_LEVEL")
    if level is None:
        return None
    if level.upper() not in LOG_LEVELS:
        raise ConfigError(f"COURSEBOT_LOG_LEVEL must be DEBUG, INFO, WARNING or ERROR, got {level.upper()!r}.")
    return level.upper()


def _choice(env: Mapping[str, str], name: str, options: tuple[str, ...]) -> str | None:
    value = _text(env, name)
    if value is None:
        return None
    if value.lower() not in options:
        raise ConfigError(f"{name} must be {' or '.join(options)}, got {value!r}.")
    return value.lower()


def _monitoring(env: Mapping[str, str]) -> tuple[str, int] | None:
    value = _text(env, "COURSEBOT_MONITORING")
    if value is None or value == "off":
        return None
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"COURSEBOT_MONITORING must be HOST:PORT (e.g. 127.0.0.1:9464) or off, got {value!r}.")
    return host.strip("[]"), int(port)


def _runner(env: Mapping[str, str]) -> str | None:
    value = _text(env, "COURSEBOT_RUNNER_URL") or _text(env, "COURSEBOT_RUNNER")
    if value is None or value in ("embedded", "off"):
        return value
    # A runner elsewhere: its address is read by the runner's own parser, the one RunnerClient.connect uses.
    try:
        return str(parse_address(value, "COURSEBOT_RUNNER_URL (when not 'embedded' or 'off')"))
    except RunnerConfigError as exc:
        raise ConfigError(str(exc)) from None
