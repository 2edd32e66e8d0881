"""What a job gives back: plain, frozen data (never an exception)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

# Every way a job can end.  "ok" and "error" are the learner's own doing
# (exit status 0 / non-zero or an uncaught exception); the others are limits.
STATUSES = ("ok", "error", "timeout", "memory_limit", "output_limit", "killed")


@dataclass(frozen=True)
class CheckOutcome:
    """The verdict on one graded check, decided outside the sandbox."""

    id: str
    passed: bool
    # A locale key the bot translates (e.g. "check.mismatch"), and its params.
    message_key: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "passed": self.passed, "message_key": self.message_key, "params": dict(self.params)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CheckOutcome:
        return cls(
            id=str(d["id"]),
            passed=bool(d["passed"]),
            message_key=str(d["message_key"]),
            params=dict(d.get("params") or {}),
        )


@dataclass(frozen=True)
class RunResult:
    status: str  # one of STATUSES
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
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")
        object.__setattr__(self, "checks", tuple(self.checks))

    @property
    def ok(self) -> bool:
        return self.status == "ok"

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
            status=str(d["status"]),
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
