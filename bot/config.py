"""Read the bot's configuration from the environment, once, in one place (the runner's RUNNER_* included).

``SETTINGS`` lists each setting once, as runner/config.py does for the runner: its field, variable, meaning and
rule. ``Config.from_env`` reads them, and the README's configuration table is checked against them
(tests/test_config.py). The runner's own settings are read by the runner's reader, ``RunnerConfig.from_env``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.errors import ConfigError
from runner.client import RunnerConfig, RunnerConfigError, TcpAddress, parse_address

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS = ("text", "json")


@dataclass(frozen=True)
class Config:
    """Everything the bot reads from its environment; the defaults are stated here only. The token never shows
    in a repr."""

    token: str = field(repr=False)
    api_base_url: str = "https://api.telegram.org"
    db_path: Path = Path("data/coursebot.sqlite3")
    # A PostgreSQL database instead of the SQLite file (COURSEBOT_DB=postgresql://...); the folder of db_path still
    # holds the control socket and the web chat's history.
    db_url: str | None = None
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
    # Seconds a process's claim on an update it handles lasts; renewed every third of that while it runs. On
    # PostgreSQL, another replica takes over the updates of one that died once its lease ran out (bot.updates).
    inbox_lease: float = 8.0
    # "text" lines for people, or "json": one object per line with the update's id, handler and latency.
    log_format: str = "text"
    # Where GET /healthz and GET /metrics are served, as (host, port); None: not served. The image serves
    # them on 0.0.0.0:9464 and its HEALTHCHECK asks /healthz.
    monitoring: tuple[str, int] | None = None
    # Webhook mode: where Telegram's POSTs are received, as (host, port); None: the bot polls (the default). The
    # webhook itself is set once, as a deploy step (`coursebot webhook set URL`), never at each start.
    webhook_listen: tuple[str, int] | None = None
    # What Telegram sends in X-Telegram-Bot-Api-Secret-Token (setWebhook's secret_token); webhook mode needs it.
    webhook_secret: str = field(default="", repr=False)
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
    def database(self) -> Path | str:
        """Return where the progress database is: the PostgreSQL URL if one is set, else the SQLite file."""
        return self.db_url or self.db_path

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
        values: dict[str, Any] = {"token": ""}  # no token: the web chat
        for setting in SETTINGS:
            raw = next((text for name in setting.variables if (text := env.get(name, "").strip())), "")
            if raw:
                value = setting.rule(raw, setting.variable)
                # COURSEBOT_DB holds a file's path or a PostgreSQL URL, kept apart so the file's folder stays known.
                values["db_url" if isinstance(value, DatabaseUrl) else setting.field] = value
        if values.get("webhook_listen") and not values.get("webhook_secret"):
            raise ConfigError(
                "COURSEBOT_WEBHOOK_LISTEN needs COURSEBOT_WEBHOOK_SECRET: the secret Telegram sends with each update "
                "(1 to 256 of A-Z, a-z, 0-9, _ and -), so nobody else can post updates to the bot."
            )
        try:
            values["runner_config"] = RunnerConfig.from_env(env)
        except RunnerConfigError as exc:
            raise ConfigError(str(exc)) from None
        return cls(**values)


# --- the rules a setting's value follows: each reads the text of a variable, or says in one line what is wrong --

Rule = Callable[[str, str], object]  # (the variable's text, its name) -> the value


def text(raw: str, name: str) -> str:
    return raw


def path(raw: str, name: str) -> Path:
    return Path(raw)


class DatabaseUrl(str):
    """A ``postgresql://`` URL given for COURSEBOT_DB."""


def database(raw: str, name: str) -> Path | DatabaseUrl:
    if raw.startswith(("postgresql://", "postgres://")):
        return DatabaseUrl(raw)
    if raw.startswith(("postgresql:", "postgres:")):
        raise ConfigError(
            f"{name} must be a file's path or a postgresql://user:password@host:port/name URL, got {raw!r}."
        )
    return Path(raw)


def number(cast: Callable[[str], float], minimum: float, maximum: float = math.inf) -> Rule:
    def read(raw: str, name: str) -> float:
        try:
            value = cast(raw)
        except ValueError:
            raise ConfigError(f"{name} must be a number, got {raw!r}.") from None
        if not math.isfinite(value) or value < minimum:
            raise ConfigError(f"{name} must be at least {minimum}, got {raw!r}.")
        if value > maximum:
            raise ConfigError(f"{name} must be a number up to {maximum:g}, got {raw!r}.")
        return value

    return read


def switch(raw: str, name: str) -> bool:
    if raw.lower() in ("on", "true", "yes", "1"):
        return True
    if raw.lower() in ("off", "false", "no", "0"):
        return False
    raise ConfigError(f"{name} must be on or off, got {raw!r}.")


def choice(*options: str) -> Rule:
    """One of ``options``, written in any case; the value is spelled as in ``options``."""
    spelled = {option.lower(): option for option in options}

    def read(raw: str, name: str) -> str:
        if raw.lower() not in spelled:
            shown = raw.upper() if options[0].isupper() else raw
            raise ConfigError(f"{name} must be {', '.join(options[:-1])} or {options[-1]}, got {shown!r}.")
        return spelled[raw.lower()]

    return read


def token(raw: str, name: str) -> str:
    if ":" not in raw or any(c.isspace() for c in raw):
        raise ConfigError(
            f"{name} does not look like a bot token (expected the form 123456789:ABC..., as @BotFather gives it)."
        )
    return raw


def http_url(raw: str, name: str) -> str:
    if not raw.startswith(("http://", "https://")):
        raise ConfigError(f"{name} must start with http:// or https://, got {raw!r}.")
    return raw.rstrip("/")


def host_and_port(raw: str, name: str) -> tuple[str, int] | None:
    """HOST:PORT, read by the runner's address parser (the one place addresses are parsed), or off."""
    if raw == "off":
        return None
    try:
        address = parse_address(f"tcp://{raw}", name)
    except RunnerConfigError:
        address = None
    if not isinstance(address, TcpAddress) or not raw.rpartition(":")[0] or address.port == 0:
        raise ConfigError(f"{name} must be HOST:PORT (e.g. 127.0.0.1:9464) or off, got {raw!r}.")
    return address.host, address.port


def webhook_secret(raw: str, name: str) -> str:
    """Telegram's rule for setWebhook's secret_token: 1 to 256 characters of A-Z, a-z, 0-9, _ and -."""
    if len(raw) > 256 or not all(c.isascii() and (c.isalnum() or c in "_-") for c in raw):
        raise ConfigError(f"{name} must be 1 to 256 characters of A-Z, a-z, 0-9, _ and - (Telegram's rule).")
    return raw


def runner_address(raw: str, name: str) -> str:
    if raw in ("embedded", "off"):
        return raw
    # A runner elsewhere: its address is read by the runner's own parser, the one RunnerClient.connect uses.
    try:
        return str(parse_address(raw, f"{name} (when not 'embedded' or 'off')"))
    except RunnerConfigError as exc:
        raise ConfigError(str(exc)) from None


@dataclass(frozen=True)
class Setting:
    field: str  # the Config attribute
    variables: tuple[str, ...]  # its environment variable, then older names still read
    meaning: str  # one line, as the README's configuration table states it
    rule: Rule
    default_text: str = ""  # how the README states a default the dataclass does not show as it is

    @property
    def variable(self) -> str:
        return self.variables[0]

    def default(self) -> str:
        """The default as the README's table states it."""
        if self.default_text:
            return self.default_text
        value = next(f.default for f in dataclasses.fields(Config) if f.name == self.field)
        if isinstance(value, bool):
            return "`on`" if value else "`off`"
        if value is None:
            return "`off`"
        return f"`{value:g}`" if isinstance(value, float) else f"`{value}`"


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "token",
        ("TELEGRAM_BOT_TOKEN",),
        "the token from @BotFather; it never appears in logs. Without it, `make run` opens the web chat",
        token,
        default_text="—",
    ),
    Setting(
        "api_base_url",
        ("TELEGRAM_API_BASE_URL",),
        "any Bot API server, e.g. a local `telegram-bot-api`",
        http_url,
    ),
    Setting(
        "db_path",
        ("COURSEBOT_DB",),
        "the SQLite progress database (created, WAL mode), or a `postgresql://user:password@host:port/name` URL for "
        'PostgreSQL 15 (see "Several bot processes: PostgreSQL")',
        database,
    ),
    Setting("lessons_dir", ("COURSEBOT_LESSONS",), "the content folder", path),
    Setting("locales_dir", ("COURSEBOT_LOCALES",), "the gettext catalogs", path),
    Setting(
        "messages_per_second",
        ("COURSEBOT_MESSAGES_PER_SECOND",),
        "ceiling for new messages across all chats (Telegram's flood limit)",
        number(float, 0.1),
    ),
    Setting(
        "max_retries",
        ("COURSEBOT_MAX_RETRIES",),
        "how often a `429 retry_after` is waited out before giving up",
        number(int, 0),
    ),
    Setting(
        "concurrent_updates",
        ("COURSEBOT_CONCURRENT_UPDATES",),
        "updates handled at once (one learner's are always in order)",
        number(int, 1),
    ),
    Setting("log_level", ("COURSEBOT_LOG_LEVEL",), "`DEBUG`, `INFO`, `WARNING` or `ERROR`", choice(*LOG_LEVELS)),
    Setting(
        "events_days",
        ("COURSEBOT_EVENTS_DAYS",),
        "days learning events are kept for `coursebot stats` (purged at start and daily); `0` records none",
        number(int, 0),
    ),
    Setting(
        "inbox_lease",
        ("COURSEBOT_INBOX_LEASE",),
        "seconds a replica's claim on an update it handles lasts (renewed while it runs); on PostgreSQL another "
        "replica takes over the updates of one that died once this ran out",
        number(float, 1.0),
    ),
    Setting(
        "web_host",
        ("COURSEBOT_WEB_HOST",),
        "where the web chat listens (a local preview: keep it on loopback; the image: `0.0.0.0`, published on "
        'loopback, see "Docker"); it answers requests for this name and for loopback names only',
        text,
    ),
    Setting("web_port", ("COURSEBOT_WEB_PORT",), "the web chat's port", number(int, 0, 65535)),
    Setting(
        "control_socket",
        ("COURSEBOT_CONTROL_SOCKET",),
        "where `coursebot reload` reaches the running bot",
        path,
        default_text="`control.sock` beside `COURSEBOT_DB`",
    ),
    Setting(
        "watch",
        ("COURSEBOT_WATCH",),
        "`off` stops reloading when lesson files or catalogs change (`SIGHUP` and `coursebot reload` still work)",
        switch,
    ),
    Setting(
        "log_format",
        ("COURSEBOT_LOG_FORMAT",),
        "`text`, or `json`: one object per line, with the update's id, the handler and its latency (the runner's "
        "lines too)",
        choice(*LOG_FORMATS),
    ),
    Setting(
        "monitoring",
        ("COURSEBOT_MONITORING",),
        "`HOST:PORT` to serve `GET /healthz` and `GET /metrics` there (the image: `0.0.0.0:9464`), or `off`",
        host_and_port,
    ),
    Setting(
        "webhook_listen",
        ("COURSEBOT_WEBHOOK_LISTEN",),
        "`HOST:PORT` to receive updates by webhook there instead of polling (set the webhook once with "
        '`coursebot webhook set URL`, see "Webhook mode"), or `off`: the bot polls',
        host_and_port,
    ),
    Setting(
        "webhook_secret",
        ("COURSEBOT_WEBHOOK_SECRET",),
        "the secret Telegram sends with every webhook update (`X-Telegram-Bot-Api-Secret-Token`); webhook mode "
        "needs it, `coursebot webhook set` sends it; it never appears in logs",
        webhook_secret,
        default_text="—",
    ),
    Setting(
        "runner",
        ("COURSEBOT_RUNNER_URL", "COURSEBOT_RUNNER"),
        "where learners' code runs: `embedded` (the bot starts `python -m runner serve` as its own child), "
        "`unix:///path/to/runner.sock` (or just the absolute path) or `tcp://host:port` for a runner elsewhere, "
        "or `off`",
        runner_address,
    ),
)
