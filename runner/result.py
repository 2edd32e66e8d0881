"""What a job gives back: plain, frozen data (never an exception)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any


class Status(StrEnum):
    """Every way a job can end.  OK and ERROR are the learner's own doing (exit status 0 / non-zero or an
    uncaught exception); the others are limits, each named for the limit that stopped the job (TIMEOUT the
    wall clock's, CPU_LIMIT the CPU time's).  On the wire, the value ("ok", "timeout", ...)."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    CPU_LIMIT = "cpu_limit"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    KILLED = "killed"


class MessageKey(StrEnum):
    """What a check's outcome says (its params in brackets); the bot words each one.  On the wire, the value."""

    PASSED = "checks.passed"  # {expr}
    MISMATCH = "checks.mismatch"  # {expr, got, expected, and the facts ratio, got_none, still_requires_grad}
    ERROR = "checks.error"  # {expr, error}: the expression raised
    WRONG_TYPE = "checks.wrong_type"  # {expr, got}: a value extraction does not read
    NO_REPORT = "checks.no_report"  # {status, reason}: the code ran to its end but its results were unusable
    NOT_RUN = "checks.not_run"  # {status}: the job did not end "ok"
    NO_REFERENCE = "checks.no_reference"  # {}: the reference solution gave no value for the check
    SOURCE = "checks.source"  # {kind, expr}: the submitted source does not show the exercise's concept


def message_key(value: str) -> MessageKey | str:
    """Return ``value`` as a MessageKey when it is one (a check may also name a key of its own)."""
    try:
        return MessageKey(value)
    except ValueError:
        return value


@dataclass(frozen=True)
class CheckOutcome:
    """The verdict on one graded check, decided outside the sandbox."""

    id: str
    passed: bool
    # What the outcome says (a check may name a key of its own instead), and its params.
    message_key: MessageKey | str
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "message_key", message_key(self.message_key))
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "passed": self.passed, "message_key": self.message_key, "params": dict(self.params)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CheckOutcome:
        return cls(
            id=str(d["id"]),
            passed=bool(d["passed"]),
            message_key=message_key(str(d["message_key"])),
            params=dict(d.get("params") or {}),
        )


@dataclass(frozen=True)
class RunResult:
    status: Status
    stdout: str  # decoded UTF-8 (undecodable bytes replaced)
    stderr: str  # idem; a traceback shows only the learner's frames
    exit_code: int | None  # process exit code, None when killed by a signal
    signal: int | None  # signal number that ended the process, if any
    duration_ms: float  # wall time of the job inside the sandbox
    truncated: bool  # output was cut at the output limit
    checks: tuple[CheckOutcome, ...] = ()
    # True only for a graded run (with checks) whose code ran to the end and
    # whose every check passed.  An ungraded run is never "passed".
    passed: bool = False
    cpu_time_ms: float = 0.0  # CPU (user + system) of the learner's processes

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))  # ValueError for a status no job ends with
        object.__setattr__(self, "checks", tuple(self.checks))

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def graded(self) -> bool:
        return bool(self.checks)

    # The fields of the CLI's --json lines, in a fixed order.
    PUBLIC_FIELDS = ("status", "stdout", "stderr", "exit_code", "signal", "duration_ms", "truncated")

    def public_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.PUBLIC_FIELDS}

    def to_dict(self) -> dict[str, Any]:
        d = self.public_dict()
        d["checks"] = [c.to_dict() for c in self.checks]
        d["passed"] = self.passed
        d["cpu_time_ms"] = self.cpu_time_ms
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunResult:
        return cls(
            status=Status(str(d["status"])),
            stdout=str(d["stdout"]),
            stderr=str(d["stderr"]),
            exit_code=d.get("exit_code"),
            signal=d.get("signal"),
            duration_ms=float(d["duration_ms"]),
            truncated=bool(d["truncated"]),
            checks=tuple(CheckOutcome.from_dict(c) for c in d.get("checks") or ()),
            passed=bool(d.get("passed", False)),
            cpu_time_ms=float(d.get("cpu_time_ms", 0.0)),
        )
