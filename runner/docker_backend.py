"""An alternative backend: one throw-away Docker container per job.

Selected with ``--backend docker`` (or RUNNER_BACKEND=docker for the embedded
client).  It needs the ``docker`` SDK (optional dependency) and a reachable
engine, plus an image with Python and torch (RUNNER_DOCKER_IMAGE).  Every job
gets: no network (``network_mode="none"``), a read-only root, a tmpfs working
dir and /tmp, memory (no swap) and pids limits, rlimits for CPU, file size and
descriptors, ``cap_drop=ALL``, ``no-new-privileges``, a non-root user and a
cleared environment.  There is no warm zygote here — each job starts a cold
interpreter, so expect seconds, not milliseconds — and graded checks are only
supported by the sandbox backend.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import Any

from .errors import InvalidRequest, JobFailed, RunnerBusy, SandboxUnavailable
from .limits import DEFAULT, Limits
from .result import RunResult

# Runs inside the container: the snippet comes in argv[1]; tracebacks are
# trimmed to the learner's own frames, like the sandbox backend's.
BOOT = r"""
import sys, traceback, linecache, random, types, builtins
src = sys.argv[1]; seed = int(sys.argv[2])
linecache.cache["<snippet>"] = (len(src), None, src.splitlines(True), "<snippet>")
random.seed(seed)
try:
    import torch; torch.manual_seed(seed)
except Exception:
    pass
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
"""


@dataclass(frozen=True)
class DockerConfig:
    image: str = "coursebot-runner:latest"   # must contain python3 and torch
    python: str = "python3"
    user: str = "65534:65534"                # never root in the container
    pool_size: int = 2                       # containers at once
    queue: int = 32
    limits: Limits = DEFAULT
    base_url: str | None = None              # None: DOCKER_HOST or the default socket

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides: Any) -> "DockerConfig":
        env = dict(os.environ if env is None else env)
        kw: dict[str, Any] = {}
        if env.get("RUNNER_DOCKER_IMAGE"):
            kw["image"] = env["RUNNER_DOCKER_IMAGE"]
        if env.get("DOCKER_HOST"):
            kw["base_url"] = env["DOCKER_HOST"]
        kw.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**kw)


def container_config(code: str, limits: Limits, cfg: DockerConfig, seed: int = 0) -> dict[str, Any]:
    """Keyword arguments for ``client.containers.create`` (pure, testable)."""
    tmpfs_opts = f"rw,nosuid,nodev,noexec,size={limits.tmpfs_bytes},mode=1777"
    cpu = max(1, int(limits.cpu_time_s + 0.999))
    return {
        "image": cfg.image,
        "command": [cfg.python, "-I", "-B", "-c", BOOT, code, str(seed)],
        "user": cfg.user,
        "working_dir": "/sandbox",
        "environment": {"HOME": "/sandbox", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
                        "PYTHONDONTWRITEBYTECODE": "1"},
        "network_mode": "none",
        "network_disabled": True,
        "read_only": True,
        "tmpfs": {"/sandbox": tmpfs_opts, "/tmp": tmpfs_opts, "/dev/shm": tmpfs_opts},
        "mem_limit": limits.memory_bytes,
        "memswap_limit": limits.memory_bytes,        # = mem_limit: no swap
        "pids_limit": limits.max_processes,
        "nano_cpus": 1_000_000_000,                  # one core
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
        "ipc_mode": "none",
        "ulimits": [
            {"name": "cpu", "soft": cpu, "hard": cpu + 1},
            {"name": "fsize", "soft": limits.file_size_bytes, "hard": limits.file_size_bytes},
            {"name": "nofile", "soft": limits.open_files, "hard": limits.open_files},
            {"name": "core", "soft": 0, "hard": 0},
        ],
        "stdin_open": False,
        "tty": False,
        "detach": True,
        "labels": {"coursebot.runner": "job"},
    }


def classify(exit_code: int | None, oom_killed: bool, timed_out: bool, truncated: bool,
             stderr: str) -> tuple[str, int | None, int | None]:
    """(status, exit_code, signal) from what Docker reports.  Pure."""
    if truncated:
        return "output_limit", exit_code, None
    if timed_out:
        return "timeout", None, 9
    if oom_killed:
        return "memory_limit", None, 9
    if exit_code is not None and exit_code > 128:
        sig = exit_code - 128
        return ("timeout" if sig == 24 else "killed"), None, sig
    if exit_code:
        tail = stderr.strip().splitlines()[-1:] or [""]
        from .pool import MEMORY_ERROR_MARKERS
        if any(m in tail[0] for m in MEMORY_ERROR_MARKERS):
            return "memory_limit", exit_code, None
        return "error", exit_code, None
    return "ok", 0, None


class DockerBackend:
    def __init__(self, config: DockerConfig | None = None) -> None:
        self.config = config or DockerConfig()
        self.client = None
        self._sem = asyncio.Semaphore(self.config.pool_size)
        self._waiting = 0

    async def start(self) -> "DockerBackend":
        try:
            import docker  # optional dependency
        except ImportError:
            raise SandboxUnavailable("the docker backend needs the docker SDK: pip install docker") from None
        try:
            self.client = (docker.DockerClient(base_url=self.config.base_url) if self.config.base_url
                           else docker.from_env())
            await asyncio.to_thread(self.client.ping)
        except Exception as e:  # noqa: BLE001 - any failure means: no engine
            raise SandboxUnavailable(f"no Docker engine reachable: {e}") from None
        return self

    def stats(self) -> dict[str, Any]:
        return {"backend": "docker", "size": self.config.pool_size, "image": self.config.image}

    async def run(self, code: str, limits: Limits | dict | None = None, checks=None,
                  seed: int | None = None) -> RunResult:
        if checks is not None:
            raise InvalidRequest("graded checks need the sandbox backend")
        if self.client is None:
            raise SandboxUnavailable("the docker backend is not started")
        lim = limits if isinstance(limits, Limits) else Limits.from_dict(limits, self.config.limits)
        if self._sem.locked() and self._waiting >= self.config.queue:
            raise RunnerBusy("all containers busy and the queue is full")
        self._waiting += 1
        try:
            await self._sem.acquire()
        finally:
            self._waiting -= 1
        try:
            return await asyncio.to_thread(self._run_sync, code, lim, seed or 0)
        finally:
            self._sem.release()

    def _run_sync(self, code: str, lim: Limits, seed: int) -> RunResult:
        cont = self.client.containers.create(**container_config(code, lim, self.config, seed))
        t0 = time.monotonic()
        timed_out = False
        try:
            cont.start()
            try:
                state = cont.wait(timeout=lim.wall_time_s)
                exit_code = state.get("StatusCode")
            except Exception:  # noqa: BLE001 - requests' timeout
                timed_out = True
                exit_code = None
                cont.kill()
            duration = (time.monotonic() - t0) * 1000
            out = cont.logs(stdout=True, stderr=False)
            err = cont.logs(stdout=False, stderr=True)
            cont.reload()
            oom = bool(cont.attrs.get("State", {}).get("OOMKilled"))
        except Exception as e:  # noqa: BLE001
            raise JobFailed(f"docker job failed: {e}") from None
        finally:
            try:
                cont.remove(force=True)
            except Exception:  # noqa: BLE001
                pass
        truncated = len(out) + len(err) > lim.output_bytes
        out = out[: lim.output_bytes]
        err = err[: max(0, lim.output_bytes - len(out))]
        stderr = err.decode("utf-8", "replace")
        status, code_, sig = classify(exit_code, oom, timed_out, truncated, stderr)
        return RunResult(status=status, stdout=out.decode("utf-8", "replace"), stderr=stderr,
                         exit_code=code_, signal=sig, duration_ms=round(duration, 3),
                         truncated=truncated)

    async def close(self) -> None:
        if self.client is not None:
            try:
                self.client.close()
            except Exception:  # noqa: BLE001
                pass
