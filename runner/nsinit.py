"""The init of each job's pid namespace: a static program of a few instructions.

A pid namespace needs a pid 1, and the learner must not be it (pid 1 of a
namespace ignores its own namespace's signals and inherits orphans), so
each job gets an init that does nothing but exist.  It used to be a fork of
a small Python process, which cost ~2.5 ms of CPU per job (copying and
tearing down ~3,000 page-table entries, and copy-on-write faults from
running Python after the fork): a fifth of a trivial job's cost.  This one
costs ~0.1 ms: nsforge (zygote.py) starts it with posix_spawn(), i.e. vfork
+ exec, so no memory is copied, right after unshare(CLONE_NEWPID), which
makes it pid 1 of the new namespace.

What it does, in order: ignore SIGCHLD (so the kernel reaps the orphans it
inherits), close every descriptor, and wait for signals forever (it has no
handlers, so as a namespace init nothing inside the job can signal it; the
zygote SIGKILLs it when the job's process ends, which ends the namespace).
It holds no capabilities (execve drops them: nsforge clears its ambient
set first) and is not dumpable (its file is execute-only), so learner code
can neither ptrace it nor open its /proc files.

The machine code is listed per architecture with its assembly (checked
with ``llvm-mc -show-encoding``); ``elf()`` wraps it in a minimal ELF
executable: one header, one read+execute segment.
"""

from __future__ import annotations

import fcntl
import os
import struct

from . import seccomp

BASE = 0x400000  # load address of the one segment
EHDR_SIZE = 64  # Elf64_Ehdr
PHDR_SIZE = 56  # Elf64_Phdr
CODE = EHDR_SIZE + PHDR_SIZE  # file offset of the first instruction
SIGCHLD = 17
SIG_IGN = 1

# The kernel's struct sigaction for rt_sigaction(): handler, flags,
# restorer, mask (8 bytes each on both architectures).
IGNORE = struct.pack("<QQQQ", SIG_IGN, 0, 0, 0)


def _x86_64(act: int) -> bytes:
    """x86_64 code; ``act`` is the file offset of IGNORE."""
    lea_end = CODE + 17  # rip after the lea below
    return b"".join(
        [
            bytes.fromhex("b80d000000"),  # mov eax, 13        rt_sigaction
            bytes.fromhex("bf11000000"),  # mov edi, 17        SIGCHLD
            bytes.fromhex("488d35") + struct.pack("<i", act - lea_end),  # lea rsi, [rip + act]
            bytes.fromhex("31d2"),  # xor edx, edx       no old action
            bytes.fromhex("41ba08000000"),  # mov r10d, 8        sizeof(sigset_t)
            bytes.fromhex("0f05"),  # syscall
            bytes.fromhex("b8b4010000"),  # mov eax, 436       close_range
            bytes.fromhex("31ff"),  # xor edi, edi       from fd 0
            bytes.fromhex("beffffffff"),  # mov esi, -1        to the last
            bytes.fromhex("31d2"),  # xor edx, edx       flags
            bytes.fromhex("0f05"),  # syscall
            bytes.fromhex("b822000000"),  # loop: mov eax, 34  pause
            bytes.fromhex("0f05"),  # syscall
            bytes.fromhex("ebf7"),  # jmp loop
        ]
    )


def _aarch64(act: int) -> bytes:
    """aarch64 code (no pause(): ppoll with nothing to poll waits the same way)."""
    adr_at = CODE + 8
    off = act - adr_at
    adr_x1 = 0x10000000 | (off & 3) << 29 | (off >> 2 & 0x7FFFF) << 5 | 1
    words = [
        0xD28010C8,  # mov x8, #134      rt_sigaction
        0xD2800220,  # mov x0, #17       SIGCHLD
        adr_x1,  # adr x1, act
        0xD2800002,  # mov x2, #0        no old action
        0xD2800103,  # mov x3, #8        sizeof(sigset_t)
        0xD4000001,  # svc #0
        0xD2803688,  # mov x8, #436      close_range
        0xD2800000,  # mov x0, #0        from fd 0
        0x12800001,  # mov w1, #-1       to the last
        0xD2800002,  # mov x2, #0        flags
        0xD4000001,  # svc #0
        0xD2800928,  # loop: mov x8, #73 ppoll(NULL, 0, NULL, NULL, 0)
        0xD2800000,  # mov x0, #0
        0xD2800001,  # mov x1, #0
        0xD2800002,  # mov x2, #0
        0xD2800003,  # mov x3, #0
        0xD2800004,  # mov x4, #0
        0xD4000001,  # svc #0
        0x17FFFFF9,  # b loop            (7 instructions back)
    ]
    return struct.pack(f"<{len(words)}I", *words)


PROGRAMS = {"x86_64": (62, _x86_64), "aarch64": (183, _aarch64)}  # e_machine, code


def elf(arch: str | None = None) -> bytes:
    """The init program as a static ELF executable for ``arch`` (default: this host's)."""
    arch = arch or seccomp.host_arch()
    machine, code = PROGRAMS[arch]
    size = len(code(0))  # the length does not depend on where IGNORE is
    act = (CODE + size + 7) & ~7  # IGNORE right after the code, 8-aligned
    body = code(act) + b"\0" * (act - CODE - size) + IGNORE
    total = CODE + len(body)
    ehdr = struct.pack(
        "<4sBBBBB7xHHIQQQIHHHHHH",
        b"\x7fELF",
        2,
        1,
        1,
        0,
        0,  # 64-bit, LE, v1, SysV
        2,
        machine,
        1,
        BASE + CODE,
        EHDR_SIZE,
        0,  # ET_EXEC, entry, phoff
        0,
        EHDR_SIZE,
        PHDR_SIZE,
        1,
        0,
        0,
        0,
    )  # one program header
    phdr = struct.pack("<IIQQQQQQ", 1, 5, 0, BASE, BASE, total, total, 0x1000)  # PT_LOAD, R+X
    return ehdr + phdr + body


MFD_CLOEXEC = 0x1
MFD_ALLOW_SEALING = 0x2
MFD_EXEC = 0x10  # Linux 6.3+: say so explicitly (vm.memfd_noexec)
F_ADD_SEALS = 1033
SEALS = 0x1 | 0x2 | 0x4 | 0x8  # F_SEAL_SEAL | SHRINK | GROW | WRITE


def executable() -> int:
    """An O_PATH descriptor of the sealed, execute-only init program.

    Exec it as ``/proc/self/fd/N``.  O_PATH, because a descriptor open for
    writing would make execve() fail with ETXTBSY.
    """
    try:
        fd = os.memfd_create("coursebot-init", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC)
    except OSError:  # older kernels do not know MFD_EXEC (and need not be told)
        fd = os.memfd_create("coursebot-init", MFD_CLOEXEC | MFD_ALLOW_SEALING)
    try:
        os.write(fd, elf())
        fcntl.fcntl(fd, F_ADD_SEALS, SEALS)
        os.fchmod(fd, 0o111)  # unreadable: the running init is not dumpable
        return os.open(f"/proc/self/fd/{fd}", os.O_PATH | os.O_CLOEXEC)
    finally:
        os.close(fd)
