"""Resource limits for one job: the single place where defaults live.

Every field carries its unit in the name and in the comment.  The bot may ask
for other values per job (``Limits.from_dict``), but never above ``MAXIMUM``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidRequest

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True)
class Limits:
    # CPU seconds the job may burn, all its processes and threads together:
    # its cgroup's CPU time, watched by the runner.  RLIMIT_CPU backs it up
    # per process (SIGXCPU, then SIGKILL one second later).
    cpu_time_s: float = 5.0
    # Wall-clock seconds from the start of the job until the runner kills it.
    wall_time_s: float = 10.0
    # Bytes of memory for the whole job: its cgroup limit (anonymous memory,
    # page cache and the job's tmpfs files all count).
    memory_bytes: int = 512 * MiB
    # Tasks (processes + threads) alive at once in the job's pids cgroup (its
    # pid namespace's init, which never forks, lives outside it).  RLIMIT_NPROC
    # is useless for root-owned processes, so this is the limit that stops fork bombs.
    max_processes: int = 32
    # Bytes of stdout + stderr kept; one byte more ends the job (output_limit).
    output_bytes: int = 64 * KiB
    # Bytes of the largest file the job may write (RLIMIT_FSIZE).
    file_size_bytes: int = 8 * MiB
    # Bytes of each per-job tmpfs (the working directory, /tmp, /dev/shm).
    tmpfs_bytes: int = 32 * MiB
    # Open file descriptors per process (RLIMIT_NOFILE).
    open_files: int = 256
    # Bytes of source code accepted for one snippet.
    code_bytes: int = 128 * KiB

    def __post_init__(self) -> None:
        # Every value reaches a kernel interface (rlimits, cgroup files, mount options) or a byte budget:
        # NaN and infinity compare false with everything and slip through range checks, so they are refused
        # here, once, as are bools and strings.  A whole float (JSON's 1e6) is taken as the int it is.
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise InvalidRequest(f"limit {f.name} must be a finite number above 0")
            if f.type == "int" and not isinstance(v, int):
                if not v.is_integer():
                    raise InvalidRequest(f"limit {f.name} must be a whole number")
                object.__setattr__(self, f.name, int(v))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, base: Limits | None = None) -> Limits:
        """Defaults (or ``base``) overridden by ``data``, clamped to ``MAXIMUM``."""
        base = base or DEFAULT
        if not data:
            return base
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise InvalidRequest(f"unknown limits: a job's limits are {', '.join(sorted(known))}")
        merged = dataclasses.replace(base, **dict(data))
        return merged.clamped()

    def clamped(self, maximum: Limits | None = None) -> Limits:
        maximum = maximum or MAXIMUM
        values = {}
        for f in dataclasses.fields(self):
            v, hi = getattr(self, f.name), getattr(maximum, f.name)
            values[f.name] = min(v, hi)
        return Limits(**values)


DEFAULT = Limits()

# A job's disk I/O, on every block device of the host (the blkio controller's throttle on cgroup v1, io.max
# on v2), reads and writes each: a job reads only the shared read-only files (its writable mounts are tmpfs),
# and reading those in a loop once made host disk reads go from 20 MiB to 1.2 GiB in 4 s and tripled the
# host's fsync p90.  A lesson reads nothing from disk (the zygote has imported what jobs use).
DISK_BYTES_PER_S = 16 * MiB
DISK_IOS_PER_S = 200

# Signals a job may have queued at once (RLIMIT_SIGPENDING): a job counts them under its slot's uid, and all
# jobs together under the sandbox's, whose limit is the host's (~96,000): 64 each keeps every job far from it.
SIGNALS_QUEUED = 64

# Hard ceilings: a request asking for more gets these.  Sized for a 2-core,
# 24 GiB machine running a couple of jobs at once.
MAXIMUM = Limits(
    cpu_time_s=60.0,
    wall_time_s=120.0,
    memory_bytes=4096 * MiB,
    max_processes=256,
    output_bytes=1
    * MiB,  # a result at this ceiling still fits in one protocol frame (6 bytes of JSON per byte at worst)
    file_size_bytes=256 * MiB,
    tmpfs_bytes=512 * MiB,
    open_files=4096,
    code_bytes=1 * MiB,
)
