"""A pool of real runner hosts behind a real HAProxy, for tests and bench/runner_hosts.py.

Each host is a `python -m runner serve` process of its own.  Where this process may make network namespaces
(root, `ip`), each host lives in one, joined to this namespace by a veth pair: an address, a port space and a
network link of its own, which a test can cut.  Elsewhere, each host gets a loopback address of its own
(127.0.0.2, 127.0.0.3, ...).  A host listens for jobs over TCP (with the token), on a Unix socket (for the
test to ask that host alone what it did) and on its health port.  HAProxy runs the shipped configuration
(deploy/haproxy/runners.cfg) with its runner-host lines written for these hosts in the shipped lines' own form.
"""

from __future__ import annotations

import asyncio
import csv
import io
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.client import RunnerClient, RunnerConfig, UnixAddress, worker_env

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_CONFIG = ROOT / "deploy" / "haproxy" / "runners.cfg"
HOSTS_BEGIN = "# --- runner hosts:"
HOSTS_END = "# --- end of runner hosts ---"
TOKEN = "runner-pool-token-for-tests-0123456789"
STARTUP_S = 300.0
# The sandbox uids of runners in namespaces of their own: far above the blocks the runners of this machine claim
# from RUNNER_SANDBOX_UID's default (63333) up, and a block apart from each other.
NETNS_UIDS = 400_000
NETNS_UID_SPAN = 10_000  # a runner imports torch and proves its isolation; on a loaded 2-core host that is slow


def haproxy_binary() -> str | None:
    return shutil.which("haproxy") or ("/usr/sbin/haproxy" if os.access("/usr/sbin/haproxy", os.X_OK) else None)


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def server_line(name: str, host: str, port: int, slots: int, health_port: int) -> str:
    """One runner host's line, in the form of the shipped configuration's example lines."""
    return f"    server {name} {host}:{port} maxconn {slots} check port {health_port}"


def render_config(lines: list[str], shipped: Path = SHIPPED_CONFIG) -> str:
    """The shipped configuration with its runner-host lines replaced by ``lines``; nothing else changes."""
    text = shipped.read_text()
    begin = text.index(HOSTS_BEGIN)
    begin = text.index("\n", begin) + 1
    end = text.rindex("    " + HOSTS_END)
    return text[:begin] + "".join(line + "\n" for line in lines) + text[end:]


@dataclass
class Netns:
    """A network namespace joined to ours by a veth pair: ``inside`` is the host's address, ``outside`` ours."""

    name: str
    veth: str
    inside: str
    outside: str

    @classmethod
    def make(cls, index: int) -> Netns | None:
        """A new namespace (named for this process, so runs never collide), or None where none can be made."""
        tag = f"rp{os.getpid() % 10**6}"
        subnet = f"10.213.{os.getpid() % 250}"
        made = cls(f"{tag}n{index}", f"{tag}v{index}", f"{subnet}.{4 * index + 2}", f"{subnet}.{4 * index + 1}")
        if shutil.which("ip") is None or shutil.which("nsenter") is None or os.geteuid() != 0:
            return None
        steps = [
            ["ip", "netns", "add", made.name],
            ["ip", "link", "add", made.veth, "type", "veth", "peer", "name", "eth0", "netns", made.name],
            ["ip", "addr", "add", f"{made.outside}/30", "dev", made.veth],
            ["ip", "link", "set", made.veth, "up"],
            ["ip", "-n", made.name, "addr", "add", f"{made.inside}/30", "dev", "eth0"],
            ["ip", "-n", made.name, "link", "set", "eth0", "up"],
            ["ip", "-n", made.name, "link", "set", "lo", "up"],
        ]
        for step in steps:
            if subprocess.run(step, capture_output=True, timeout=30).returncode != 0:
                made.delete()
                return None
        return made

    def enter(self) -> list[str]:
        """The command prefix that runs a program in this namespace (its network only: the mounts stay ours)."""
        return ["nsenter", f"--net=/run/netns/{self.name}", "--"]

    def cut(self) -> None:
        """Take the link down: the host is still running, but nothing reaches it and nothing it sends arrives."""
        subprocess.run(["ip", "link", "set", self.veth, "down"], check=True, timeout=30)

    def mend(self) -> None:
        subprocess.run(["ip", "link", "set", self.veth, "up"], check=True, timeout=30)

    def delete(self) -> None:
        """Remove the namespace and its veth pair (deleting one end deletes both)."""
        subprocess.run(["ip", "link", "del", self.veth], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=30)


@dataclass
class RunnerHost:
    """One runner host: its addresses and its process (started, killed with SIGKILL, started again)."""

    name: str
    host: str
    slots: int
    folder: str
    netns: Netns | None = None
    # A runner in a namespace of its own cannot see the uids other runners claimed (their claims are abstract
    # sockets, which are per network namespace): it is given a block of its own (runner/README.md).
    sandbox_uid: int = RunnerConfig.sandbox_uid
    port: int = 0
    health_port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.netns is not None:  # a port space of its own
            self.port, self.health_port = self.port or 7000, self.health_port or 7001
        self.port = self.port or free_port(self.host)
        self.health_port = self.health_port or free_port(self.host)

    @property
    def socket(self) -> str:
        return os.path.join(self.folder, f"{self.name}.sock")

    @property
    def address(self) -> str:
        return f"tcp://{self.host}:{self.port}"

    def line(self) -> str:
        return server_line(self.name, self.host, self.port, self.slots, self.health_port)

    def start(self) -> None:
        """Start the runner and return once it said READY (RuntimeError with what it said otherwise)."""
        config = RunnerConfig(pool_size=self.slots, queue=8, sandbox_uid=self.sandbox_uid)
        env = {**worker_env(config), "RUNNER_TOKEN": TOKEN}
        argv = self.netns.enter() if self.netns is not None else []
        argv += [config.python, "-m", "runner", "serve", "--listen", self.address, "--socket", self.socket]
        argv += ["--health", f"tcp://{self.host}:{self.health_port}"]
        log = open(os.path.join(self.folder, f"{self.name}.log"), "ab")
        self.process = subprocess.Popen(
            argv, env=env, cwd="/", stdout=subprocess.PIPE, stderr=log, start_new_session=True
        )
        log.close()
        assert self.process.stdout is not None
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"runner {self.name} exited before READY: {self.log_tail()}")
            if line.startswith(b"READY"):
                return
            if line.startswith(b"ERROR"):
                raise RuntimeError(f"runner {self.name}: {line.decode().strip()}")
        raise RuntimeError(f"runner {self.name} not ready in {STARTUP_S:.0f} s")

    def kill(self) -> None:
        """SIGKILL the runner's whole process group (the sandbox goes with it: --die-with-parent)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()

    def log_tail(self) -> str:
        try:
            return Path(self.folder, f"{self.name}.log").read_text()[-2000:]
        except OSError:
            return ""

    async def info(self) -> dict[str, Any]:
        """What this host alone says about itself (its own Unix socket, not through HAProxy)."""
        client = RunnerClient(UnixAddress(self.socket))
        reply = await client.request({"op": "info"}, 10.0)
        assert isinstance(reply, dict)
        return reply

    async def jobs_done(self) -> int:
        return int((await self.info())["jobs_done"])

    async def running(self) -> int:
        return int((await self.info())["running"])


class Haproxy:
    """A real haproxy process running the shipped configuration for ``hosts``."""

    def __init__(self, folder: str, hosts: list[RunnerHost], bind_host: str = "127.0.0.1") -> None:
        binary = haproxy_binary()
        assert binary is not None
        self.binary = binary
        self.folder = folder
        os.makedirs(folder, exist_ok=True)
        self.stats_socket = os.path.join(folder, "haproxy.sock")
        self.port = free_port(bind_host)
        self.address = f"tcp://{bind_host}:{self.port}"
        self.config = os.path.join(folder, "runners.cfg")
        Path(self.config).write_text(render_config([h.line() for h in hosts]))
        self.env = {**os.environ, "RUNNERS_BIND": f"{bind_host}:{self.port}", "RUNNERS_STATS": self.stats_socket}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        check = subprocess.run(
            [self.binary, "-c", "-q", "-f", self.config], env=self.env, capture_output=True, timeout=30
        )
        assert check.returncode == 0, check.stderr.decode()
        log = open(os.path.join(self.folder, "haproxy.log"), "ab")
        self.process = subprocess.Popen([self.binary, "-db", "-f", self.config], env=self.env, stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + 30
        # Listeners are bound before the stats socket answers.  (Not probed by connecting: HAProxy would pass that
        # connection on to a runner, which would log it as one that closed before its hello.)
        while not self._answering():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"haproxy did not start: {Path(self.folder, 'haproxy.log').read_text()[-2000:]}")
            time.sleep(0.05)

    def _answering(self) -> bool:
        try:
            return "runners_in" in self.command("show stat")
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def command(self, line: str) -> str:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(self.stats_socket)
            s.sendall(line.encode() + b"\n")
            out = b""
            while chunk := s.recv(65536):
                out += chunk
        return out.decode()

    def rows(self) -> list[dict[str, str]]:
        """`show stat`, a row per proxy and server: status (UP, DOWN, ...), stot (connections), scur, qcur, qmax."""
        return list(csv.DictReader(io.StringIO(self.command("show stat").lstrip("# "))))

    def servers(self) -> dict[str, dict[str, str]]:
        """Each runner host's row."""
        rows = self.rows()
        return {r["svname"]: r for r in rows if r["pxname"] == "runners" and r["svname"] not in ("BACKEND", "FRONTEND")}

    def backend(self) -> dict[str, str]:
        """The runner pool's own row: its queue (qcur, qmax) is shared by all hosts."""
        return next(r for r in self.rows() if (r["pxname"], r["svname"]) == ("runners", "BACKEND"))

    def frontend(self) -> dict[str, str]:
        """The row of the address the bot connects to: every connection HAProxy accepted (stot)."""
        return next(r for r in self.rows() if (r["pxname"], r["svname"]) == ("runners_in", "FRONTEND"))

    def status(self, name: str) -> str:
        return self.servers()[name]["status"]

    async def wait_checked(self, name: str, within_s: float = 30.0) -> None:
        """Poll the stats until ``name``'s last health check passed (L7OK: the runner answered GET /healthz)."""
        for _ in range(int(within_s * 10)):
            if self.servers()[name]["check_status"] == "L7OK":
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"{name}'s health check: {self.servers()[name]['check_status']}")

    async def wait_status(self, name: str, want: str, within_s: float = 30.0) -> float:
        """Poll the stats until ``name`` is ``want`` (UP/DOWN); the seconds it took, or AssertionError."""
        started = time.monotonic()
        while True:
            status = self.status(name)
            if re.match(want, status):
                return time.monotonic() - started
            assert time.monotonic() - started < within_s, f"{name} is {status}, not {want}, after {within_s} s"
            await asyncio.sleep(0.1)


def make_hosts(count: int, slots: int, folder: str | None = None) -> tuple[str, list[RunnerHost]]:
    """``count`` hosts (not started), each with ``slots`` slots: in network namespaces of their own where they
    can be made, else on 127.0.0.2, 127.0.0.3, ...  ``remove_hosts`` removes what this made."""
    folder = folder or tempfile.mkdtemp(prefix="coursebot-runnerpool-")
    hosts = []
    for i in range(count):
        netns = Netns.make(i)
        if netns is None:
            hosts.append(RunnerHost(f"runner{i + 1}", f"127.0.0.{i + 2}", slots, folder))
        else:
            uid = NETNS_UIDS + i * NETNS_UID_SPAN
            hosts.append(RunnerHost(f"runner{i + 1}", netns.inside, slots, folder, netns=netns, sandbox_uid=uid))
    return folder, hosts


def remove_hosts(hosts: list[RunnerHost]) -> None:
    """Stop every host and remove its namespace."""
    for host in hosts:
        host.stop()
        if host.netns is not None:
            host.netns.delete()
