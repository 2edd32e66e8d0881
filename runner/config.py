"""The runner's settings, read in one place: every RUNNER_* variable, their defaults, their rules.

    config = RunnerConfig.from_env(os.environ)       # raises RunnerConfigError, one line, naming the variable
    RunnerClient.embedded(config)                    # the worker runs with exactly these settings
    address = parse_address("unix:///run/coursebot/runner.sock")

``SETTINGS`` lists each setting once: its field, variable, command-line flag, meaning and rule.
``RunnerConfig.from_env`` reads them, ``python -m runner`` offers them as flags (which override the
environment), ``RunnerConfig.to_env`` hands them to an embedded worker, and the README's table is
checked against them.  The pool's, the sandbox's and the Docker backend's configurations are derived
from a ``RunnerConfig`` (``PoolConfig.from_config`` and the like); nothing else reads the environment.

This module imports nothing heavy: the bot imports it (through ``runner.client``) to check its settings.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import RunnerConfigError

BACKENDS = ("sandbox", "docker")
LOG_FORMATS = ("text", "json")
# Where bwrap is when it is not on PATH (Debian's and Ubuntu's package put it there).
FALLBACK_BWRAP = "/usr/bin/bwrap"
MAX_UID = 2**32 - 2  # (uid_t)-1 means "no uid" to the kernel
UNIX_PATH_BYTES = 108  # sizeof(sun_path) on Linux
MIN_SECRET = 16  # characters of RUNNER_TOKEN at least


def _default_bwrap() -> str:
    found = shutil.which("bwrap")
    return os.path.abspath(found) if found else FALLBACK_BWRAP


@dataclass(frozen=True)
class RunnerConfig:
    """Every setting of the runner; the defaults here are the only ones (see SETTINGS for the variables)."""

    pool_size: int = 2  # jobs run at once (a 2-core host: 2)
    queue: int = 32  # jobs that may wait for a free slot; one more gets RunnerBusy
    backend: str = "sandbox"  # "sandbox" (bubblewrap, a warm pool) or "docker" (a container per job)
    bwrap: str = field(default_factory=_default_bwrap)  # path of the bubblewrap binary
    sandbox_uid: int = 63333  # host uid (and gid) of the sandbox when the runner is root: an otherwise unused one
    startup_timeout_s: float = 180.0  # seconds for the sandbox to import torch (its isolation proof comes after)
    docker_image: str = "coursebot-job"  # the Dockerfile's job target: python3, torch and this runner, no lessons
    docker_host: str | None = None  # the Docker engine; None: Docker's default socket
    # The secret every TCP connection to `serve --listen` must present (None: no TCP listener may start).
    token: str | None = field(default=None, repr=False)
    # "text" log lines, or "json": one object per line, the READY line too (the bot's variable: one switch).
    log_format: str = "text"
    # Not settings of the worker, but of the embedded client that starts it:
    python: str = sys.executable  # the interpreter `python -m runner serve` runs on (it needs torch)
    request_timeout_s: float | None = None  # None: three times the job's wall limit, plus margin

    def __post_init__(self) -> None:
        for s in SETTINGS:
            value = getattr(self, s.field)
            if not (value is None and s.optional) and not s.rule.accepts(value):
                raise RunnerConfigError(
                    f"RunnerConfig.{s.field} ({s.variable}) must be {s.rule.text}, got {s.shown(value)}"
                )
        if not isinstance(self.python, str) or not self.python:
            raise RunnerConfigError(f"RunnerConfig.python must name an interpreter, got {self.python!r}")
        rt = self.request_timeout_s
        if rt is not None and not Seconds().accepts(rt):
            raise RunnerConfigError(f"RunnerConfig.request_timeout_s must be {Seconds.text} or None, got {rt!r}")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RunnerConfig:
        """The settings in ``env`` (e.g. os.environ); unset or empty variables keep their defaults."""
        values: dict[str, Any] = {}  # each value checked by read(), then by __post_init__
        for s in SETTINGS:
            raw = env.get(s.variable, "").strip()
            if raw:
                values[s.field] = s.read(raw, s.variable, f"; unset it for the default ({s.default()})")
        return cls(**values)

    def to_env(self, secrets: bool = True) -> dict[str, str]:
        """The variables that make ``from_env`` give these settings back (without the secret ones: all but those)."""
        out = {}
        for s in SETTINGS:
            value = getattr(self, s.field)
            if value is not None and (secrets or not s.secret):
                out[s.variable] = repr(value) if isinstance(value, float) else str(value)
        return out


# --- the rules a setting's value follows ------------------------------------


class Rule:
    """How a setting's text becomes its value, and which values are allowed."""

    text = ""  # the rule as an error message states it: "must be <text>"
    metavar = "VALUE"

    def cast(self, raw: str) -> object:
        return raw

    def accepts(self, value: object) -> bool:
        return isinstance(value, str) and bool(value) and not any(c.isspace() or c == "\0" for c in value)


class Count(Rule):
    def __init__(self, minimum: int) -> None:
        self.minimum = minimum
        self.text = f"a whole number of at least {minimum}"
        self.metavar = "N"

    def cast(self, raw: str) -> object:
        return int(raw)

    def accepts(self, value: object) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= self.minimum


class Seconds(Rule):
    text = "a finite number of seconds above 0"
    metavar = "SECONDS"

    def cast(self, raw: str) -> object:
        return float(raw)

    def accepts(self, value: object) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


class Choice(Rule):
    def __init__(self, *options: str) -> None:
        self.options = options
        self.text = "one of " + ", ".join(options)
        self.metavar = "{" + ",".join(options) + "}"

    def cast(self, raw: str) -> object:
        return raw.lower()  # as the bot reads its own choices: JSON is json

    def accepts(self, value: object) -> bool:
        return value in self.options


class AbsolutePath(Rule):
    text = "an absolute path"
    metavar = "PATH"

    def accepts(self, value: object) -> bool:
        return isinstance(value, str) and os.path.isabs(value) and "\0" not in value


class Uid(Count):
    def __init__(self) -> None:
        super().__init__(1)
        self.text = f"a host uid from 1 to {MAX_UID} (0 would make the sandbox root on the host)"
        self.metavar = "UID"

    def accepts(self, value: object) -> bool:
        return super().accepts(value) and isinstance(value, int) and value <= MAX_UID


class Word(Rule):
    text = "a non-empty value without spaces"

    def __init__(self, metavar: str) -> None:
        self.metavar = metavar


class Secret(Rule):
    text = f"a secret of at least {MIN_SECRET} characters without spaces (e.g. from: openssl rand -hex 32)"
    metavar = "SECRET"

    def accepts(self, value: object) -> bool:
        return super().accepts(value) and isinstance(value, str) and len(value) >= MIN_SECRET


@dataclass(frozen=True)
class Setting:
    field: str  # the RunnerConfig attribute
    variable: str  # its environment variable
    flag: str | None  # its option of `python -m runner serve|exec` (None: environment only)
    meaning: str  # one line, for --help and the README
    rule: Rule
    optional: bool = False  # None allowed: "not set"
    default_text: str = ""  # how the README and --help state a default the dataclass computes
    secret: bool = False  # never shown: not in errors, not on a command line (so no flag), not in a repr

    def read(self, raw: str, source: str, hint: str = "") -> object:
        """``raw`` as this setting's value, or a RunnerConfigError naming ``source`` (a variable or a flag)."""
        try:
            value = self.rule.cast(raw.strip())
        except ValueError:
            value = None
        if value is None or not self.rule.accepts(value):
            raise RunnerConfigError(f"{source} ({self.meaning}) must be {self.rule.text}, got {self.shown(raw)}{hint}")
        return value

    def shown(self, value: object) -> str:
        """``value`` as an error message may show it: a secret only by its length."""
        if self.secret:
            return f"{len(value)} characters" if isinstance(value, str) else "something else"
        return repr(value)

    def default(self) -> str:
        if self.default_text:
            return self.default_text
        value = next(f.default for f in dataclasses.fields(RunnerConfig) if f.name == self.field)
        if isinstance(value, float):
            return f"{value:g}"
        return "unset" if value is None else str(value)


SETTINGS: tuple[Setting, ...] = (
    Setting("pool_size", "RUNNER_POOL", "--pool", "jobs run at once", Count(1)),
    Setting(
        "queue", "RUNNER_QUEUE", "--queue", "jobs that may wait for a free slot; one more gets RunnerBusy", Count(0)
    ),
    Setting(
        "backend",
        "RUNNER_BACKEND",
        "--backend",
        "where jobs run: sandbox (a warm bubblewrap pool) or docker (a container per job)",
        Choice(*BACKENDS),
    ),
    Setting(
        "bwrap",
        "RUNNER_BWRAP",
        "--bwrap",
        "path of the bubblewrap binary",
        AbsolutePath(),
        default_text=f"bwrap on PATH, else {FALLBACK_BWRAP}",
    ),
    Setting(
        "sandbox_uid",
        "RUNNER_SANDBOX_UID",
        "--sandbox-uid",
        "host uid and gid the sandbox runs as when the runner is root",
        Uid(),
    ),
    Setting(
        "startup_timeout_s",
        "RUNNER_STARTUP_TIMEOUT",
        "--startup-timeout",
        "seconds the sandbox may take to import torch",
        Seconds(),
    ),
    Setting(
        "docker_image",
        "RUNNER_DOCKER_IMAGE",
        "--docker-image",
        "image of the docker backend's containers, with python3, torch and the runner",
        Word("IMAGE"),
    ),
    Setting(
        "docker_host",
        "DOCKER_HOST",
        "--docker-host",
        "Docker engine of the docker backend, Docker's own variable",
        Word("URL"),
        optional=True,
        default_text="Docker's default socket",
    ),
    Setting(
        "token",
        "RUNNER_TOKEN",
        None,
        "secret every TCP connection must present; without it serve --listen refuses to start",
        Secret(),
        optional=True,
        default_text="unset",
        secret=True,
    ),
    Setting(
        "log_format",
        "COURSEBOT_LOG_FORMAT",
        "--log-format",
        "text, or json: one object per line, the READY line too (the bot's own variable)",
        Choice(*LOG_FORMATS),
    ),
)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` one option per setting; each overrides its variable (None: not given).

    A secret has no option (a command line is readable by every local user): its variable is named in
    the epilog instead.
    """
    for s in SETTINGS:
        if s.flag is None:
            parser.epilog = (parser.epilog or "") + f"{s.variable} (environment only): {s.meaning}. "
            continue
        parser.add_argument(
            s.flag,
            dest=s.field,
            type=_flag_reader(s),
            default=None,
            metavar=s.rule.metavar,
            help=f"{s.meaning} (env {s.variable}; default {s.default()})",
        )


def _flag_reader(setting: Setting) -> Callable[[str], object]:
    def read(raw: str) -> object:
        try:
            return setting.read(raw, setting.flag or setting.variable)
        except RunnerConfigError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return read


def from_flags(config: RunnerConfig, args: argparse.Namespace) -> RunnerConfig:
    """``config`` with the settings given on the command line (see add_flags) put over it."""
    given = {s.field: getattr(args, s.field) for s in SETTINGS if s.flag and getattr(args, s.field, None) is not None}
    return dataclasses.replace(config, **given)


# --- addresses ---------------------------------------------------------------


@dataclass(frozen=True)
class UnixAddress:
    path: str  # absolute

    def __str__(self) -> str:
        return f"unix://{self.path}"


@dataclass(frozen=True)
class TcpAddress:
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"tcp://{host}:{self.port}"


Address = UnixAddress | TcpAddress


def parse_address(text: str, what: str = "the runner's address") -> Address:
    """``unix:///path``, an absolute path, or ``tcp://host:port``; anything else raises RunnerConfigError.

    ``what`` names the value in the error (e.g. the variable it came from).  An empty tcp host is 127.0.0.1.
    """
    value = text.strip()
    fix = f"{what} must be unix:///path/to/runner.sock, an absolute socket path, or tcp://host:port, got {text!r}"
    if value.startswith("tcp://"):
        host, sep, port = value[len("tcp://") :].rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if not sep or not port.isascii() or not port.isdigit() or int(port) > 65535:
            raise RunnerConfigError(f"{fix} (the port must be a number up to 65535)")
        if any(c in host for c in "/[]@ ") or "\0" in host:
            raise RunnerConfigError(fix)
        return TcpAddress(host or "127.0.0.1", int(port))
    path = value[len("unix://") :] if value.startswith("unix://") else value
    if "://" in path or not path.startswith("/") or "\0" in path:
        raise RunnerConfigError(fix)
    if len(path.encode()) > UNIX_PATH_BYTES:
        raise RunnerConfigError(f"{what}: a Unix socket path has at most {UNIX_PATH_BYTES} bytes, got {path!r}")
    return UnixAddress(path)
