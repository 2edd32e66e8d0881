"""Host uids of the jobs: one per slot's cgroup, so the kernel's per-user counters are per slot.

The kernel keeps some counters per user: signals queued (SigQ, ``RLIMIT_SIGPENDING``), pipe buffer pages
(``fs.pipe-user-pages-soft``), and more.  Jobs that share a uid share them: one job could read another's
count in ``/proc/self/status``, or fill a counter so that another's ``sigqueue``, ``timer_create`` or
pipe sizes fail, a channel between learners, and across runners too.  So each cgroup cell of the pool
gets a host uid (and gid) of its own, which its jobs run as; a cell is reused only once every process of
its last job is gone, and so is its uid.

The uids follow ``RUNNER_SANDBOX_UID`` (the zygote's): a runner claims the first block of ``count`` uids
after it of which no other runner on this host holds any.  A claim is an abstract Unix socket per uid,
bound under a name of that uid: the kernel releases it when the runner dies, however it dies.  Runners in
different network namespaces (two containers) cannot see each other's claims: give each its own
``RUNNER_SANDBOX_UID``, far enough apart for the blocks they claim.

Per-slot uids need the runner to be root (only root may map many host uids into the sandbox's user
namespace, see sandbox.py); otherwise every job runs as the runner's own uid, as the README says.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from .config import MAX_UID
from .errors import SandboxUnavailable

BLOCKS = 64  # blocks a runner tries, one after the other, past its RUNNER_SANDBOX_UID
CLAIM_PREFIX = "coursebot-runner-uid-"


@dataclass
class UidBlock:
    """``count`` host uids (and gids of the same numbers) from ``first``, ours while ``claims`` are open."""

    first: int
    count: int
    claims: list[socket.socket] = field(default_factory=list)

    def uid(self, index: int) -> int:
        """The host uid of cell ``index`` (0-based)."""
        if not 0 <= index < self.count:
            raise IndexError(f"cell {index} is not one of {self.count}")
        return self.first + index

    def release(self) -> None:
        for sock in self.claims:
            sock.close()
        self.claims.clear()


def claim(after: int, count: int, blocks: int = BLOCKS) -> UidBlock:
    """Claim the first free block of ``count`` uids after uid ``after``; SandboxUnavailable if none is free."""
    for b in range(blocks):
        first = after + 1 + b * count
        if first + count - 1 > MAX_UID:
            break
        block = UidBlock(first, count)
        try:
            for uid in range(first, first + count):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
                block.claims.append(sock)
                sock.bind(f"\0{CLAIM_PREFIX}{uid}")
        except OSError:  # one of them is held by another runner (EADDRINUSE): the next block
            block.release()
            continue
        return block
    raise SandboxUnavailable(
        f"no free block of {count} host uids for jobs after uid {after}: {blocks} other runners hold them; "
        "set RUNNER_SANDBOX_UID to another free range"
    )
