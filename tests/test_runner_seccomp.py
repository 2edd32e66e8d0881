import errno
import json
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
    "name", ["mount", "umount2", "unshare", "setns", "pivot_root", "chroot", "open_tree", "fsopen", "capset"]
)
def test_job_only_denials(job, zyg, name):
    assert ev(job, name) == S.SECCOMP_RET_ERRNO | errno.EPERM
    # The zygote's side needs a few of these to build each job's sandbox, and nothing more.
    assert ev(zyg, name) == (ALLOW if name in S.ZYGOTE_ALLOW else S.SECCOMP_RET_ERRNO | errno.ENOSYS)


ENOSYS = S.SECCOMP_RET_ERRNO | errno.ENOSYS
EPERM = S.SECCOMP_RET_ERRNO | errno.EPERM


@pytest.mark.parametrize("arch", sorted(S.SYSCALLS))
@pytest.mark.parametrize("is_job", [True, False], ids=["job", "zygote"])
def test_every_syscall_number_gets_what_the_policy_says(arch, is_job):
    """Allowed: ALLOW; refused on purpose: EPERM; anything else, newer calls included: ENOSYS."""
    table, token = S.SYSCALLS[arch], S.ARCH_TOKENS[arch]
    prog = S.build(arch, job=is_job)
    allowed = {table[n] for n in S.allowed_names(job=is_job) if n in table} - {table[n] for n in S.CHECKED}
    denied = {table[n] for n in S.BASE_DENY + (S.JOB_DENY if is_job else ()) if n in table}
    checked = {table[n] for n in S.CHECKED + (S.JOB_CHECKED if is_job else ())}
    for nr in range(0, 1024):
        if nr in checked:
            continue
        want = ALLOW if nr in allowed else EPERM if nr in denied else ENOSYS
        assert S.evaluate(prog, nr, (), token) == want, (arch, nr)


# Real calls no lesson needs, absent from the tables (arch/x86/entry/syscalls/syscall_64.tbl).
OTHER_X86_64 = {"personality": 135, "mbind": 237, "set_mempolicy": 238, "io_setup": 206, "mq_open": 240, "msgget": 68,
                "seccomp": 317}  # fmt: skip


def test_newer_and_unknown_syscalls_never_reach_the_kernel(job, zyg):
    for nr in (451, 452, 460, 500, 1000, 0xFFFF):  # cachestat, fchmodat2, ...: later than the table
        assert ev(job, nr) == ENOSYS and ev(zyg, nr) == ENOSYS
    for name in ("personality", "mbind", "set_mempolicy", "io_setup", "mq_open", "msgget", "seccomp"):
        assert ev(job, OTHER_X86_64[name]) == ENOSYS


@pytest.mark.parametrize(
    "name", ["sync", "syncfs", "flock", "inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_init"]
)
def test_writeback_and_covert_channels_are_refused_everywhere(job, zyg, name):
    assert ev(job, name) == EPERM and ev(zyg, name) == EPERM


def test_sysinfo_is_the_zygotes_alone(job, zyg):
    assert ev(job, "sysinfo") == EPERM and ev(zyg, "sysinfo") == ALLOW


def test_fcntl_allows_descriptor_work_but_no_locks_leases_or_notifications(job, zyg):
    for prog in (job, zyg):
        for cmd in S.FCNTL_ALLOW:
            assert ev(prog, "fcntl", 3, cmd) == ALLOW, cmd
        for cmd in (5, 6, 7, 36, 37, 38, 1024, 1025, 1026, 99):  # locks, OFD locks, leases, F_NOTIFY, unknown
            assert ev(prog, "fcntl", 3, cmd) == EPERM, cmd
        assert ev(prog, "fcntl", 3, (1 << 32) | 6) == EPERM  # the kernel reads cmd as 32 bits


def test_everything_the_zygote_side_was_traced_calling_is_allowed(zyg, job):
    """bench/seccomp_trace.py's findings on this project's lessons and everyday Python (torch 2.13, CPython 3.11)."""
    for name in TRACED_ZYGOTE:
        assert ev(zyg, name, 1) == ALLOW, name
    for name in TRACED_JOB:
        assert ev(job, name, 1) == ALLOW, name


TRACED_ZYGOTE = (
    "access arch_prctl brk capset chdir clock_nanosleep clone close close_range epoll_create1 execve fchmod "
    "futex getcwd getdents64 getgid getpid getrandom getsockname getsockopt gettid getuid lseek madvise "
    "memfd_create mmap mount mprotect munmap newfstatat open openat pause pidfd_open pidfd_send_signal pipe2 prctl "
    "pread64 prlimit64 pselect6 read readlink recvfrom recvmsg rseq rt_sigaction rt_sigprocmask rt_sigreturn "
    "sched_getaffinity sched_setaffinity sendmsg sendto set_robust_list set_tid_address setns setsid sysinfo uname "
    "unshare wait4 write"
).split()
TRACED_JOB = (
    "access arch_prctl brk chmod clock_nanosleep clone close close_range connect dup2 dup3 epoll_create1 epoll_ctl "
    "epoll_wait execve exit exit_group futex getcwd getdents64 getpeername getpid getppid getrandom getrusage "
    "getsockname gettid getuid kill link lseek madvise mkdir mmap mprotect mremap munmap newfstatat openat pipe2 "
    "poll prctl pread64 prlimit64 pselect6 read readlink recvfrom recvmsg rename rmdir rseq rt_sigaction "
    "rt_sigprocmask rt_sigreturn sched_getaffinity sendfile sendto set_robust_list set_tid_address setitimer "
    "unlink unlinkat uname vfork wait4 write writev"
).split()


HEADERS = {
    "x86_64": "/usr/include/x86_64-linux-gnu/asm/unistd_64.h",
    "aarch64": "/usr/include/asm-generic/unistd.h",
}
GENERIC_64 = {  # asm-generic's __NR3264_* numbers under their 64-bit names
    "fcntl": "fcntl", "statfs": "statfs", "fstatfs": "fstatfs", "truncate": "truncate", "ftruncate": "ftruncate",
    "lseek": "lseek", "sendfile": "sendfile", "newfstatat": "fstatat", "fstat": "fstat", "mmap": "mmap",
    "fadvise64": "fadvise64",
}  # fmt: skip


@pytest.mark.parametrize("arch", sorted(HEADERS))
def test_the_syscall_numbers_match_the_kernel_headers(arch):
    import re

    path = HEADERS[arch]
    if not os.path.exists(path):
        pytest.skip(f"no kernel headers at {path} (apt-get install -y linux-libc-dev)")
    text = open(path).read()
    numbers = {m.group(1): int(m.group(2)) for m in re.finditer(r"#define __NR_(\w+)\s+(\d+)", text)}
    if arch == "aarch64":
        n3264 = {m.group(1): int(m.group(2)) for m in re.finditer(r"#define __NR3264_(\w+)\s+(\d+)", text)}
        numbers.update({name: n3264[generic] for name, generic in GENERIC_64.items()})
    for name, nr in S.SYSCALLS[arch].items():
        if name in numbers:  # headers older than a call leave it out
            assert numbers[name] == nr, (arch, name)


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


def test_terminal_injection_and_line_disciplines_are_refused(job):
    for request in (S.TIOCSTI, S.TIOCLINUX, S.TIOCSETD):
        assert ev(job, "ioctl", 0, request) == S.SECCOMP_RET_ERRNO | errno.EPERM
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
def test_the_kernel_refuses_sync_locks_watches_and_unknown_calls_under_the_job_filter(tmp_path):
    """In a forked child under the real kernel: each refusal with its errno, everyday calls still work."""
    path = tmp_path / "f"
    path.write_text("x")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            import ctypes
            import fcntl

            os.close(r)
            S.install(S.job_filter())
            libc = ctypes.CDLL(None, use_errno=True)
            out = {}
            for name, call in (
                ("sync", lambda: libc.syscall(X["sync"])),
                ("syncfs", lambda: libc.syscall(X["syncfs"], 0)),
                ("inotify_init1", lambda: libc.inotify_init1(0)),
                ("sysinfo", lambda: libc.syscall(X["sysinfo"], ctypes.create_string_buffer(256))),
                ("cachestat", lambda: libc.syscall(451, 0, 0, 0, 0)),
                ("personality", lambda: libc.syscall(135, 0xFFFFFFFF)),
            ):
                out[name] = (call(), ctypes.get_errno())
            fd = os.open(path, os.O_RDONLY)
            for name, lock in (
                ("flock", lambda: fcntl.flock(fd, fcntl.LOCK_SH)),
                ("setlk", lambda: fcntl.lockf(fd, fcntl.LOCK_SH)),
            ):
                try:
                    lock()
                    out[name] = "locked"
                except OSError as e:
                    out[name] = e.errno
            out["read"] = os.read(fd, 1).decode()
            os.write(w, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    got = json.loads(os.read(r, 2000))
    os.waitpid(pid, 0)
    assert got == {
        "sync": [-1, errno.EPERM],
        "syncfs": [-1, errno.EPERM],
        "inotify_init1": [-1, errno.EPERM],
        "sysinfo": [-1, errno.EPERM],
        "cachestat": [-1, errno.ENOSYS],
        "personality": [-1, errno.ENOSYS],
        "flock": errno.EPERM,
        "setlk": errno.EPERM,
        "read": "x",
    }


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


def test_page_cache_probes_and_evictions_are_refused_to_jobs(job, zyg):
    # Which pages of a shared file are cached tells what other jobs or the host read; evicting them costs everyone.
    for name in ("fadvise64", "readahead"):
        assert ev(job, name, 3, 0, 0, 4) == EPERM
    for name in ("preadv2", "pwritev2"):
        for prog in (job, zyg):
            assert ev(prog, name, 3, 0, 1, 0, 0, S.RWF_NOWAIT) == EPERM
            assert ev(prog, name, 3, 0, 1, 0, 0, S.RWF_NOWAIT | 1) == EPERM  # with RWF_HIPRI besides
            assert ev(prog, name, 3, 0, 1, 0, 0, 0) == ALLOW
            assert ev(prog, name, 3, 0, 1, 0, 0, 0x10) == ALLOW  # RWF_APPEND
    for advice in S.MADVISE_DENY:
        assert ev(job, "madvise", 0, 4096, advice) == EPERM
    for advice in (0, 4, 8, 10, 11, 14, 15):  # normal, dontneed, free, dontfork, dofork, (no)hugepage
        assert ev(job, "madvise", 0, 4096, advice) == ALLOW
    assert ev(zyg, "madvise", 0, 4096, 25) == ALLOW  # MADV_COLLAPSE: the zygote's huge pages
