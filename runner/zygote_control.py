"""The runner's side of the zygote: starting the sandboxed warm process and talking on its control socket.

The zygote itself (zygote.py) runs inside the sandbox; this module runs in the runner, outside it.  It
starts the zygote through the sandbox's launcher (sandbox.plan), keeps the last lines of its stderr for
error messages, sends it requests on the control socket (the messages are listed in zygote.py) and
resolves the futures waiting for its answers.  When the zygote dies, every waiter fails with JobFailed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
from collections import deque
from collections.abc import Sequence
from typing import Any

from . import pipes, sandbox, seccomp
from .errors import JobFailed, SandboxUnavailable
from .zygote import recv_msg, send_msg

log = logging.getLogger("runner.zygote")

SEND_TIMEOUT_S = 10.0  # seconds a request may wait for room on the control socket
STOP_TIMEOUT_S = 2.0  # seconds to wait for the killed zygote to be reaped

Message = dict[str, Any]


def scrubbed_env() -> dict[str, str]:
    # The launcher and bwrap need nothing from us (bwrap clears the rest).
    return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


class ZygoteControl:
    """The sandboxed warm process, as the runner sees it."""

    def __init__(self, cfg: sandbox.SandboxConfig, job_uids: tuple[int, int] | None = None) -> None:
        self.cfg = cfg
        self.job_uids = job_uids  # (first, count): host uids of the jobs, mapped into the sandbox (root only)
        self.proc: subprocess.Popen[bytes] | None = None
        self.ctl: socket.socket | None = None
        self.plan: sandbox.LaunchPlan | None = None
        self.torch_version: str | None = None
        self.alive = False
        self._waiters: dict[tuple[str, str], asyncio.Future[Message]] = {}
        self._send_waiters: set[asyncio.Future[None]] = set()
        self._stderr: deque[str] = deque(maxlen=60)  # its last lines, for error messages
        self._err: pipes.Stream | None = None
        self._ready: asyncio.Future[Message] | None = None

    def argv(self, ctl_fd: int) -> list[str]:
        boot = (
            f"import sys; sys.path.insert(0, {sandbox.PKG_ROOT!r}); "
            "from runner.zygote import main; main(int(sys.argv[1]))"
        )
        return [self.cfg.python, "-s", "-B", "-P", "-c", boot, str(ctl_fd)]

    async def start(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        plan = self.plan = sandbox.plan(
            self.cfg, self.argv(child.fileno()), [child.fileno()], seccomp.zygote_filter(), self.job_uids
        )
        try:
            # Popen returns once the launcher is exec'd (a vfork and an exec, about a millisecond); the
            # zygote's slow part, importing torch, is awaited below without blocking the loop.
            proc = self.proc = subprocess.Popen(  # noqa: ASYNC220
                plan.argv,
                pass_fds=plan.pass_fds,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=scrubbed_env(),
                start_new_session=True,
                cwd="/",
            )
        finally:
            child.close()
            plan.close_fds()
        assert proc.stderr is not None  # stderr=PIPE
        if plan.userns is not None:
            try:
                # bwrap waits for the jobs' uids to be mapped (a few milliseconds after it starts).
                await asyncio.wait_for(asyncio.to_thread(sandbox.complete_userns, plan.userns, proc.pid), timeout)
            except BaseException as e:
                # Killing bwrap ends the mapping's wait on its pipe too (complete_userns closes what it holds).
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await asyncio.to_thread(proc.wait)
                parent.close()
                said = proc.stderr.read(4000).decode("utf-8", "replace").strip() or "nothing"
                proc.stderr.close()
                if isinstance(e, TimeoutError):
                    raise SandboxUnavailable(f"bwrap did not start in {timeout:.0f} s; it said: {said}") from None
                if isinstance(e, SandboxUnavailable):
                    raise SandboxUnavailable(f"{e}; bwrap said: {said}") from None
                raise
        parent.setblocking(False)
        self.ctl = parent
        self.alive = True
        # A log, consumed line by line: it may keep everything.
        self._err = pipes.Stream(proc.stderr.fileno(), pipes.Budget(1 << 62))
        loop.add_reader(self._err.fd, self._on_stderr)
        loop.add_reader(parent.fileno(), self._on_ctl)
        ready = self._ready = loop.create_future()
        try:
            msg = await asyncio.wait_for(asyncio.shield(ready), timeout)
        except TimeoutError:
            await self.stop()
            raise SandboxUnavailable(
                f"the sandboxed zygote did not start in {timeout:.0f} s; its stderr: {self.stderr_tail()}"
            ) from None
        self.torch_version = msg.get("torch")
        plan.remove_stage()  # bwrap has made its binds; the host dir can go

    def stderr_tail(self) -> str:
        return " | ".join(self._stderr)[-2000:] or "(empty)"

    def _on_stderr(self) -> None:
        err = self._err
        if err is None:
            return
        err.pump()
        if err.eof:
            asyncio.get_running_loop().remove_reader(err.fd)
        for line in err.data.decode("utf-8", "replace").splitlines():
            if line.strip():
                self._stderr.append(line.strip())
                log.debug("sandbox: %s", line)
        err.data.clear()

    def _on_ctl(self) -> None:
        while self.ctl is not None:
            try:
                msg, fds = recv_msg(self.ctl)
            except BlockingIOError:
                return
            except OSError:
                msg, fds = None, []
            for fd in fds:
                os.close(fd)
            if msg is None:
                self._died()
                return
            self._dispatch(msg)

    def _dispatch(self, msg: Message) -> None:
        op = msg.get("op")
        if op == "ready":
            if self._ready and not self._ready.done():
                self._ready.set_result(msg)
            return
        if op == "fatal":
            self._stderr.append(str(msg.get("error")))
            return
        key = ("spawn", str(msg.get("job"))) if op in ("spawned", "spawn_failed") else (str(op), str(msg.get("job")))
        fut = self._waiters.pop(key, None)
        if fut is not None and not fut.done():
            fut.set_result(msg)

    def _close_ctl(self) -> None:
        if self.ctl is not None:
            loop = asyncio.get_running_loop()
            # Unregistered before the close: a stale registration would meet the next socket given this fd.
            loop.remove_reader(self.ctl.fileno())
            loop.remove_writer(self.ctl.fileno())
            self.ctl.close()
            self.ctl = None
        for waiter in self._send_waiters:
            _wake(waiter)  # the sender looks again and finds the zygote gone

    def _died(self) -> None:
        if not self.alive:
            return
        self.alive = False
        self._close_ctl()
        err = JobFailed(f"the sandboxed zygote died; its stderr: {self.stderr_tail()}")
        if self._ready and not self._ready.done():
            self._ready.set_exception(
                SandboxUnavailable(f"the sandbox failed to start: {self.stderr_tail()}; {sandbox.HOST_FIX}")
            )
        for fut in self._waiters.values():
            if not fut.done():
                fut.set_exception(err)
                fut.exception()  # mark retrieved: nobody may be waiting on it any more
        self._waiters.clear()

    def expect(self, op: str, job: str) -> asyncio.Future[Message]:
        """A future for the zygote's answer ``op`` about ``job`` (fails with JobFailed if it dies)."""
        fut: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        if not self.alive:
            fut.set_exception(JobFailed("the sandboxed zygote is not running"))
        else:
            self._waiters[(op, job)] = fut
        return fut

    def forget(self, op: str, job: str) -> None:
        self._waiters.pop((op, job), None)

    async def send(self, msg: Message, fds: Sequence[int] = ()) -> None:
        """Send one request; waits (without blocking the loop) while the control socket is full."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SEND_TIMEOUT_S
        while True:
            ctl = self.ctl
            if not self.alive or ctl is None:
                raise JobFailed("the sandboxed zygote is not running")
            try:
                send_msg(ctl, msg, fds)
                return
            except BlockingIOError:
                pass
            left = deadline - loop.time()
            if left <= 0:
                raise JobFailed("the zygote's control socket is stuck")
            room: asyncio.Future[None] = loop.create_future()
            loop.add_writer(ctl.fileno(), _wake, room)
            self._send_waiters.add(room)
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(room, left)
            finally:
                self._send_waiters.discard(room)
                if self.ctl is ctl:
                    loop.remove_writer(ctl.fileno())

    async def stop(self) -> None:
        loop = asyncio.get_running_loop()
        self._close_ctl()
        self.alive = False
        if self.proc is not None:
            if self.proc.stderr is not None and not self.proc.stderr.closed:
                loop.remove_reader(self.proc.stderr.fileno())
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(self.proc.wait, STOP_TIMEOUT_S)
            if self.proc.stderr is not None:
                self.proc.stderr.close()  # idempotent
        if self.plan is not None:
            self.plan.remove_stage()


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
