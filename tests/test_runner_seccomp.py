import errno
import os
import socket

import pytest

from runner import seccomp as S

X = S.SYSCALLS["x86_64"]
ALLOW = S.SECCOMP_RET_ALLOW


def ev(prog, name_or_nr, *args, arch=S.AUDIT_ARCH_X86_64):
    nr = X[name_or_nr] if isinstance(name_or_nr, str) else name_or_nr
    return S.evaluate(prog, nr, args, arch)


@pytest.fixture(scope="module")
def job():
    return S.build("x86_64", job=True)


@pytest.fixture(scope="module")
def zyg():
    return S.build("x86_64", job=False)


@pytest.mark.parametrize(
    "name",
    [
        "ptrace",
        "kexec_load",
        "bpf",
        "perf_event_open",
        "keyctl",
        "add_key",
        "init_module",
        "process_vm_readv",
        "io_uring_setup",
        "userfaultfd",
        "pidfd_getfd",
    ],
)
def test_base_denials_in_both(job, zyg, name):
    for prog in (job, zyg):
        assert ev(prog, name) == S.SECCOMP_RET_ERRNO | errno.EPERM


@pytest.mark.parametrize(
    "name", ["mount", "umount2", "unshare", "setns", "pivot_root", "chroot", "open_tree", "fsopen"]
)
def test_job_only_denials(job, zyg, name):
    assert ev(job, name) == S.SECCOMP_RET_ERRNO | errno.EPERM
    assert ev(zyg, name) == ALLOW


def test_sockets_only_af_unix(job):
    assert ev(job, "socket", socket.AF_UNIX) == ALLOW
    assert ev(job, "socketpair", socket.AF_UNIX) == ALLOW
    for fam in (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK, socket.AF_PACKET):
        assert ev(job, "socket", fam) == S.SECCOMP_RET_ERRNO | errno.EAFNOSUPPORT
    # Only the low 32 bits of the domain count, as in the kernel.
    assert ev(job, "socket", (1 << 32) | socket.AF_INET) == S.SECCOMP_RET_ERRNO | errno.EAFNOSUPPORT


def test_clone_namespaces(job, zyg):
    fork_flags = 0x01200011  # CLONE_CHILD_SETTID|CLONE_CHILD_CLEARTID|SIGCHLD
    assert ev(job, "clone", fork_flags) == ALLOW
    for flag in (0x10000000, 0x20000000, 0x40000000, 0x00020000):
        assert ev(job, "clone", fork_flags | flag) == S.SECCOMP_RET_ERRNO | errno.EPERM
        assert ev(zyg, "clone", fork_flags | flag) == ALLOW
    assert ev(job, "clone3") == S.SECCOMP_RET_ERRNO | errno.ENOSYS


def test_tiocsti(job):
    assert ev(job, "ioctl", 0, S.TIOCSTI) == S.SECCOMP_RET_ERRNO | errno.EPERM
    assert ev(job, "ioctl", 0, 0x5401) == ALLOW  # TCGETS


def test_foreign_abi_killed(job):
    assert ev(job, 0, arch=0x40000003) == S.SECCOMP_RET_KILL_PROCESS  # i386
    assert ev(job, S.X32_SYSCALL_BIT | 1) == S.SECCOMP_RET_KILL_PROCESS
    assert ev(job, 0) == ALLOW  # read


def test_aarch64_table_builds():
    prog = S.build("aarch64", job=True)
    assert S.evaluate(prog, S.SYSCALLS["aarch64"]["ptrace"], (), S.AUDIT_ARCH_AARCH64) != ALLOW
    assert S.evaluate(prog, 63, (), S.AUDIT_ARCH_AARCH64) == ALLOW


def test_unknown_arch():
    from runner.errors import SandboxUnavailable

    with pytest.raises(SandboxUnavailable):
        S.build("sparc", job=True)


def test_bytes_layout(job):
    raw = S.to_bytes(job)
    assert len(raw) == 8 * len(job)


def test_assembler_range_check():
    a = S.Assembler()
    a.jeq(1, "far", 0)
    for _ in range(300):
        a.ret(0)
    a.label("far")
    a.ret(0)
    with pytest.raises(ValueError):
        a.assemble()


@pytest.mark.skipif(S.host_arch() != "x86_64", reason="kernel check written for x86_64")
def test_installed_filter_really_denies():
    """In a forked child: after install, ptrace and AF_INET fail, AF_UNIX works."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            S.install(S.job_filter())
            out = []
            try:
                socket.socket(socket.AF_INET)
                out.append("inet-ok")
            except OSError as e:
                out.append(f"inet-{e.errno}")
            _a, _b = socket.socketpair()
            out.append("unix-ok")
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            rc = libc.ptrace(16, os.getppid(), 0, 0)  # PTRACE_ATTACH
            out.append(f"ptrace-{rc}-{ctypes.get_errno()}")
            out.append(open("/proc/self/status").read().split("Seccomp:")[1].split()[0])
            os.write(w, " ".join(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 200).decode().split()
    os.waitpid(pid, 0)
    assert got == [f"inet-{errno.EAFNOSUPPORT}", "unix-ok", f"ptrace--1-{errno.EPERM}", "2"]
