"""What a runner says about itself: its ``RunnerInfo`` (read once by a client) and its load, as data.

The fingerprint names what decides a job's result besides the job: the runner's own code and the torch
that runs the jobs (for the Docker backend, the job image, which carries both).  A runner reports the
fingerprint of the code it really runs, so a cache of results (``coursebot lint --run``'s proof) keys
on the runner that ran a job, wherever it runs (embedded, ``unix://``, ``tcp://``, Docker).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .errors import InvalidRequest, ProtocolError
from .limits import Limits

PACKAGE = Path(__file__).resolve().parent
FINGERPRINT_HEX = 16  # characters of a fingerprint


def fingerprint(runs_jobs: str, package: Path = PACKAGE) -> str:
    """Return a hash of this runner's code (every ``*.py`` under ``package``) and ``runs_jobs``, what runs the jobs.

    ``runs_jobs`` is the torch version the sandbox imports, or the Docker image's id.
    """
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(runs_jobs.encode())
    return digest.hexdigest()[:FINGERPRINT_HEX]


def sandbox_fingerprint(torch_version: str | None) -> str:
    """Return the fingerprint of the sandbox backend running this package with that torch."""
    return fingerprint(f"torch {torch_version}")


@dataclass(frozen=True)
class RunnerInfo:
    """What a runner runs with, read once when a client connects (the service's ``info``)."""

    protocol: int  # the wire protocol's version
    backend: str  # "sandbox" or "docker"
    size: int  # jobs run at once
    queue: int  # jobs that may wait for a slot
    limits: Limits  # a job's limits when a request names none
    fingerprint: str  # the runner's code and what runs its jobs (see fingerprint)
    # The backend's own facts (the sandbox's bwrap and uid, the Docker image, ...), for operators and tests.
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunnerInfo:
        """Read the service's ``info`` answer; ProtocolError names what is missing or malformed."""
        core = ("protocol", "backend", "size", "queue", "limits", "fingerprint")
        missing = [k for k in core if k not in d]
        if missing:
            raise ProtocolError(f"the runner's info lacks {', '.join(missing)}")
        try:
            return cls(
                protocol=_whole(d["protocol"]),
                backend=str(d["backend"]),
                size=_whole(d["size"]),
                queue=_whole(d["queue"]),
                limits=Limits.from_dict(d["limits"]),
                fingerprint=str(d["fingerprint"]),
                details={k: v for k, v in d.items() if k not in core},
            )
        except (TypeError, ValueError, InvalidRequest) as e:
            raise ProtocolError(f"the runner's info is malformed: {e}") from None


@dataclass(frozen=True)
class RunnerLoad:
    """What a runner is doing now: jobs running and jobs waiting for a slot."""

    running: int
    waiting: int

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunnerLoad:
        try:
            return cls(running=_whole(d.get("running", 0)), waiting=_whole(d.get("waiting", 0)))
        except (TypeError, ValueError) as e:
            raise ProtocolError(f"the runner's load is malformed: {e}") from None


def _whole(value: object) -> int:
    if type(value) is not int:
        raise ValueError(f"expected a whole number, got {value!r}")
    return value
