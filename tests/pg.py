"""A throwaway PostgreSQL 15 cluster for the tests: initdb into a temporary folder, on a loopback port, dropped at the
end of the session. Each test gets an empty database of its own.

PostgreSQL refuses to run as root, so under root the cluster runs as the ``postgres`` user Debian's package creates.
Without the binaries (Debian's ``postgresql``, which .ci/run installs) the tests that need it skip, saying so.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

VERSION = "15"
BIN_DIRS = (Path(f"/usr/lib/postgresql/{VERSION}/bin"),)


def binaries() -> Path | None:
    """Return the folder holding initdb and pg_ctl, or None when PostgreSQL is not installed."""
    for folder in BIN_DIRS:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    found = shutil.which("pg_ctl")
    return Path(found).resolve().parent if found and shutil.which("initdb") else None


SKIP_REASON = f"PostgreSQL {VERSION} is not installed (apt-get install postgresql; .ci/run does)"


def free_port() -> int:
    with closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Cluster:
    """A running PostgreSQL server on 127.0.0.1:port, trusting loopback connections."""

    folder: Path
    port: int
    bin: Path
    user: str | None  # the OS user it runs as when we are root
    _names: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run ``sql`` through psql; return its unaligned output."""
        result = subprocess.run(
            [str(self.bin / "psql"), "-XqAt", "-v", "ON_ERROR_STOP=1", "-d", self.url(database), "-c", sql],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        return result.stdout.strip()

    def new_database(self) -> str:
        """Create an empty database; return its URL."""
        name = f"test_{os.getpid()}_{next(self._names)}"
        self.psql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def pg_ctl(self, *args: str) -> None:
        _run_as(self.user, [str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), *args])

    def start(self) -> None:
        """Start the server (again, after a stop) on its port, logging to ``folder/log``; return once it is up."""
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.folder} -c fsync=off"
            " -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self.pg_ctl("-o", options, "-l", str(self.folder / "log"), "-w", "-t", "60", "start")


def _run_as(user: str | None, argv: list[str]) -> None:
    if user is None:
        subprocess.run(argv, check=True, capture_output=True, timeout=120)
        return
    entry = pwd.getpwnam(user)
    subprocess.run(
        argv,
        check=True,
        capture_output=True,
        timeout=120,
        user=entry.pw_uid,
        group=entry.pw_gid,
        extra_groups=[],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(entry.pw_dir), "LC_ALL": "C.UTF-8"},
        cwd="/",
    )


@contextmanager
def cluster() -> Iterator[Cluster]:
    """Start a cluster in a fresh temporary folder; stop it and remove the folder at the end."""
    folder_bin = binaries()
    if folder_bin is None:
        pytest.skip(SKIP_REASON)
    user = "postgres" if os.geteuid() == 0 else None
    if user is not None:
        try:
            pwd.getpwnam(user)
        except KeyError:
            pytest.skip("running as root and there is no postgres user to run PostgreSQL as (it refuses root)")
    folder = Path(tempfile.mkdtemp(prefix="coursebot-pg-"))
    data = folder / "data"
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    port = free_port()
    running = Cluster(folder, port, folder_bin, user)
    try:
        _run_as(
            user,
            [
                str(folder_bin / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--locale=C.UTF-8",
            ],
        )
        running.start()
        yield running
    finally:
        try:
            if (data / "postmaster.pid").exists():
                running.pg_ctl("-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
