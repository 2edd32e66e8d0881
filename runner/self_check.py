"""Proving the isolation at start: probe jobs, and what their findings say is broken.

The pool runs these through its own sandbox before it serves anyone (``prove_isolation``), and refuses
to start, saying how to fix the host, if a probe job could reach the network, the host's loopback or
Unix sockets, a file planted on the host, /root, capabilities, the host's pid namespace, more of /proc
than its own processes or another job's terminals, if its seccomp filter is not the allow list, or if the
pids limit does not bind.  The fork test is BOUNDED (40 tries against
a limit of 8), never a real bomb.
"""

from __future__ import annotations

import contextlib
import errno
import json
import secrets
import socket
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import sandbox
from .backend import Backend
from .errors import SandboxUnavailable
from .result import Status


async def prove_isolation(backend: Backend, python: str, stderr_tail: Callable[[], str]) -> None:
    """Raise SandboxUnavailable unless probe jobs show the isolation holds (the pids limit included)."""
    res = await backend.run("print(6 * 7)")
    if res.status is not Status.OK or res.stdout != "42\n":
        raise SandboxUnavailable(
            f"the sandbox cannot run a trivial snippet: {res.status} {res.stderr[-800:]} {stderr_tail()}"
        )
    with _probe_targets(plant_beside(sandbox.package_dir(), sandbox.python_binds(python))) as targets:
        res = await backend.run(PROBE.format(port=targets.port, planted=targets.planted, unix=targets.unix))
    try:
        facts = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SandboxUnavailable(f"the isolation probe failed to run: {res.status} {res.stderr[-800:]}") from None
    # /root may hold the interpreter (pyenv): only the path down to it is expected.
    allowed_root = {Path(d).parts[2] for d in sandbox.python_binds(python) if d.startswith("/root/")}
    failures = probe_failures(facts, allowed_root)
    if not failures:
        res = await backend.run(FORK_PROBE, limits={"max_processes": 8, "wall_time_s": 20})
        try:
            forked = int(res.stdout.split()[-1])
        except (ValueError, IndexError):
            forked = -1
        if res.status is not Status.OK or not 0 <= forked <= 8:
            failures.append(
                f"the pids cgroup does not bind (forked {forked} of 40 with a limit of 8; status {res.status})"
            )
    if failures:
        raise SandboxUnavailable(
            "isolation check failed, refusing to run code: " + "; ".join(failures) + f"; {sandbox.HOST_FIX}"
        )


@dataclass(frozen=True)
class _Targets:
    port: int  # a TCP listener on the host's loopback
    planted: str  # a file on the host, next to the runner package when possible
    unix: str  # a Unix socket listening on the host


def plant_beside(package: str, bound: list[str]) -> Path | None:
    """Where to plant the probe's file: beside the runner package, the host folder a leak would most likely
    show, unless that folder is bound into the sandbox on purpose (a package installed in the venv's
    site-packages is: it holds torch). Then a plant there would be seen by design, a false alarm. Pure."""
    folder = str(Path(package).parent)
    if any(folder == b or folder.startswith(b.rstrip("/") + "/") for b in bound):
        return None
    return Path(folder)


@contextlib.contextmanager
def _probe_targets(beside: Path | None) -> Iterator[_Targets]:
    """What a probe job must not reach, set up on the host for the length of the probe."""
    tmp = Path(tempfile.mkdtemp(prefix="coursebot-probe-"))
    planted = tmp / "planted"
    if beside is not None:
        candidate = beside / f".coursebot-probe-{secrets.token_hex(6)}"
        try:
            candidate.write_text("secret")
            planted = candidate
        except OSError:  # not ours to write: the temporary folder will do
            pass
    if planted.parent == tmp:
        planted.write_text("secret")
    unix_path = str(tmp / "probe.sock")
    with (
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener,
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as ulistener,
    ):
        try:
            listener.bind(("127.0.0.1", 0))
            listener.listen(4)
            ulistener.bind(unix_path)
            ulistener.listen(4)
            yield _Targets(listener.getsockname()[1], str(planted), unix_path)
        finally:
            for path in (planted, Path(unix_path)):
                with contextlib.suppress(OSError):
                    path.unlink()
            with contextlib.suppress(OSError):
                tmp.rmdir()


def probe_failures(facts: dict[str, Any], allowed_root: set[str]) -> list[str]:
    """What the isolation probe's findings say is broken (pure)."""
    failures = []
    if facts.get("inet") == "ALLOWED" or facts.get("inet6") == "ALLOWED":
        failures.append("a job could open an IP socket (need a seccomp filter and a fresh net namespace)")
    if facts.get("loopback") == "ALLOWED":
        failures.append("a job reached the host's loopback")
    if facts.get("unix") == "ALLOWED":
        failures.append("a job reached a host Unix socket")
    if facts.get("planted", True):
        failures.append("a job could see a file planted on the host")
    if facts.get("root") and not set(facts["root"]) <= allowed_root:
        failures.append(f"a job could see /root: {facts['root']}")
    st = facts.get("status", {})
    if st.get("NoNewPrivs") != "1" or st.get("Seccomp") != "2":
        failures.append("no_new_privs or seccomp is not in force for jobs")
    if int(st.get("CapEff", "1"), 16) != 0 or int(st.get("CapBnd", "1"), 16) != 0:
        failures.append("a job still holds capabilities")
    # Its init (pid 1) is not dumpable, so hidepid keeps it out of the listing: the job sees itself only.
    if facts.get("pids") != ["2"]:
        failures.append(f"a job's pid namespace is not its own: {facts.get('pids')}")
    if facts.get("proc") != ["self", "thread-self"]:
        failures.append(
            f"a job's /proc shows more than its processes: {facts.get('proc')} (needs Linux 5.8+: subset=pid)"
        )
    if facts.get("pts") != ["ptmx"]:
        failures.append(f"a job's terminals are not its own: /dev/pts has {facts.get('pts')}")
    if facts.get("personality") != [-1, errno.ENOSYS]:
        failures.append(
            f"the job's seccomp filter is not an allow list (personality() gave {facts.get('personality')})"
        )
    if facts.get("env"):
        failures.append(f"the job's environment leaks: {facts['env']}")
    return failures


PROBE = r"""
import os, socket, json
def attempt(f):
    try:
        f()
        return "ALLOWED"
    except BaseException as e:
        return type(e).__name__
facts = {{}}
facts["inet"] = attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
facts["inet6"] = attempt(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))
def loop():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM); s.settimeout(1); s.connect(("127.0.0.1", {port}))
facts["loopback"] = attempt(loop)
def unix():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(1); s.connect({unix!r})
facts["unix"] = attempt(unix)
facts["planted"] = os.path.exists({planted!r})
facts["root"] = sorted(os.listdir("/root")) if os.path.isdir("/root") else []
facts["status"] = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
facts["status"] = {{k: facts["status"][k].strip() for k in ("Uid", "NoNewPrivs", "Seccomp", "CapEff", "CapBnd")}}
facts["pids"] = sorted(p for p in os.listdir("/proc") if p.isdigit())
facts["proc"] = sorted(p for p in os.listdir("/proc") if not p.isdigit())
facts["pts"] = sorted(os.listdir("/dev/pts"))
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
facts["personality"] = [libc.personality(0xFFFFFFFF), ctypes.get_errno()]  # a query; not on the allow list
facts["env"] = sorted(k for k in os.environ if "TOKEN" in k or "SECRET" in k or "PASSWORD" in k)
print(json.dumps(facts))
"""

# A BOUNDED fork test (never a real bomb): 40 tries; the pool runs it with a limit of 8 tasks.
FORK_PROBE = r"""
import os, time
kids = []
for _ in range(40):
    try:
        pid = os.fork()
    except OSError:
        continue
    if pid == 0:
        time.sleep(0.3)
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
print(len(kids))
"""
