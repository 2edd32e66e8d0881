"""A seccomp-BPF filter, assembled in pure Python (no libseccomp needed).

Two filters are built from one rule table:

* ``zygote_filter()`` — loaded by bwrap (``--seccomp FD``) for the warm
  process: it denies what nothing in the sandbox ever needs (ptrace,
  kexec, bpf, perf_event_open, keyrings, modules, io_uring, sockets other
  than AF_UNIX, terminal injection, ...).
* ``job_filter()`` — stacked on top by each job just before learner code
  runs.  It also denies what the job's own setup needed and learner code must
  not (mount, unshare, setns, pivot_root, chroot, the new mount API, and
  namespace flags on clone).

Filters stack: the most restrictive verdict wins, so learner code lives under
both.  The policy is a deny list with errno returns (learner code sees a
clean ``PermissionError``) plus an architecture check that kills the process
for foreign ABIs (i386 via int 0x80, x32), which would otherwise bypass the
syscall numbers below.

Layout (include/uapi/linux/seccomp.h): ``struct seccomp_data { int nr;
__u32 arch; __u64 instruction_pointer; __u64 args[6]; }`` and a filter is an
array of ``struct sock_filter { __u16 code; __u8 jt; __u8 jf; __u32 k; }``.
"""

from __future__ import annotations

import ctypes
import errno as E
import platform
import struct
from dataclasses import dataclass

# --- classic BPF opcodes (include/uapi/linux/filter.h) ---------------------
BPF_LD_W_ABS = 0x20  # A <- u32 at seccomp_data[k]
BPF_JEQ_K = 0x15  # pc += (A == k) ? jt : jf
BPF_JGE_K = 0x35  # pc += (A >= k) ? jt : jf
BPF_JSET_K = 0x45  # pc += (A & k) ? jt : jf
BPF_RET_K = 0x06  # return k

SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000

OFF_NR = 0
OFF_ARCH = 4


def off_arg_lo(i: int) -> int:
    # args[i] low 32 bits (little-endian hosts: both supported arches are LE)
    return 16 + 8 * i


AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7
X32_SYSCALL_BIT = 0x40000000

AF_UNIX = 1
TIOCSTI = 0x5412  # inject bytes into a terminal's input
TIOCLINUX = 0x541C
CLONE_NS_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080

# Syscall numbers (arch/x86/entry/syscalls/syscall_64.tbl and the generic
# table include/uapi/asm-generic/unistd.h used by arm64).
SYSCALLS = {
    "x86_64": {
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "kexec_load": 246,
        "kexec_file_load": 320,
        "bpf": 321,
        "perf_event_open": 298,
        "keyctl": 250,
        "add_key": 248,
        "request_key": 249,
        "init_module": 175,
        "finit_module": 313,
        "delete_module": 176,
        "reboot": 169,
        "swapon": 167,
        "swapoff": 168,
        "acct": 163,
        "settimeofday": 164,
        "clock_settime": 227,
        "clock_adjtime": 305,
        "adjtimex": 159,
        "iopl": 172,
        "ioperm": 173,
        "userfaultfd": 323,
        "open_by_handle_at": 304,
        "name_to_handle_at": 303,
        "lookup_dcookie": 212,
        "quotactl": 179,
        "quotactl_fd": 443,
        "syslog": 103,
        "vhangup": 153,
        "uselib": 134,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "pidfd_getfd": 438,
        "fanotify_init": 300,
        "kcmp": 312,
        "modify_ldt": 154,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "chroot": 161,
        "unshare": 272,
        "setns": 308,
        "mount_setattr": 442,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "move_mount": 429,
        "open_tree": 428,
        "socket": 41,
        "socketpair": 53,
        "clone": 56,
        "clone3": 435,
        "ioctl": 16,
    },
    "aarch64": {
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "kexec_load": 104,
        "kexec_file_load": 294,
        "bpf": 280,
        "perf_event_open": 241,
        "keyctl": 219,
        "add_key": 217,
        "request_key": 218,
        "init_module": 105,
        "finit_module": 273,
        "delete_module": 106,
        "reboot": 142,
        "swapon": 224,
        "swapoff": 225,
        "acct": 89,
        "settimeofday": 170,
        "clock_settime": 112,
        "clock_adjtime": 266,
        "adjtimex": 171,
        "userfaultfd": 282,
        "open_by_handle_at": 265,
        "name_to_handle_at": 264,
        "lookup_dcookie": 18,
        "quotactl": 60,
        "quotactl_fd": 443,
        "syslog": 116,
        "vhangup": 58,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "pidfd_getfd": 438,
        "fanotify_init": 262,
        "kcmp": 272,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "chroot": 51,
        "unshare": 97,
        "setns": 268,
        "mount_setattr": 442,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "move_mount": 429,
        "open_tree": 428,
        "socket": 198,
        "socketpair": 199,
        "clone": 220,
        "clone3": 435,
        "ioctl": 29,
    },
}
ARCH_TOKENS = {"x86_64": AUDIT_ARCH_X86_64, "aarch64": AUDIT_ARCH_AARCH64}

# Denied everywhere in the sandbox: debugging other processes, kernel
# attack surface no lesson needs, and anything touching host-global state.
BASE_DENY = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    "kexec_load",
    "kexec_file_load",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "iopl",
    "ioperm",
    "modify_ldt",
    "open_by_handle_at",
    "name_to_handle_at",
    "lookup_dcookie",
    "quotactl",
    "quotactl_fd",
    "syslog",
    "vhangup",
    "uselib",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "fanotify_init",
)
# Denied to learner code on top: the job's setup used these to build its
# sandbox; afterwards nobody may rearrange mounts or namespaces.
JOB_DENY = (
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "mount_setattr",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
)


def host_arch() -> str:
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


@dataclass(frozen=True)
class Insn:
    code: int
    k: int = 0
    jt: int | str = 0  # a relative offset or a label name
    jf: int | str = 0


class Assembler:
    """A tiny two-pass assembler: jumps name labels, resolved to offsets."""

    def __init__(self) -> None:
        self.items: list[Insn | str] = []

    def label(self, name: str) -> None:
        self.items.append(name)

    def ld(self, off: int) -> None:
        self.items.append(Insn(BPF_LD_W_ABS, off))

    def jeq(self, k: int, jt: int | str = 0, jf: int | str = 0) -> None:
        self.items.append(Insn(BPF_JEQ_K, k, jt, jf))

    def jge(self, k: int, jt: int | str = 0, jf: int | str = 0) -> None:
        self.items.append(Insn(BPF_JGE_K, k, jt, jf))

    def jset(self, k: int, jt: int | str = 0, jf: int | str = 0) -> None:
        self.items.append(Insn(BPF_JSET_K, k, jt, jf))

    def ret(self, k: int) -> None:
        self.items.append(Insn(BPF_RET_K, k))

    def assemble(self) -> list[tuple[int, int, int, int]]:
        labels: dict[str, int] = {}
        insns: list[Insn] = []
        for it in self.items:
            if isinstance(it, str):
                if it in labels:
                    raise ValueError(f"duplicate label {it}")
                labels[it] = len(insns)
            else:
                insns.append(it)
        out = []

        def rel(target: int | str, pc: int) -> int:
            if isinstance(target, int):
                return target
            off = labels[target] - pc - 1
            if not 0 <= off <= 255:
                raise ValueError(f"jump to {target} out of range ({off})")
            return off

        for pc, ins in enumerate(insns):
            out.append((ins.code, rel(ins.jt, pc), rel(ins.jf, pc), ins.k & 0xFFFFFFFF))
        return out


def build(arch: str | None = None, *, job: bool) -> list[tuple[int, int, int, int]]:
    arch = arch or host_arch()
    if arch not in SYSCALLS:
        from .errors import SandboxUnavailable

        raise SandboxUnavailable(
            f"no seccomp syscall table for architecture {arch!r} (supported: {', '.join(SYSCALLS)})"
        )
    nr = SYSCALLS[arch]
    deny = sorted({nr[n] for n in BASE_DENY + (JOB_DENY if job else ()) if n in nr})
    a = Assembler()
    a.ld(OFF_ARCH)
    a.jeq(ARCH_TOKENS[arch], 0, "kill")
    a.ld(OFF_NR)
    if arch == "x86_64":
        a.jge(X32_SYSCALL_BIT, "kill", 0)
    for n in deny:
        a.jeq(n, "eperm", 0)
    a.jeq(nr["clone3"], "enosys", 0)  # flags live in a struct: make glibc fall back to clone
    if job:
        # The zygote's side (nsforge) clones new pid namespaces; jobs may not.
        a.jeq(nr["clone"], "clone", 0)
    a.jeq(nr["socket"], "socket", 0)
    a.jeq(nr["socketpair"], "socket", 0)
    a.jeq(nr["ioctl"], "ioctl", 0)
    a.ret(SECCOMP_RET_ALLOW)

    if job:
        a.label("clone")
        a.ld(off_arg_lo(0))  # clone(flags, ...) on both arches
        a.jset(CLONE_NS_FLAGS, "eperm", "allow")
    a.label("socket")
    a.ld(off_arg_lo(0))  # domain
    a.jeq(AF_UNIX, "allow", "eafnosupport")
    a.label("ioctl")
    a.ld(off_arg_lo(1))  # request: the kernel only looks at 32 bits
    a.jeq(TIOCSTI, "eperm", 0)
    a.jeq(TIOCLINUX, "eperm", "allow")

    a.label("allow")
    a.ret(SECCOMP_RET_ALLOW)
    a.label("eperm")
    a.ret(SECCOMP_RET_ERRNO | E.EPERM)
    a.label("enosys")
    a.ret(SECCOMP_RET_ERRNO | E.ENOSYS)
    a.label("eafnosupport")
    a.ret(SECCOMP_RET_ERRNO | E.EAFNOSUPPORT)
    a.label("kill")
    a.ret(SECCOMP_RET_KILL_PROCESS)
    return a.assemble()


def to_bytes(prog: list[tuple[int, int, int, int]]) -> bytes:
    """The raw ``struct sock_filter[]`` that bwrap's --seccomp FD expects."""
    return b"".join(struct.pack("=HBBI", *ins) for ins in prog)


def zygote_filter(arch: str | None = None) -> bytes:
    return to_bytes(build(arch, job=False))


def job_filter(arch: str | None = None) -> bytes:
    return to_bytes(build(arch, job=True))


def evaluate(
    prog: list[tuple[int, int, int, int]], nr: int, args: tuple[int, ...] = (), arch_token: int = AUDIT_ARCH_X86_64
) -> int:
    """Run a filter on one syscall in Python — how the tests check the policy."""
    args = tuple(args) + (0,) * (6 - len(args))
    data = struct.pack("=iIQ6Q", nr, arch_token, 0, *[a & 0xFFFFFFFFFFFFFFFF for a in args])
    acc = 0
    pc = 0
    while True:
        code, jt, jf, k = prog[pc]
        if code == BPF_LD_W_ABS:
            (acc,) = struct.unpack_from("=I", data, k)
            pc += 1
        elif code == BPF_RET_K:
            return k
        else:
            if code == BPF_JEQ_K:
                cond = acc == k
            elif code == BPF_JGE_K:
                cond = acc >= k
            elif code == BPF_JSET_K:
                cond = bool(acc & k)
            else:
                raise ValueError(f"unknown opcode {code:#x}")
            pc += 1 + (jt if cond else jf)


# --- installing a filter in the current process ----------------------------
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class Prepared:
    """A filter ready for prctl(): built once in the zygote, installed per job."""

    def __init__(self, filter_bytes: bytes) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.buf = ctypes.create_string_buffer(filter_bytes, len(filter_bytes))
        self.prog = _SockFprog(len(filter_bytes) // 8, ctypes.cast(self.buf, ctypes.c_void_p))


def install(filt: bytes | Prepared) -> None:
    """no_new_privs, then the filter; raises OSError if the kernel refuses."""
    p = filt if isinstance(filt, Prepared) else Prepared(filt)
    libc, prog = p.libc, p.prog
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "prctl(PR_SET_SECCOMP)")
