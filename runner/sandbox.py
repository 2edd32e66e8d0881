"""The sandbox: how the warm process is confined, and how each job is.

Two layers, because a job must start from a warm ``import torch`` (a cold
sandboxed interpreter takes seconds) yet get namespaces of its own:

1. **The zygote's sandbox** (built here, on the host side, with bubblewrap).
   A fresh user, pid, net, ipc, uts (and cgroup) namespace; a read-only root
   that holds only the interpreter, its libraries, site-packages and this
   package; no /home, no repo, no data, no /etc beyond a stub passwd; no
   network namespace but its own (no interfaces up, not even loopback); a
   clean environment; bwrap's seccomp filter; no_new_privs.  Inside it the
   zygote keeps CAP_SYS_ADMIN and CAP_SETPCAP *of its own user namespace
   only* (bwrap ``--cap-add``), which it needs to hand every job fresh
   namespaces.  It never runs learner code.

   When the runner is root on the host, bwrap itself is started as an
   unprivileged uid (``sandbox_uid``): a process whose uid is 0 on the host
   stays "root" for the kernel even inside a user namespace (it could write
   /proc/sys, /proc/sysrq-trigger, and RLIMIT_NPROC would not bind it).
   Because bwrap resolves bind sources as that uid, and the interpreter may
   live under /root (mode 0700), a short-lived *launcher* first binds every
   source onto a traversable staging directory inside a private mount
   namespace, then drops to ``sandbox_uid`` and execs bwrap.  The sandbox's
   user namespace then maps, besides ``sandbox_uid``, a block of host uids
   of the jobs (one per slot, uids.py), which the runner writes into it
   (bwrap's ``--userns-block-fd``: only root may map uids other than its
   own), and the zygote keeps CAP_SETUID and CAP_SETGID to hand each job
   its slot's uid.

2. **Each job** (``enter_job()`` below, run by the zygote's forked child):
   a pid namespace of its own (a tiny init is pid 1, the learner is pid 2),
   its own mount namespace with a fresh /proc, its own devpts (a few
   terminals), tmpfs working dir, /tmp and /dev/shm (all thrown away with
   the namespace), its own net and ipc
   namespaces, its slot's host uid (when the runner is root), rlimits,
   every capability dropped, the stricter seccomp filter, stdin on
   /dev/null and no inherited descriptors.  The runner puts it in a cgroup
   (pids + memory) before it runs a single learner line.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import importlib.util
import json
import os
import resource
import shutil
import signal
import socket
import struct
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import SandboxUnavailable
from .limits import SIGNALS_QUEUED, Limits

if TYPE_CHECKING:  # the zygote imports this module inside the sandbox: nothing more than it needs
    from collections.abc import Iterator

    from .config import RunnerConfig

# --- constants (linux/sched.h, linux/mount.h, linux/prctl.h) ---------------
CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18

PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

# setfsuid and setfsgid (asm/unistd_64.h): the 32-bit calls on x86_64, the only ones on arm64.
SYS_SETFSUID, SYS_SETFSGID = {"aarch64": (151, 152)}.get(os.uname().machine, (122, 123))

SO_PASSCRED = 16
SCM_CREDENTIALS = 2

# Paths inside the sandbox.
WORKDIR = "/sandbox"  # the job's fresh, empty working directory
PKG_ROOT = "/opt/coursebot"  # this package is bound read-only at PKG_ROOT/runner
INNER_HOSTNAME = "sandbox"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def setns(fd: int, nstype: int) -> None:
    _check(_libc.setns(fd, nstype), "setns")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        _libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            flags,
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    rc: int = _libc.prctl(
        option, ctypes.c_ulong(arg2), ctypes.c_ulong(arg3), ctypes.c_ulong(arg4), ctypes.c_ulong(arg5)
    )
    return rc


# --- host-side configuration ----------------------------------------------


@dataclass(frozen=True)
class SandboxConfig:
    """Where things are on the host and who the sandbox runs as (from a RunnerConfig: ``from_config``)."""

    bwrap: str
    python: str  # the interpreter that runs inside
    sandbox_uid: int  # host uid when the runner is root
    sandbox_gid: int
    extra_ro_binds: tuple[str, ...] = ()  # more host paths to expose read-only
    stage_parent: str = "/tmp"  # where the launcher's staging dir goes (root only)

    @classmethod
    def from_config(cls, config: RunnerConfig) -> SandboxConfig:
        return cls(
            bwrap=config.bwrap, python=config.python, sandbox_uid=config.sandbox_uid, sandbox_gid=config.sandbox_uid
        )


def _real_dir(p: str) -> str | None:
    try:
        rp = os.path.realpath(p)
    except OSError:
        return None
    return rp if os.path.isdir(rp) else None


def python_binds(python: str) -> list[str]:
    """Host directories the interpreter (and torch) need, outermost first.

    Only the interpreter's prefix, the virtualenv (if any), site-packages that
    hold torch, and the system's shared libraries: nothing else of the host.
    """
    paths: list[str] = []
    # The base installation: <prefix>/bin/python3.x (symlinks resolved) -> <prefix>
    paths.append(str(Path(os.path.realpath(python)).parent.parent))
    # A virtualenv: <venv>/bin/python next to <venv>/pyvenv.cfg.
    venv = Path(os.path.abspath(python)).parent.parent
    if (venv / "pyvenv.cfg").exists():
        paths.append(str(venv))
    spec = importlib.util.find_spec("torch")  # locates torch without importing it
    if spec and spec.origin:
        paths.append(str(Path(spec.origin).parent.parent))
    out: list[str] = []
    for p in paths:
        rp = _real_dir(p)
        if rp and not any(rp == q or rp.startswith(q + "/") for q in out):
            out = [q for q in out if not q.startswith(rp + "/")] + [rp]
    return out


def system_binds() -> tuple[list[str], list[tuple[str, str]]]:
    """(read-only dirs, symlinks) for the shared libraries under /usr and /lib*."""
    dirs, links = [], []
    for p in ("/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/share/zoneinfo"):
        if os.path.isdir(p) and not os.path.islink(p):
            dirs.append(p)
    for p in ("/lib", "/lib64", "/lib32"):
        if os.path.islink(p):
            links.append((os.readlink(p), p))
        elif os.path.isdir(p):
            dirs.append(p)
    if os.path.isfile("/etc/ld.so.cache"):
        dirs.append("/etc/ld.so.cache")  # a file; lets ld.so find multiarch libs
    return dirs, links


def package_dir() -> str:
    return str(Path(__file__).resolve().parent)


@dataclass
class UsernsSetup:
    """What the runner writes into the sandbox's user namespace while bwrap waits for it (root only)."""

    info_fd: int  # bwrap writes its child's pid here (--info-fd), as JSON
    block_fd: int  # one byte here lets bwrap go on (--userns-block-fd)
    maps: str  # the lines of uid_map and of gid_map (gids have the uids' numbers)

    def close(self) -> None:
        for fd in (self.info_fd, self.block_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


@dataclass
class LaunchPlan:
    """A ready-to-run command line for a sandboxed interpreter."""

    argv: list[str]
    pass_fds: list[int]
    cleanup: list[str] = field(default_factory=list)  # host paths to remove later
    close_after_spawn: list[int] = field(default_factory=list)
    userns: UsernsSetup | None = None  # what the runner must write before the sandbox goes on

    def close_fds(self) -> None:
        for fd in self.close_after_spawn:
            try:
                os.close(fd)
            except OSError:
                pass
        self.close_after_spawn.clear()

    def remove_stage(self) -> None:
        for p in self.cleanup:
            shutil.rmtree(p, ignore_errors=True)


def _data_fd(data: bytes) -> int:
    """A pipe read end holding ``data`` (for bwrap's --ro-bind-data / --seccomp)."""
    r, w = os.pipe()
    if len(data) > 60000:
        raise ValueError("data too large for a pipe")
    os.write(w, data)
    os.close(w)
    return r


def sandbox_env() -> dict[str, str]:
    """The whole environment inside: nothing inherited from the host."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": WORKDIR,
        "USER": "learner",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TMPDIR": "/tmp",
        # One compute thread: the zygote must stay single-threaded to fork
        # safely, and two cores are shared by every job.
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
        # Every allocation on glibc's heap, one contiguous range that the
        # zygote remaps as huge pages after warm-up (hugepages.py).
        "PYTHONMALLOC": "malloc",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
    }


def plan(
    cfg: SandboxConfig,
    inner_argv: list[str],
    extra_fds: list[int],
    seccomp_filter: bytes | None,
    job_uids: tuple[int, int] | None = None,
) -> LaunchPlan:
    """Build the launcher + bwrap command line that runs ``inner_argv`` sandboxed.

    ``extra_fds`` stay open across the exec (e.g. the zygote's control socket).  ``job_uids`` (first,
    count): host uids the sandbox's user namespace maps besides its own, for jobs (the runner must be root
    and complete the namespace: ``complete_userns``).
    """
    if not os.access(cfg.bwrap, os.X_OK):
        raise SandboxUnavailable(
            f"bubblewrap not found at {cfg.bwrap}: install it (apt-get install -y bubblewrap) "
            "or set RUNNER_BWRAP to its path"
        )
    as_root = os.geteuid() == 0
    uid = cfg.sandbox_uid if as_root else os.getuid()
    gid = cfg.sandbox_gid if as_root else os.getgid()

    ro_dirs = python_binds(cfg.python)
    sys_dirs, links = system_binds()
    binds: list[tuple[str, str]] = [(d, d) for d in sys_dirs]
    binds += [(d, d) for d in ro_dirs]
    binds.append((package_dir(), f"{PKG_ROOT}/runner"))
    binds += [(p, p) for p in cfg.extra_ro_binds]

    stage = None
    cleanup: list[str] = []
    if as_root:
        stage = tempfile.mkdtemp(prefix="coursebot-stage-", dir=cfg.stage_parent)
        os.chmod(stage, 0o755)
        cleanup.append(stage)

    jobs = range(job_uids[0], job_uids[0] + job_uids[1]) if as_root and job_uids else range(0)
    users = [(uid, gid), *((u, u) for u in jobs)]
    passwd = "".join(f"learner:x:{u}:{g}:learner:{WORKDIR}:/bin/false\n" for u, g in users).encode()
    group = "".join(f"learner:x:{g}:\n" for _u, g in users).encode()
    fds: list[int] = []
    userns = None
    if jobs:
        info_r, info_w = os.pipe2(os.O_CLOEXEC)
        block_r, block_w = os.pipe2(os.O_CLOEXEC)
        fds += [info_w, block_r]
        maps = f"{uid} {uid} 1\n{jobs.start} {jobs.start} {len(jobs)}\n"
        userns = UsernsSetup(info_r, block_w, maps)
    args: list[str] = [
        cfg.bwrap,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        INNER_HOSTNAME,
        # Kept inside the sandbox's own user namespace only: the zygote needs
        # them to give each job fresh pid/mount/net namespaces and to drop
        # the bounding set; every job drops all of them before learner code.
        "--cap-add",
        "CAP_SYS_ADMIN",
        "--cap-add",
        "CAP_SETPCAP",
        "--clearenv",
    ]
    if userns is not None:
        # The runner maps the jobs' uids (bwrap waits for it), and the zygote gives each job its slot's.
        args += ["--userns-block-fd", str(block_r), "--info-fd", str(info_w)]
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    for k, v in sandbox_env().items():
        args += ["--setenv", k, v]
    # The directories above each mount point, made first and open to all: bwrap makes missing ones 0700, which the
    # jobs' uids (not the sandbox's, see uids.py) could not cross to reach the interpreter.
    above = {str(p) for _src, dest in binds for p in Path(dest).parents if str(p) != "/"}
    above |= {str(p) for p in Path("/etc/passwd").parents if str(p) != "/"}
    for d in sorted(above, key=lambda p: (p.count("/"), p)):
        args += ["--perms", "0755", "--dir", d]
    stage_binds: list[list[str]] = []
    for i, (src, dest) in enumerate(binds):
        if stage:
            staged = f"{stage}/{i}"
            stage_binds.append([src, staged])
            args += ["--ro-bind", staged, dest]
        else:
            args += ["--ro-bind", src, dest]
    for target, path in links:
        args += ["--symlink", target, path]
    for data, dest in ((passwd, "/etc/passwd"), (group, "/etc/group")):
        fd = _data_fd(data)
        fds.append(fd)
        args += ["--ro-bind-data", str(fd), dest]
    args += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        # Mount points only: each job mounts its own tmpfs on them.
        "--dir",
        "/tmp",
        "--dir",
        WORKDIR,
        # Nothing the zygote sees is writable, so nothing a job writes
        # outside its own tmpfs can reach the next job.
        "--remount-ro",
        "/dev",
        "--remount-ro",
        "/",
    ]
    if seccomp_filter is not None:
        fd = _data_fd(seccomp_filter)
        fds.append(fd)
        args += ["--seccomp", str(fd)]
    args += ["--chdir", "/", "--", *inner_argv]

    spec = {"argv": args, "stage_binds": stage_binds, "uid": uid, "gid": gid, "root": as_root}
    launcher = [
        sys.executable,
        "-s",
        "-S",
        "-B",
        "-c",
        "import sys; sys.path.insert(0, sys.argv[1]); from runner.sandbox import launcher_main; launcher_main()",
        str(Path(package_dir()).parent),
        json.dumps(spec),
    ]
    return LaunchPlan(
        argv=launcher, pass_fds=fds + list(extra_fds), cleanup=cleanup, close_after_spawn=fds, userns=userns
    )


@contextlib.contextmanager
def filesystem_ids(uid: int, gid: int) -> Iterator[None]:
    """Check file permissions as ``uid``/``gid`` in this thread only (setfsuid, setfsgid), then as before.

    A runner that is root with no CAP_DAC_OVERRIDE (a container's root with the README's capabilities) may not
    write another uid's files: the sandbox's uid_map, the socket folder of the image's user.  As their owner it
    may, and every capability that is not about files (CAP_SETUID, CAP_SYS_ADMIN) stays in force meanwhile.
    Only this thread's ids change (the raw system calls, not glibc's process-wide set*id), so the caller must not
    yield to other code in between.  A no-op unless we are root and the ids differ.
    """
    if os.geteuid() != 0 or (uid, gid) == (0, 0):
        yield
        return
    old_gid = _libc.syscall(SYS_SETFSGID, gid)
    old_uid = _libc.syscall(SYS_SETFSUID, uid)
    try:
        yield
    finally:
        _libc.syscall(SYS_SETFSUID, old_uid)
        _libc.syscall(SYS_SETFSGID, old_gid)


def complete_userns(setup: UsernsSetup, launcher_pid: int) -> None:
    """Write the uid and gid maps of the sandbox's user namespace, then let bwrap go on (blocking; root only).

    bwrap names its child on the info pipe once it has cloned it into the new namespace; that child must be
    the launcher's own (bwrap is the launcher, exec'd), or nothing is written.
    """
    try:
        raw = b""
        while chunk := os.read(setup.info_fd, 4096):
            raw += chunk
            if len(raw) > 65536:
                break
        try:
            child = int(json.loads(raw)["child-pid"])
        except (ValueError, KeyError, TypeError):
            raise SandboxUnavailable(f"bwrap did not say where its sandbox is ({raw[:200]!r})") from None
        with open(f"/proc/{child}/stat", "rb") as f:
            ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        if ppid != launcher_pid:
            raise SandboxUnavailable(f"bwrap's child {child} is not the launcher's ({ppid} != {launcher_pid})")
        # The maps belong to the sandbox's uid (bwrap's child is dumpable): written as it, by our CAP_SETUID.
        owner = os.stat(f"/proc/{child}")
        with filesystem_ids(owner.st_uid, owner.st_gid):
            for name in ("uid_map", "gid_map"):
                with open(f"/proc/{child}/{name}", "w") as f:
                    f.write(setup.maps)
        os.write(setup.block_fd, b"1")
    except OSError as e:
        raise SandboxUnavailable(f"cannot map the jobs' uids into the sandbox: {e}") from None
    finally:
        setup.close()


def launcher_main() -> None:
    """Entry point of the short-lived launcher (see the module docstring)."""
    spec = json.loads(sys.argv[2])
    try:
        if spec["root"]:
            # A private mount namespace: the staging binds exist only here,
            # and are gone with the sandbox.  The host's mounts are untouched.
            unshare(CLONE_NEWNS)
            mount(None, "/", None, MS_REC | MS_PRIVATE)
            for src, staged in spec["stage_binds"]:
                if os.path.isdir(src):
                    os.makedirs(staged, 0o755, exist_ok=True)
                else:
                    Path(staged).touch(0o644)
                mount(src, staged, None, MS_BIND | MS_REC)
            os.setgroups([])
            os.setresgid(spec["gid"], spec["gid"], spec["gid"])
            os.setresuid(spec["uid"], spec["uid"], spec["uid"])
            # Dropping root reset the parent-death signal; make sure the
            # sandbox dies with the runner (bwrap's --die-with-parent covers
            # the sandbox; this covers the launcher itself).
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        os.execv(spec["argv"][0], spec["argv"])
    except OSError as e:
        sys.stderr.write(f"coursebot launcher: {e}\n")
        os._exit(127)


# --- host capability checks -------------------------------------------------

# How to fix a host where the sandbox cannot start or its isolation does not hold.
HOST_FIX = (
    "to fix the host: install bubblewrap (apt-get install -y bubblewrap), enable "
    "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; "
    "sysctl user.max_user_namespaces=15000; on Ubuntu also "
    "sysctl kernel.apparmor_restrict_unprivileged_userns=0), and give the runner "
    "write access to its cgroup (pids + memory controllers)"
)


def host_problems(cfg: SandboxConfig) -> list[str]:
    """Cheap static checks, each problem phrased as how to fix the host."""
    problems = []
    if not os.access(cfg.bwrap, os.X_OK):
        problems.append("install bubblewrap: apt-get install -y bubblewrap (or set RUNNER_BWRAP)")
    try:
        if int(Path("/proc/sys/user/max_user_namespaces").read_text()) == 0:
            problems.append("enable user namespaces: sysctl user.max_user_namespaces=15000")
    except (OSError, ValueError):
        pass
    p = Path("/proc/sys/kernel/unprivileged_userns_clone")
    if p.exists() and p.read_text().strip() == "0":
        problems.append("enable unprivileged user namespaces: sysctl kernel.unprivileged_userns_clone=1")
    p = Path("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
    if p.exists() and p.read_text().strip() == "1":
        problems.append(
            "allow unprivileged user namespaces under AppArmor: "
            "sysctl kernel.apparmor_restrict_unprivileged_userns=0 "
            "(or an AppArmor profile for bwrap granting 'userns')"
        )
    return problems


# --- inside the sandbox: a job's own namespaces ----------------------------


def enter_job(limits: Limits, owner: tuple[int, int] | None = None) -> int:
    """In a freshly forked job process (pid 2 of its own pid namespace):
    private mount, net and ipc namespaces; a fresh /proc and devpts; per-job tmpfs (owned by ``owner``'s
    uid and gid: the ids the job will run as, else our own)."""
    unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC)
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    # A /proc of this pid namespace (the job sees only itself and its init) with nothing but the processes
    # (subset=pid, Linux 5.8+): no kernel command line or config, boot_id, host-wide load, memory or mounts.
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, JOB_PROC_OPTIONS)
    # Terminals of its own (/dev/ptmx is bwrap's symlink to pts/ptmx): the zygote's devpts would let
    # concurrent jobs open each other's terminals, and every instance draws on the host's kernel.pty.max.
    mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, f"newinstance,ptmxmode=0666,mode=0600,max={JOB_PTYS}")
    uid, gid = owner or (os.getuid(), os.getgid())
    size = int(limits.tmpfs_bytes)
    for target, mode in JOB_TMPFS:
        mount(
            "tmpfs",
            target,
            "tmpfs",
            MS_NOSUID | MS_NODEV,
            f"size={size},nr_inodes=4096,mode={mode},uid={uid},gid={gid}",
        )
    return size


JOB_TMPFS = ((WORKDIR, "0755"), ("/tmp", "1777"), ("/dev/shm", "1777"))
# hidepid: a process the job cannot ptrace (its init) is not even listed.
JOB_PROC_OPTIONS = "subset=pid,hidepid=invisible"
JOB_PTYS = 4  # pseudo-terminals a job may hold at once (no lesson needs one; a library might open one)


def become(uid: int, gid: int) -> None:
    """Run as ``uid``/``gid`` (numbers of the sandbox's user namespace), no supplementary groups.

    Not from or to uid 0, so the kernel keeps the capabilities the job's setup still needs (they go later).
    """
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def own_user_namespace() -> None:
    """Enter a user namespace of the job's own, mapping only its uid and gid (no capability survives it).

    The kernel counts some per-user figures per user namespace and uid (signals queued: SigQ; also the
    pending-signal limit): a job's own namespace keeps them its own even where jobs share a host uid (a runner
    that is not root, see uids.py).  Pipe buffer pages are counted per host uid only: per-slot uids do that.
    """
    uid, gid = os.getuid(), os.getgid()
    unshare(CLONE_NEWUSER)
    for name, line in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(line)


def send_credentials(sock: socket.socket, payload: bytes = b"hello") -> None:
    """Tell the runner our pid *as the runner sees it*: the kernel translates
    an SCM_CREDENTIALS pid into the receiver's pid namespace."""
    creds = struct.pack("=iII", os.getpid(), os.getuid(), os.getgid())
    sock.sendmsg([payload], [(socket.SOL_SOCKET, SCM_CREDENTIALS, creds)])


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_CAPS: tuple[_CapHeader, ctypes.Array[_CapData]] | None = None
_BOUNDING: tuple[int, ...] | None = None  # capabilities a job drops from its bounding set


def bounding_set(status: str) -> tuple[int, ...]:
    """The capability numbers in CapBnd of a /proc/PID/status text (pure)."""
    line = next(ln for ln in status.splitlines() if ln.startswith("CapBnd:"))
    mask = int(line.split()[1], 16)
    return tuple(cap for cap in range(64) if mask >> cap & 1)


def prepare_job_primitives() -> None:
    """Build what jobs use, once, in the zygote (not per job)."""
    global _CAPS, _BOUNDING
    _CAPS = (_CapHeader(0x20080522, 0), (_CapData * 2)())  # _LINUX_CAPABILITY_VERSION_3
    # Every capability the kernel knows: a job enters a user namespace of its own (own_user_namespace), whose
    # bounding set starts full, so all go, not only the few bwrap left the zygote.
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            _BOUNDING = tuple(range(int(f.read()) + 1))
    except (OSError, ValueError):
        _BOUNDING = None  # every number, up to the first the kernel does not know


def drop_capabilities() -> None:
    """Empty bounding, ambient, effective, permitted and inheritable sets."""
    for cap in _BOUNDING if _BOUNDING is not None else range(64):
        if prctl(PR_CAPBSET_DROP, cap) != 0:
            err = ctypes.get_errno()
            if err == errno.EINVAL:  # past the last capability this kernel knows
                break
            raise OSError(err, "prctl(PR_CAPBSET_DROP)")
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    hdr, data = _CAPS if _CAPS is not None else (_CapHeader(0x20080522, 0), (_CapData * 2)())
    _check(_libc.capset(ctypes.byref(hdr), data), "capset")


def set_rlimits(limits: Limits) -> None:
    cpu = max(1, int(limits.cpu_time_s + 0.999))
    # Soft limit: SIGXCPU; hard limit one second later: SIGKILL (for code
    # that ignores SIGXCPU).
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_bytes, limits.file_size_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))
    resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))
    resource.setrlimit(resource.RLIMIT_SIGPENDING, (SIGNALS_QUEUED, SIGNALS_QUEUED))
    # No real-time scheduling and no nice below the default, whatever the runner was started with: a
    # SCHED_FIFO loop would starve the host, outside anything the cgroups' CPU quota sees in time.
    resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0))
    resource.setrlimit(resource.RLIMIT_NICE, (0, 0))
