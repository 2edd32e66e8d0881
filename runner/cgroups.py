"""Per-job cgroups: the limits a root-owned process cannot escape.

Why cgroups and not rlimits: the runner runs as root, and RLIMIT_NPROC never
binds a process whose real uid is 0 on the host (kernel/fork.c lets
INIT_USER through), so only the pids controller stops a fork bomb.  Memory
is limited the same way so that page cache and tmpfs files count too.  CPU
time is read from the cgroup (cpuacct, or v2's cpu.stat) for the same
reason: RLIMIT_CPU counts each process apart, so a job of three processes
burned three times its CPU limit and reported one process's time.  Each job
gets at most one core (a CFS quota) and is pinned to its own CPUs (cpuset)
when the host has them, so one job's processes cannot crowd another's.  Its
disk I/O is throttled on every block device (v1 ``blkio``, v2 ``io``) when the
controller is there, so one job cannot saturate the host's disk.

Both layouts are supported and detected at startup from /proc/self/mountinfo:

* cgroup v1 (this host): one hierarchy per controller, e.g.
  /sys/fs/cgroup/pids and /sys/fs/cgroup/memory; files ``pids.max``,
  ``memory.limit_in_bytes``, ``memory.memsw.limit_in_bytes``,
  ``memory.oom_control`` (its ``oom_kill`` counter tells an OOM kill); and
  when mounted, ``cpu.cfs_quota_us``, ``cpuacct.usage`` and ``cpuset.cpus``.
* cgroup v2 (containers, modern distros): one unified tree; ``pids.max``,
  ``memory.max``, ``memory.swap.max``, ``memory.events`` (``oom_kill``),
  ``memory.oom.group``, ``cgroup.kill``, ``cpu.stat`` (``usage_usec``), and
  when enabled ``cpu.max`` and ``cpuset.cpus``.

The tree lives under the runner's own cgroup (so parent limits still apply):
``<own cgroup>/coursebot-runner.<pid>/slot-<n>``.  A slot is reused by one
job after another; between jobs everything in it is killed.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import SandboxUnavailable
from .limits import DISK_BYTES_PER_S, DISK_IOS_PER_S, Limits

TREE_PREFIX = "coursebot-runner."
# How to give the runner its cgroup: in a container, the image's entrypoint delegates the container's own
# cgroup when started as the README says; elsewhere, root or a delegated cgroup (systemd's Delegate=yes).
_DELEGATION_HINT = (
    "in a container: start it with --user 0 --cap-add SYS_ADMIN --cap-add CHOWN --cap-add SETUID "
    "--cap-add SETGID --cap-add SETPCAP --cap-add KILL, see the README's Docker section"
    if os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv")
    else "run it as root, or delegate the cgroup to its user, e.g. systemd's Delegate=yes"
)
V1_REQUIRED = ("pids", "memory")
V1_OPTIONAL = ("cpu", "cpuacct", "cpuset", "blkio")
CPU_PERIOD_US = 100_000  # the CFS period; a job's quota is one period per period: one core


@dataclass(frozen=True)
class Layout:
    version: int  # 1 or 2
    # v1: controller -> directory of our own cgroup in that hierarchy;
    # v2: {"unified": directory of our own cgroup}
    own: dict[str, Path] = field(default_factory=dict)

    @property
    def controllers(self) -> tuple[str, ...]:
        return tuple(self.own)


def _parse_mountinfo(text: str) -> list[tuple[str, str, str, str]]:
    """(root, mount point, fstype, super options) of every cgroup mount."""
    out = []
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        lf, rf = left.split(), right.split()
        if len(lf) < 5 or len(rf) < 3:
            continue
        if rf[0] in ("cgroup", "cgroup2"):
            out.append((lf[3], lf[4], rf[0], rf[2]))
    return out


def _parse_proc_cgroup(text: str) -> dict[str, str]:
    """controller (or "" for v2) -> our path in that hierarchy."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, ctrls, path = parts
        for c in ctrls.split(",") if ctrls else [""]:
            out[c] = path
    return out


def _join(mount: str, mount_root: str, path: str) -> Path:
    # A cgroup namespace (or a bind mount) shows only part of the tree: the
    # mount's root is a prefix of the path /proc/self/cgroup reports.
    rel = path
    if mount_root != "/" and rel.startswith(mount_root):
        rel = rel[len(mount_root) :]
    return Path(mount) / rel.lstrip("/")


def detect(mountinfo: str | None = None, proc_cgroup: str | None = None) -> Layout:
    """Find a usable layout or raise SandboxUnavailable saying how to fix the host."""
    mountinfo = mountinfo if mountinfo is not None else Path("/proc/self/mountinfo").read_text()
    proc_cgroup = proc_cgroup if proc_cgroup is not None else Path("/proc/self/cgroup").read_text()
    mounts = _parse_mountinfo(mountinfo)
    mine = _parse_proc_cgroup(proc_cgroup)

    for root, mp, fstype, _opts in mounts:
        if fstype != "cgroup2" or "" not in mine:
            continue
        own = _join(mp, root, mine[""])
        try:
            avail = set((own / "cgroup.controllers").read_text().split())
        except OSError:
            continue
        if {"pids", "memory"} <= avail:
            return Layout(2, {"unified": own})

    v1: dict[str, Path] = {}
    for root, mp, fstype, opts in mounts:
        if fstype != "cgroup":
            continue
        for c in opts.split(","):
            if c in V1_REQUIRED + V1_OPTIONAL and c in mine and c not in v1:
                v1[c] = _join(mp, root, mine[c])
    if all(c in v1 for c in V1_REQUIRED):
        return Layout(1, v1)
    raise SandboxUnavailable(
        "no usable pids+memory cgroups: mount cgroup v2 at /sys/fs/cgroup with the pids and "
        "memory controllers enabled for the runner's cgroup (or cgroup v1 pids and memory "
        "hierarchies), writable by the runner; in Docker run with --cgroupns=private and a "
        "writable /sys/fs/cgroup"
    )


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _parse_kv(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if v.strip().lstrip("-").isdigit():
            out[k] = int(v)
    return out


def _read_kv(path: Path) -> dict[str, int]:
    try:
        return _parse_kv(path.read_text())
    except OSError:
        return {}


def _read(path: str) -> bytes:
    """A cgroup file, opened anew: kernfs files reread through a kept
    descriptor can return what they held before."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class JobCgroup:
    """One slot's cgroup (one directory per v1 controller, one for v2)."""

    def __init__(self, layout: Layout, dirs: dict[str, Path]) -> None:
        self.layout = layout
        self.dirs = dirs
        self._oom_base = 0
        self._configured: Limits | None = None
        self._pinned: str | None = None
        # One file is enough to tell what is inside: every job process is in
        # all of our hierarchies at once.
        key = "unified" if layout.version == 2 else "pids"
        self._procs = str(dirs[key] / "cgroup.procs")
        self._oom_file = (
            str(dirs[key] / "memory.events") if layout.version == 2 else str(dirs["memory"] / "memory.oom_control")
        )
        cpu, cpuset = ("unified", "unified") if layout.version == 2 else ("cpuacct", "cpuset")
        # v2 keeps cpu.stat in every cgroup, controller or not; v1 needs the cpuacct hierarchy.
        usage = dirs[cpu] / ("cpu.stat" if layout.version == 2 else "cpuacct.usage") if cpu in dirs else None
        self._usage_file = str(usage) if usage is not None and usage.exists() else None
        cpus = dirs[cpuset] / "cpuset.cpus" if cpuset in dirs else None
        self._cpus_file = cpus if cpus is not None and cpus.exists() else None
        # Kept open: every job is added through them (a write each).  One per hierarchy: v1 may mount
        # several controllers together (cpu,cpuacct), and a task joins a hierarchy once.
        self._add_fds = [os.open(d / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for d in dict.fromkeys(dirs.values())]

    # --- setup ---------------------------------------------------------
    def configure(self, limits: Limits) -> None:
        if limits == self._configured:  # same limits as last time: nothing to write
            self._oom_base = self.oom_kills()
            return
        self._configured = None
        if self.layout.version == 2:
            d = self.dirs["unified"]
            _write(d / "pids.max", str(limits.max_processes))
            _write(d / "memory.max", str(limits.memory_bytes))
            for name, value in (
                ("memory.swap.max", "0"),
                ("memory.oom.group", "1"),
                ("cpu.max", f"{CPU_PERIOD_US} {CPU_PERIOD_US}"),
            ):
                if (d / name).exists():
                    _write(d / name, value)
        else:
            _write(self.dirs["pids"] / "pids.max", str(limits.max_processes))
            m = self.dirs["memory"]
            lim = str(limits.memory_bytes)
            memsw = m / "memory.memsw.limit_in_bytes"
            # limit_in_bytes must stay <= memsw: the order depends on the direction.
            try:
                _write(m / "memory.limit_in_bytes", lim)
                if memsw.exists():
                    _write(memsw, lim)
            except OSError:
                if memsw.exists():
                    _write(memsw, lim)
                _write(m / "memory.limit_in_bytes", lim)
            if "cpu" in self.dirs:
                # One core at most per job, so one job cannot starve a 2-core host.
                try:
                    _write(self.dirs["cpu"] / "cpu.cfs_period_us", str(CPU_PERIOD_US))
                    _write(self.dirs["cpu"] / "cpu.cfs_quota_us", str(CPU_PERIOD_US))
                except OSError:
                    pass
        self._configured = limits
        self._oom_base = self.oom_kills()

    @property
    def cpu_quota_cores(self) -> float | None:
        """The CPU quota of a job here, in cores (None: no cpu controller, no quota)."""
        if self.layout.version == 2:
            return 1.0 if (self.dirs["unified"] / "cpu.max").exists() else None
        return 1.0 if "cpu" in self.dirs else None

    def limit_io(self, devices: list[str], bytes_per_s: int = DISK_BYTES_PER_S, ios: int = DISK_IOS_PER_S) -> int:
        """Throttle this cell's disk I/O on ``devices`` ("MAJ:MIN"); return how many took the rule (0: no
        blkio/io controller here, or no device would).  Once per cell: the rule never changes."""
        done = 0
        for dev in devices:
            try:
                if self.layout.version == 2:
                    d = self.dirs["unified"]
                    if not (d / "io.max").exists():
                        return 0
                    _write(d / "io.max", f"{dev} rbps={bytes_per_s} wbps={bytes_per_s} riops={ios} wiops={ios}")
                else:
                    if "blkio" not in self.dirs:
                        return 0
                    for name, value in (("bps", bytes_per_s), ("iops", ios)):
                        for way in ("read", "write"):
                            _write(self.dirs["blkio"] / f"blkio.throttle.{way}_{name}_device", f"{dev} {value}")
            except OSError:  # a device the controller does not throttle (a ramdisk, say): the others still are
                continue
            done += 1
        return done

    def add(self, pid: int) -> None:
        data = str(pid).encode()
        for fd in self._add_fds:
            os.write(fd, data)

    def pin(self, cpus: str) -> None:
        """Run this cgroup's tasks on ``cpus`` only (a cpuset list: "1", "0-3"); nothing without a cpuset."""
        if self._cpus_file is None or cpus == self._pinned:
            return
        _write(self._cpus_file, cpus)
        self._pinned = cpus

    # --- observation ---------------------------------------------------
    def oom_kills(self) -> int:
        try:
            return _parse_kv(_read(self._oom_file).decode()).get("oom_kill", 0)
        except OSError:
            return 0

    def oom_killed(self) -> bool:
        """Did the kernel OOM-kill something here since configure()?"""
        return self.oom_kills() > self._oom_base

    def cpu_usage_s(self) -> float | None:
        """CPU seconds used by every task that ever ran here (None: no cpuacct / cpu.stat on this host)."""
        if self._usage_file is None:
            return None
        try:
            raw = _read(self._usage_file).decode()
        except OSError:
            return None
        if self.layout.version == 2:
            usec = _parse_kv(raw).get("usage_usec")
            return None if usec is None else usec / 1e6
        return int(raw) / 1e9 if raw.strip().isdigit() else None

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in _read(self._procs).split()]
        except OSError:
            return []

    # --- teardown --------------------------------------------------------
    def kill_all(self, timeout: float = 2.0) -> bool:
        """SIGKILL everything inside; True once the cgroup is empty."""
        if self.layout.version == 2:
            kill = self.dirs["unified"] / "cgroup.kill"
            if kill.exists():
                try:
                    _write(kill, "1")
                except OSError:
                    pass
        deadline = time.monotonic() + timeout
        while True:
            pids = self.pids()
            if not pids:
                return True
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)

    def close(self) -> None:
        """Close the files kept open (idempotent)."""
        for fd in self._add_fds:
            os.close(fd)
        self._add_fds = []


class CgroupTree:
    """``<own cgroup>/coursebot-runner.<pid>/`` and its slots."""

    def __init__(self, layout: Layout, name: str) -> None:
        self.layout = layout
        self.name = name
        self.dirs = {c: p / name for c, p in layout.own.items()}
        self.slots: list[JobCgroup] = []
        self.io_limited = False  # the cells' disk I/O is throttled (limit_io)

    @classmethod
    def create(cls, slots: int, layout: Layout | None = None, name: str | None = None) -> CgroupTree:
        layout = _writable(layout or detect())
        tree = cls(layout, name or f"{TREE_PREFIX}{os.getpid()}")
        try:
            tree._cleanup_stale()
            tree._make(slots)
        except OSError as e:
            tree.destroy()
            raise SandboxUnavailable(
                f"cannot create cgroups under {', '.join(map(str, layout.own.values()))}: {e}; "
                f"the runner needs write access to its own cgroup ({_DELEGATION_HINT})"
            ) from e
        return tree

    def _cleanup_stale(self) -> None:
        # Trees left by runners that died: the name carries the owner's pid (coursebot-runner.PID, or
        # PID-TAG for a second tree of one process), and a live owner's tree is never touched.
        for parent in self.layout.own.values():
            if not parent.is_dir():
                continue
            for d in parent.iterdir():
                if not d.name.startswith(TREE_PREFIX) or d.name == self.name:
                    continue
                owner = re.match(r"\d+", d.name[len(TREE_PREFIX) :])
                if owner and _pid_alive(int(owner.group())):
                    continue
                _remove_tree(d)

    def _make(self, slots: int) -> None:
        for d in self.dirs.values():
            d.mkdir(exist_ok=True)
        if self.layout.version == 2:
            self._enable_v2_controllers()
        else:
            _inherit_cpuset(self.dirs)
        for i in range(slots):
            dirs = {}
            for c, d in self.dirs.items():
                sd = d / f"slot-{i}"
                sd.mkdir(exist_ok=True)
                dirs[c] = sd
            if self.layout.version == 1:
                _inherit_cpuset(dirs)
            cell = JobCgroup(self.layout, dirs)
            self.io_limited = cell.limit_io(block_devices()) > 0
            self.slots.append(cell)

    def _enable_v2_controllers(self) -> None:
        own = self.layout.own["unified"]
        mine = self.dirs["unified"]
        available = (own / "cgroup.controllers").read_text().split()
        wanted = ["pids", "memory"] + [c for c in ("cpu", "cpuset", "io") if c in available]
        ctl = " ".join("+" + c for c in wanted)
        try:
            _write(own / "cgroup.subtree_control", ctl)
        except OSError as e:
            if e.errno != errno.EBUSY:
                raise
            # "No internal processes": a non-root v2 cgroup with processes
            # cannot hand controllers to children.  Do what container
            # inits do: move the processes into a leaf, then enable.
            leaf = own / "coursebot-init"
            leaf.mkdir(exist_ok=True)
            for pid in (own / "cgroup.procs").read_text().split():
                try:
                    _write(leaf / "cgroup.procs", pid)
                except OSError:
                    pass
            _write(own / "cgroup.subtree_control", ctl)
        _write(mine / "cgroup.subtree_control", ctl)

    def destroy(self) -> None:
        for s in self.slots:
            s.kill_all(timeout=1.0)
            s.close()
        for d in self.dirs.values():
            _remove_tree(d)


def _writable(layout: Layout) -> Layout:
    """``layout`` without the optional v1 hierarchies the runner cannot write: jobs go without them (no
    CPU quota, accounting from the job's own rusage, no pinning) rather than the runner without jobs."""
    if layout.version != 1:
        return layout
    return Layout(1, {c: p for c, p in layout.own.items() if c in V1_REQUIRED or os.access(p, os.W_OK)})


def block_devices(sys_block: Path = Path("/sys/block")) -> list[str]:
    """Every block device of the host, as "MAJ:MIN" (whichever holds the files jobs read, under any overlay)."""
    out = []
    try:
        entries = sorted(sys_block.iterdir())
    except OSError:
        return []
    for d in entries:
        try:
            dev = (d / "dev").read_text().strip()
        except OSError:
            continue
        if re.fullmatch(r"\d+:\d+", dev):
            out.append(dev)
    return out


def _inherit_cpuset(dirs: dict[str, Path]) -> None:
    """A new v1 cpuset starts with no CPUs and no memory nodes (no task may join it): copy its parent's."""
    d = dirs.get("cpuset")
    if d is None:
        return
    for name in ("cpuset.mems", "cpuset.cpus"):
        if not (d / name).read_text().strip():
            _write(d / name, (d.parent / name).read_text().strip())


def cpu_lanes(cpus: list[int], lanes: int) -> list[str]:
    """Split ``cpus`` between ``lanes`` concurrent jobs as cpuset lists: each job its own CPUs when there
    are enough (the remainder left to the runner and the zygote), else the CPUs shared round-robin."""
    cpus = sorted(cpus)
    if not cpus or lanes < 1:
        return []
    if len(cpus) < lanes:
        return [str(cpus[i % len(cpus)]) for i in range(lanes)]
    per = len(cpus) // lanes
    return [",".join(str(c) for c in cpus[i * per : (i + 1) * per]) for i in range(lanes)]


def _remove_tree(d: Path) -> None:
    if not d.is_dir():
        return
    for sub in sorted((p for p in d.iterdir() if p.is_dir()), reverse=True):
        _remove_tree(sub)
    try:
        pids = [int(x) for x in (d / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        pids = []
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for _ in range(200):
        try:
            d.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as e:
            if e.errno not in (errno.EBUSY, errno.ENOTEMPTY):
                return
            time.sleep(0.005)
