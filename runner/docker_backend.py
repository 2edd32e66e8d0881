"""An alternative backend: one throw-away Docker container per job.

Selected with RUNNER_BACKEND=docker (or ``--backend docker``).  It needs the
``docker`` SDK (optional dependency) and a reachable engine (DOCKER_HOST), plus
an image with Python and torch (RUNNER_DOCKER_IMAGE).  Every job
gets: no network (``network_mode="none"``), a read-only root, a tmpfs working
dir and /tmp, memory (no swap) and pids limits, rlimits for CPU, file size and
descriptors, ``cap_drop=ALL``, ``no-new-privileges``, a cleared environment, the
sandbox's seccomp policy (``seccomp.docker_profile``: no ``sync``, no
``io_uring``, no page-cache probes, ...), /proc masked down to its processes and
/sys masked whole (as in the sandbox), and a host uid of its slot's alone, which
no host process uses (uids.py): a job runs as no one a host process runs as, so
none can attach to it or read its memory.  There is no warm zygote here: each job starts a cold
interpreter, so expect seconds, not milliseconds.

The code, its seed and (for graded checks) the expressions and a nonce reach
the container on its stdin, never in argv (which any host user can read, and
the job itself could): the container reads them first, then stdin is
/dev/null.  Its output streams back over the attached connection and is read
within a byte budget; one byte more and the container is killed (its log
is bounded to one file of 1 MB).  Docker's init is pid 1, so a job that
runs out of CPU time is reported as a timeout.  Each container is removed
with its volumes.  The image is the project's job target
(``docker build -t coursebot-job --target job .``): python, torch and this
runner, no lessons; a missing image is refused at start.

Graded checks work as in the sandbox backend (see grading/): the container
gets the expressions and a nonce, never the expected values; once the code ran
to its end it writes the extracted values after a marker at the end of its
stderr, and the runner, outside, decides the verdict.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import signal
import socket
import struct
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import backend, grading, info, seccomp, uids
from .backend import JobEnd, Request, Slots
from .config import RunnerConfig
from .errors import JobFailed, SandboxUnavailable
from .limits import DEFAULT, Limits
from .result import RunResult

# Runs inside the container: the job comes on stdin (job_input), which is then /dev/null; tracebacks
# are trimmed to the learner's own frames, like the sandbox backend's.
BOOT = r"""
import sys, os, json, traceback, linecache, random, types, builtins
job = json.loads(sys.stdin.buffer.read())
null = os.open(os.devnull, os.O_RDONLY); os.dup2(null, 0); os.close(null)
src, seed, spec, marker = job["code"], job["seed"], job["spec"], job["marker"].encode()
linecache.cache["<snippet>"] = (len(src), None, src.splitlines(True), "<snippet>")
random.seed(seed)
try:
    import warnings
    with warnings.catch_warnings():     # torch's import-time notices are not the learner's output
        warnings.simplefilter("ignore")
        import torch
    torch.manual_seed(seed)
except Exception:
    pass
if spec is not None:
    from runner import grading
    grading.capture_pristine()          # before the learner's code exists
    report_fd = os.dup(2)
# The learner's CPU time starts now: what the interpreter and torch took to start is not theirs.
import math, resource
usage = resource.getrusage(resource.RUSAGE_SELF)
spent = math.ceil(usage.ru_utime + usage.ru_stime)
resource.setrlimit(resource.RLIMIT_CPU, (spent + job["cpu_s"], spent + job["cpu_s"] + 1))
os.write(2, job["ready"].encode())      # and so does the wall clock (read_frames)
main = types.ModuleType("__main__"); main.__dict__["__builtins__"] = builtins
sys.modules["__main__"] = main
try:
    exec(compile(src, "<snippet>", "exec", dont_inherit=True), main.__dict__)
except SystemExit:
    raise
except BaseException as e:
    te = traceback.TracebackException(type(e), e, e.__traceback__)
    te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename == "<snippet>"])
    sys.stderr.write("".join(te.format())); sys.exit(1)
if spec is not None:
    sys.stdout.flush(); sys.stderr.flush()
    os.write(report_fd, b"\n" + marker)
    grading.write_report(report_fd, main.__dict__, spec)
"""

# Separates the learner's stderr from the report that follows it; exactly one must be found.
REPORT_MARKER = "\x1ecoursebot-report\x1e"
# The container writes this to stderr once torch is imported, just before the learner's code: the job's
# wall-clock limit starts there, not at the container's start.
READY_MARKER = "\x1ecoursebot-ready\x1e"
# Seconds a container may take to start and import torch, and CPU seconds it may spend on that, before
# the learner's own limits begin (generous: a busy host starts a cold interpreter slowly).
STARTUP_S = 120.0
STARTUP_CPU_S = 60
# Docker's attach stream: each frame is an 8-byte header (stream 1 = stdout, 2 = stderr; size) and data.
FRAME_HEADER = struct.Struct(">BxxxI")
# Seconds for Docker to report how a job ended once its output stream closed (more on a busy engine).
SETTLE_S = 30.0


def job_input(code: str, seed: int, spec: dict[str, Any] | None, limits: Limits = DEFAULT) -> bytes:
    """What a container reads on its stdin: the code, its seed, a graded job's expressions and nonce, and its
    CPU seconds (counted from the end of its start-up)."""
    job = {
        "code": code,
        "seed": seed,
        "spec": spec,
        "marker": REPORT_MARKER,
        "ready": READY_MARKER,
        "cpu_s": max(1, math.ceil(limits.cpu_time_s)),
    }
    return json.dumps(job).encode()


def split_report(stderr: bytes) -> tuple[bytes, bytes | None]:
    """Return (the learner's stderr, the report) from a graded container's stderr.  Pure.

    No marker, or more than one (the learner printed one), means no report: the checks fail.
    """
    marker = REPORT_MARKER.encode()
    if stderr.count(marker) != 1:
        return stderr, None
    head, _, report = stderr.partition(marker)
    return head[:-1] if head.endswith(b"\n") else head, report


# Where Docker's clients find the engine when DOCKER_HOST is unset.
DEFAULT_SOCKET = "/var/run/docker.sock"


def socket_problem(base_url: str | None) -> str | None:
    """Why this process may not use the engine's Unix socket, as an operator fixes it; None when it may (or TCP)."""
    url = base_url or os.environ.get("DOCKER_HOST") or f"unix://{DEFAULT_SOCKET}"
    if not url.startswith("unix://"):
        return None
    path = url[len("unix://") :]
    try:
        info = os.stat(path)
    except OSError as e:
        return f"no Docker engine socket at {path} ({e.strerror}): mount it (-v {path}:{path}) or set DOCKER_HOST"
    if os.access(path, os.R_OK | os.W_OK):
        return None
    return (
        f"the Docker engine socket {path} belongs to group {info.st_gid}, which this runner (uid {os.getuid()}) "
        f"is not in: start its container with --group-add {info.st_gid} (--group-add $(stat -c %g {path}) on "
        "the host; see the README, Docker)"
    )


@dataclass(frozen=True)
class DockerConfig:
    image: str  # must contain python3, torch and the runner package
    pool_size: int  # containers at once
    queue: int  # jobs allowed to wait for a container; one more -> RunnerBusy
    base_url: str | None  # the engine; None: Docker's default socket
    python: str = "python3"  # the image's interpreter
    # The jobs' host uids (and gids) follow this one: a block of pool_size no other runner holds (uids.py).
    after_uid: int = 63333
    limits: Limits = DEFAULT  # default limits of a job

    @classmethod
    def from_config(cls, config: RunnerConfig) -> DockerConfig:
        return cls(
            image=config.docker_image,
            pool_size=config.pool_size,
            queue=config.queue,
            base_url=config.docker_host,
            after_uid=config.sandbox_uid,
        )


# Docker's own masked paths (its defaults, which a container's MaskedPaths replaces rather than extends).
DOCKER_MASKED = (
    "/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
    "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
)  # fmt: skip


NOT_MASKED = ("cpuinfo",)


def masked_paths(proc: str = "/proc") -> list[str]:
    """What a job container's /proc and /sys hide, as the sandbox's: /proc shows its processes and nothing else
    (the host's memory, load, uptime, mounts, devices, kernel command line and boot_id), /sys nothing at all."""
    entries = [n for n in os.listdir(proc) if not n.isdigit() and not os.path.islink(os.path.join(proc, n))]
    # But cpuinfo: torch's CPU detection crashes (SIGSEGV in backward) on an empty one with no /sys, and the CPU's
    # model is the CPUID instruction's to tell anyway.
    return sorted({*DOCKER_MASKED, "/sys", *(f"/proc/{n}" for n in entries if n not in NOT_MASKED)})


def container_config(limits: Limits, cfg: DockerConfig, uid: int) -> dict[str, Any]:
    """Keyword arguments for ``client.containers.create`` (pure, testable) for a job running as host ``uid``;
    the job itself goes on stdin.  What the SDK's keywords cannot say (masked paths) is in ``host_extras``."""
    tmpfs_opts = f"rw,nosuid,nodev,noexec,size={limits.tmpfs_bytes},mode=1777"
    # A ceiling only: the container lowers its own limit to the job's once it has started (BOOT).
    cpu = STARTUP_CPU_S + max(1, math.ceil(limits.cpu_time_s))
    return {
        "image": cfg.image,
        "command": [cfg.python, "-I", "-B", "-c", BOOT],
        "user": f"{uid}:{uid}",
        "working_dir": "/sandbox",
        "environment": {"HOME": "/sandbox", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"},
        "network_mode": "none",
        "network_disabled": True,
        "read_only": True,
        "tmpfs": {"/sandbox": tmpfs_opts, "/tmp": tmpfs_opts, "/dev/shm": tmpfs_opts},
        "mem_limit": limits.memory_bytes,
        "memswap_limit": limits.memory_bytes,  # = mem_limit: no swap
        "pids_limit": limits.max_processes,
        "nano_cpus": 1_000_000_000,  # one core
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true", "seccomp=" + json.dumps(seccomp.docker_profile())],
        "ipc_mode": "none",
        "ulimits": [
            {"name": "cpu", "soft": cpu, "hard": cpu + 1},
            {"name": "fsize", "soft": limits.file_size_bytes, "hard": limits.file_size_bytes},
            {"name": "nofile", "soft": limits.open_files, "hard": limits.open_files},
            {"name": "core", "soft": 0, "hard": 0},
        ],
        # Docker's init as pid 1: it passes on signals (SIGXCPU at the CPU limit) and reaps orphans.
        "init": True,
        # stdin open once, for job_input; detach=False is how the SDK asks for StdinOnce (EOF when we close).
        "stdin_open": True,
        "detach": False,
        "tty": False,
        # The output is read from the attached stream, within its budget. The engine also logs it, to at
        # most one file of 1 MB: without a log to drain into, a flooding job that nobody reads any more
        # blocks the engine's own kill of it.
        "log_config": {"type": "local", "config": {"max-size": "1m", "max-file": "1", "compress": "false"}},
        "labels": {"coursebot.runner": "job"},
    }


def host_extras() -> dict[str, Any]:
    """The container's HostConfig fields the SDK has no keyword for."""
    return {"MaskedPaths": masked_paths()}


def read_frames(
    connection: socket.socket, started: float, wall_s: float, budget: int
) -> tuple[bytes, bytes, bool, bool, float]:
    """Read a container's attached stdout and stderr until it ends, its time runs out, or more than ``budget``
    bytes came: (stdout, stderr, timed out, over budget, when the learner's code began).

    The wall clock starts when READY_MARKER leads stderr (STARTUP_S after ``started`` at most); the marker is
    not output. Never holds more than the budget."""
    streams = {1: bytearray(), 2: bytearray()}
    ready = READY_MARKER.encode()
    began: float | None = None
    header = b""
    kind = remaining = received = 0

    def ended(timed_out: bool = False, overflow: bool = False) -> tuple[bytes, bytes, bool, bool, float]:
        err = bytes(streams[2])
        return bytes(streams[1]), err.removeprefix(ready), timed_out, overflow, began or time.monotonic()

    while True:
        deadline = started + STARTUP_S if began is None else began + wall_s
        left = deadline - time.monotonic()
        if left <= 0:
            return ended(timed_out=True)
        connection.settimeout(left)
        try:
            chunk = memoryview(connection.recv(65536))
        except TimeoutError:
            return ended(timed_out=True)
        if not chunk:
            return ended()
        while chunk:
            if remaining == 0:  # a frame's header, perhaps split across reads
                need = FRAME_HEADER.size - len(header)
                header, chunk = header + bytes(chunk[:need]), chunk[need:]
                if len(header) == FRAME_HEADER.size:
                    kind, remaining = FRAME_HEADER.unpack(header)
                    header = b""
                continue
            data, chunk = chunk[:remaining], chunk[remaining:]
            remaining -= len(data)
            keep = data[: max(0, budget + len(ready) - received)]
            received += len(data)
            if kind in streams:
                streams[kind] += keep
            if began is None and streams[2][: len(ready)] == ready:
                began = time.monotonic()
            if received > budget + len(ready):
                return ended(overflow=True)


def _kill(cont: Any) -> None:
    with contextlib.suppress(Exception):  # it may have ended meanwhile
        cont.kill()


def drain(connection: socket.socket, within_s: float) -> None:
    """Read and discard what a killed container still sends, until its stream ends (at most ``within_s``)."""
    deadline = time.monotonic() + within_s
    with contextlib.suppress(OSError):
        while (left := deadline - time.monotonic()) > 0:
            connection.settimeout(left)
            if not connection.recv(1 << 16):
                return


def job_end(exit_code: int | None, oom_killed: bool, timed_out: bool, truncated: bool, stderr: str) -> JobEnd:
    """How a container's job ended, from what Docker reports (a signal N shows as exit code 128 + N).  Pure."""
    code: int | None
    sig: int | None
    if truncated:
        code, sig = exit_code, None
    elif timed_out or oom_killed:
        code, sig = None, int(signal.SIGKILL)  # we killed it, or the kernel did
    elif exit_code is not None and exit_code > 128:
        code, sig = None, exit_code - 128
    else:
        code, sig = exit_code or 0, None
    return JobEnd(code, sig, stderr, truncated=truncated, timed_out=timed_out, oom_killed=oom_killed)


class DockerBackend:
    def __init__(self, config: DockerConfig) -> None:
        self.config = config
        self.client: Any = None  # a docker.DockerClient once started (the SDK has no type information)
        self._slots = Slots(config.pool_size, config.queue)
        self.fingerprint = ""  # of the runner's code and the job image, which holds its own (info.py)
        self.uids: uids.UidBlock | None = None
        self._free_uids: list[int] = []  # one per slot: a job takes one, and gives it back once its container is gone

    async def start(self) -> DockerBackend:
        try:
            import docker  # optional dependency
        except ImportError:
            raise SandboxUnavailable("the docker backend needs the docker SDK: pip install docker") from None
        try:
            self.client = (
                docker.DockerClient(base_url=self.config.base_url) if self.config.base_url else docker.from_env()
            )
            await asyncio.to_thread(self.client.ping)
        except Exception as e:  # the SDK raises its own errors and requests' alike
            raise SandboxUnavailable(
                socket_problem(self.config.base_url) or f"no Docker engine reachable: {e}"
            ) from None
        try:
            image = await asyncio.to_thread(self.client.images.get, self.config.image)
        except docker.errors.ImageNotFound:
            raise SandboxUnavailable(
                f"the Docker backend's image {self.config.image} is missing: build it with "
                f"docker build -t {self.config.image} --target job . (or set RUNNER_DOCKER_IMAGE)"
            ) from None
        except Exception as e:
            raise SandboxUnavailable(f"cannot look up the image {self.config.image}: {e}") from None
        # The image carries the code that runs inside each job and its torch: its id names both.
        self.fingerprint = info.fingerprint(f"image {image.id}")
        self.uids = uids.claim(self.config.after_uid, self.config.pool_size)
        self._free_uids = [self.uids.uid(i) for i in range(self.uids.count)]
        return self

    def stats(self) -> dict[str, Any]:
        """What the backend runs with and what it is doing (the service's "info")."""
        return {
            "backend": "docker",
            "size": self.config.pool_size,
            "queue": self.config.queue,
            "image": self.config.image,
            "docker_host": self.config.base_url,
            "fingerprint": self.fingerprint,
            "job_uids": [self.uids.first, self.uids.count] if self.uids is not None else None,
            "running": self._slots.running,
            "waiting": self._slots.waiting,
        }

    async def run(
        self,
        code: str,
        limits: Limits | Mapping[str, Any] | None = None,
        checks: grading.ExerciseChecks | None = None,
        seed: int | None = None,
    ) -> RunResult:
        if self.client is None:
            raise SandboxUnavailable("the docker backend is not started")
        request = Request.of(code, limits, checks, seed, self.config.limits)
        return await backend.run_request(request, self._run_in_slot, self._reference)

    async def _reference(self, checks: grading.ExerciseChecks, lim: Limits, seed: int) -> Mapping[str, Any]:
        return await backend.run_reference(self._run_in_slot, checks, lim, seed)

    async def _run_in_slot(
        self, code: str, lim: Limits, seed: int, spec: dict[str, Any] | None
    ) -> tuple[RunResult, bytes | None]:
        async with self._slots.take():
            uid = self._free_uids.pop()  # as many uids as slots: one is free
            try:
                return await asyncio.to_thread(self._run_sync, code, lim, seed, spec, uid)
            finally:
                self._free_uids.append(uid)

    def _create(self, lim: Limits, uid: int) -> Any:
        """A job's container, created (not started) with everything container_config and host_extras say."""
        from docker.models.containers import _create_container_args  # the SDK's own translation of its keywords

        args = _create_container_args({**container_config(lim, self.config, uid), "version": self.client.api._version})
        args["host_config"].update(host_extras())
        created = self.client.api.create_container(**args)
        return self.client.containers.get(created["Id"])

    def _run_sync(
        self, code: str, lim: Limits, seed: int, spec: dict[str, Any] | None, uid: int
    ) -> tuple[RunResult, bytes | None]:
        # Room for the learner's output and, in a graded job, the report after it.
        budget = lim.output_bytes + (grading.MAX_REPORT + len(REPORT_MARKER) + 1 if spec is not None else 0)
        cont = self._create(lim, uid)
        try:
            attached = cont.attach_socket(params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            connection: socket.socket = getattr(attached, "_sock", attached)
            try:
                cont.start()
                connection.sendall(job_input(code, seed, spec, lim))
                connection.shutdown(socket.SHUT_WR)
                out, err, timed_out, overflow, began = read_frames(
                    connection, time.monotonic(), lim.wall_time_s, budget
                )
                duration = (time.monotonic() - began) * 1000
                if timed_out or overflow:
                    # Killed while its attach stream is drained: the engine's kill waits until the output it
                    # holds is copied, so a flood nobody reads any more kept the kill hanging for minutes.
                    killer = threading.Thread(target=_kill, args=(cont,), daemon=True)
                    killer.start()
                    drain(connection, SETTLE_S)
                    killer.join(SETTLE_S)
            finally:
                connection.close()
            try:
                # A job may close its output and go on running: it still has the rest of its wall time.
                state = cont.wait(timeout=max(0.0, began + lim.wall_time_s - time.monotonic()) + SETTLE_S)
            except Exception:  # the SDK's read timeout: it did not end in time
                timed_out = True
                cont.kill()
                state = cont.wait(timeout=SETTLE_S)
            exit_code = None if timed_out else state.get("StatusCode")
            cont.reload()
            oom = bool(cont.attrs.get("State", {}).get("OOMKilled"))
        except Exception as e:  # the SDK raises its own errors and requests' alike
            raise JobFailed(f"docker job failed: {e}") from None
        finally:
            with contextlib.suppress(Exception):
                cont.remove(force=True, v=True)  # with its anonymous volumes, if the image declares any
        err, report = split_report(err) if spec is not None else (err, None)
        truncated = overflow or len(out) + len(err) > lim.output_bytes
        out = out[: lim.output_bytes]
        err = err[: max(0, lim.output_bytes - len(out))]
        stderr = err.decode("utf-8", "replace")
        end = job_end(exit_code, oom, timed_out, truncated, stderr)
        result = RunResult(
            status=backend.classify(end, lim),
            stdout=out.decode("utf-8", "replace"),
            stderr=stderr,
            exit_code=end.exit_code,
            signal=end.signal,
            duration_ms=round(duration, 3),
            truncated=truncated,
        )
        return result, report

    async def close(self) -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.close()
        if self.uids is not None:
            self.uids.release()
