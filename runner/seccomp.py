"""The seccomp-BPF filters of the sandbox, assembled in pure Python (no libseccomp needed).

Two filters are built from one policy:

* ``zygote_filter()`` — loaded by bwrap (``--seccomp FD``) for the warm process, nsforge, the pid
  namespaces' inits and each job's own setup.
* ``job_filter()`` — stacked on top by each job just before learner code runs.

Both are ALLOW LISTS: a system call runs only if ``ALLOW`` names it (plus ``ZYGOTE_ALLOW`` for the
zygote's side: mounts, namespaces, capabilities); everything else, including every system call newer
than this table, fails with ENOSYS before it reaches the kernel (glibc then falls back, as it does on
an older kernel).  The lists are what CPython and torch on the CPU really call, traced from the lessons'
code and everyday Python (``bench/seccomp_trace.py`` shows the evidence; rerun it after a torch or
Python upgrade).  Filters stack and the most restrictive verdict wins, so learner code lives under both.

Some calls that exist but are refused on purpose get EPERM (a clear ``PermissionError``) rather than
ENOSYS: ``BASE_DENY`` everywhere (debugging other processes, kernel attack surface, host-wide writeback
with ``sync``, the covert channels of inotify, fanotify and file locks on shared read-only files) and
``JOB_DENY`` for learner code (what a job's setup needed: mounts, namespaces; and ``sysinfo``, which
tells the host's load and memory).  A few are decided by their arguments:

* ``socket``/``socketpair``: AF_UNIX only (EAFNOSUPPORT otherwise; the job has no network anyway);
* ``ioctl``: never TIOCSTI or TIOCLINUX (terminal injection) nor TIOCSETD (line disciplines);
* ``fcntl``: only the commands in ``FCNTL_ALLOW`` (no record locks, leases or directory notifications);
* ``clone``: no namespace flags in jobs; ``clone3`` is ENOSYS (its flags live in memory a filter cannot
  read), which makes glibc use ``clone``;
* ``preadv2``/``pwritev2``: never with ``RWF_NOWAIT``, which tells whether a file's pages are in the page
  cache (what other jobs or the host read lately);
* ``madvise`` in jobs: never ``MADV_WILLNEED``, ``MADV_COLD`` or ``MADV_PAGEOUT`` (reading ahead, and
  evicting shared files' pages from the page cache: a probe, and a cost to everyone).  ``fadvise64`` and
  ``readahead`` are refused to jobs outright (``JOB_DENY``), for the same reasons.

An architecture check kills the process for foreign ABIs (i386 via int 0x80, x32), which would
otherwise bypass the syscall numbers below.

The allowed numbers are matched with a binary search over ranges (a few comparisons per call, and a
cheap per-job install, for the kernel precomputes its cache of always-allowed calls from the filter).

Layout (include/uapi/linux/seccomp.h): ``struct seccomp_data { int nr; __u32 arch; __u64
instruction_pointer; __u64 args[6]; }`` and a filter is an array of ``struct sock_filter { __u16 code;
__u8 jt; __u8 jf; __u32 k; }``.
"""

from __future__ import annotations

import ctypes
import errno as E
import platform
import struct
from collections.abc import Sequence
from dataclasses import dataclass

# --- classic BPF opcodes (include/uapi/linux/filter.h) ---------------------
BPF_LD_W_ABS = 0x20  # A <- u32 at seccomp_data[k]
BPF_JA = 0x05  # pc += k
BPF_JEQ_K = 0x15  # pc += (A == k) ? jt : jf
BPF_JGT_K = 0x25  # pc += (A > k) ? jt : jf
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
TIOCSETD = 0x5423  # attach a line discipline to a terminal: old kernel attack surface, nothing a lesson needs
IOCTL_DENY = (TIOCSTI, TIOCLINUX, TIOCSETD)
RWF_NOWAIT = 0x00000008  # preadv2/pwritev2 flag (include/uapi/linux/fs.h)
MADV_WILLNEED, MADV_COLD, MADV_PAGEOUT = 3, 20, 21
MADVISE_DENY = (MADV_WILLNEED, MADV_COLD, MADV_PAGEOUT)
CLONE_NS_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080

# fcntl commands anyone may use (include/uapi/asm-generic/fcntl.h, linux/fcntl.h): descriptor flags,
# status flags, signal-driven I/O owners, pipe sizes and memfd seals.  Not F_GETLK/F_SETLK/F_SETLKW
# (5-7) nor their OFD forms (36-38): a lock on a shared read-only file is a channel between jobs and a
# window on the host's activity; nor leases (1024, 1025) and F_NOTIFY (1026), a directory watch.
FCNTL_ALLOW = (0, 1, 2, 3, 4, 8, 9, 10, 11, 15, 16, 17, 1030, 1031, 1032, 1033, 1034)

# Everyday system calls of CPython and torch on the CPU, for the zygote's side and for jobs alike.
ALLOW = (
    # memory
    "brk", "mmap", "munmap", "mprotect", "mremap", "madvise", "msync", "mincore", "memfd_create",
    # descriptors, files and directories (the job's own tmpfs; everything else is read-only)
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
    "open", "openat", "openat2", "creat", "close", "close_range", "lseek", "dup", "dup2", "dup3", "pipe", "pipe2",
    "stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2",
    "readlink", "readlinkat", "getdents", "getdents64", "getcwd", "chdir", "fchdir",
    "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2",
    "link", "linkat", "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat",
    "umask", "mknod", "mknodat", "truncate", "ftruncate", "fallocate", "fsync", "fdatasync", "fadvise64",
    "utime", "utimes", "utimensat", "futimesat", "sendfile", "copy_file_range", "splice", "tee",
    "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
    "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
    # waiting for descriptors
    "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
    "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "signalfd", "signalfd4",
    "timerfd_create", "timerfd_settime", "timerfd_gettime",
    # time
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time", "times",
    "getitimer", "setitimer", "alarm", "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun",
    "timer_delete",
    # processes, threads and signals (inside the job's own pid namespace; the kernel checks the rest)
    "fork", "vfork", "clone", "execve", "exit", "exit_group", "wait4", "waitid", "kill", "tkill", "tgkill",
    "pidfd_open", "pidfd_send_signal", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending",
    "rt_sigsuspend", "rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack", "pause",
    "restart_syscall", "futex", "futex_waitv", "set_robust_list", "get_robust_list", "set_tid_address", "rseq",
    "getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid",
    "getgroups", "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
    "setfsuid", "setfsgid", "getpgid", "setpgid", "getpgrp", "getsid", "setsid",
    "getpriority", "setpriority", "sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam",
    "sched_setparam", "sched_getscheduler", "sched_setscheduler", "sched_get_priority_max",
    "sched_get_priority_min", "sched_rr_get_interval", "sched_getattr", "sched_setattr", "getcpu",
    "getrlimit", "setrlimit", "prlimit64", "getrusage", "uname", "prctl", "arch_prctl", "capget", "getrandom",
    # sockets (socket and socketpair themselves are checked: AF_UNIX only), in the job's own network namespace
    "bind", "listen", "accept", "accept4", "connect", "getsockname", "getpeername", "sendto", "recvfrom",
    "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown", "setsockopt", "getsockopt",
    # System V shared memory and semaphores, in the job's own IPC namespace
    "shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl",
)  # fmt: skip
# The zygote's side besides: a job's setup makes namespaces and mounts and drops capabilities; Python's
# start-up asks sysinfo.
ZYGOTE_ALLOW = ("mount", "unshare", "setns", "capset", "sysinfo")
# Refused with EPERM everywhere: debugging other processes, kernel attack surface no lesson needs,
# host-global state (clocks, writeback), and covert channels (inotify, fanotify, flock).
BASE_DENY = (
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp", "kexec_load", "kexec_file_load",
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "init_module", "finit_module",
    "delete_module", "reboot", "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime",
    "adjtimex", "iopl", "ioperm", "modify_ldt", "open_by_handle_at", "name_to_handle_at", "lookup_dcookie",
    "quotactl", "quotactl_fd", "syslog", "vhangup", "uselib", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "sync", "syncfs", "inotify_init", "inotify_init1", "inotify_add_watch",
    "inotify_rm_watch", "fanotify_init", "fanotify_mark", "flock",
)  # fmt: skip
# Refused with EPERM to learner code on top: what the job's setup used to build its sandbox (nobody may
# rearrange mounts or namespaces afterwards), and sysinfo (the host's load and memory figures).
JOB_DENY = (
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "mount_setattr", "fsopen", "fsconfig",
    "fsmount", "fspick", "move_mount", "open_tree", "capset", "sysinfo", "fadvise64", "readahead",
)  # fmt: skip
# Decided by their arguments (see build()), never by the allow list alone: everywhere, and in jobs besides.
CHECKED = ("socket", "socketpair", "ioctl", "fcntl", "clone3", "preadv2", "pwritev2")
JOB_CHECKED = ("clone", "madvise")

# Syscall numbers of every name above, from the kernel's tables (arch/x86/entry/syscalls/syscall_64.tbl
# and include/uapi/asm-generic/unistd.h, which arm64 uses); a name an architecture lacks is left out.
# tests/test_runner_seccomp.py checks them against the kernel headers when those are installed.
# fmt: off
SYSCALLS = {
    "x86_64": {
        "accept": 43, "accept4": 288, "access": 21, "acct": 163, "add_key": 248, "adjtimex": 159, "alarm": 37,
        "arch_prctl": 158, "bind": 49, "bpf": 321, "brk": 12, "capget": 125, "capset": 126, "chdir": 80, "chmod": 90,
        "chown": 92, "chroot": 161, "clock_adjtime": 305, "clock_getres": 229, "clock_gettime": 228,
        "clock_nanosleep": 230, "clock_settime": 227, "clone": 56, "clone3": 435, "close": 3, "close_range": 436,
        "connect": 42, "copy_file_range": 326, "creat": 85, "delete_module": 176, "dup": 32, "dup2": 33, "dup3": 292,
        "epoll_create": 213, "epoll_create1": 291, "epoll_ctl": 233, "epoll_pwait": 281, "epoll_pwait2": 441,
        "epoll_wait": 232, "eventfd": 284, "eventfd2": 290, "execve": 59, "exit": 60, "exit_group": 231,
        "faccessat": 269, "faccessat2": 439, "fadvise64": 221, "fallocate": 285, "fanotify_init": 300,
        "fanotify_mark": 301, "fchdir": 81, "fchmod": 91, "fchmodat": 268, "fchown": 93, "fchownat": 260,
        "fcntl": 72, "fdatasync": 75, "fgetxattr": 193, "finit_module": 313, "flistxattr": 196, "flock": 73,
        "fork": 57, "fremovexattr": 199, "fsconfig": 431, "fsetxattr": 190, "fsmount": 432, "fsopen": 430,
        "fspick": 433, "fstat": 5, "fstatfs": 138, "fsync": 74, "ftruncate": 77, "futex": 202, "futex_waitv": 449,
        "futimesat": 261, "get_robust_list": 274, "getcpu": 309, "getcwd": 79, "getdents": 78, "getdents64": 217,
        "getegid": 108, "geteuid": 107, "getgid": 104, "getgroups": 115, "getitimer": 36, "getpeername": 52,
        "getpgid": 121, "getpgrp": 111, "getpid": 39, "getppid": 110, "getpriority": 140, "getrandom": 318,
        "getresgid": 120, "getresuid": 118, "getrlimit": 97, "getrusage": 98, "getsid": 124, "getsockname": 51,
        "getsockopt": 55, "gettid": 186, "gettimeofday": 96, "getuid": 102, "getxattr": 191, "init_module": 175,
        "inotify_add_watch": 254, "inotify_init": 253, "inotify_init1": 294, "inotify_rm_watch": 255,
        "io_uring_enter": 426, "io_uring_register": 427, "io_uring_setup": 425, "ioctl": 16, "ioperm": 173,
        "iopl": 172, "kcmp": 312, "kexec_file_load": 320, "kexec_load": 246, "keyctl": 250, "kill": 62, "lchown": 94,
        "lgetxattr": 192, "link": 86, "linkat": 265, "listen": 50, "listxattr": 194, "llistxattr": 195,
        "lookup_dcookie": 212, "lremovexattr": 198, "lseek": 8, "lsetxattr": 189, "lstat": 6, "madvise": 28,
        "memfd_create": 319, "mincore": 27, "mkdir": 83, "mkdirat": 258, "mknod": 133, "mknodat": 259, "mmap": 9,
        "modify_ldt": 154, "mount": 165, "mount_setattr": 442, "move_mount": 429, "mprotect": 10, "mremap": 25,
        "msync": 26, "munmap": 11, "name_to_handle_at": 303, "nanosleep": 35, "newfstatat": 262, "open": 2,
        "open_by_handle_at": 304, "open_tree": 428, "openat": 257, "openat2": 437, "pause": 34,
        "perf_event_open": 298, "pidfd_getfd": 438, "pidfd_open": 434, "pidfd_send_signal": 424, "pipe": 22,
        "pipe2": 293, "pivot_root": 155, "poll": 7, "ppoll": 271, "prctl": 157, "pread64": 17, "preadv": 295,
        "preadv2": 327, "prlimit64": 302, "process_vm_readv": 310, "process_vm_writev": 311, "pselect6": 270,
        "ptrace": 101, "pwrite64": 18, "pwritev": 296, "pwritev2": 328, "quotactl": 179, "quotactl_fd": 443,
        "read": 0, "readlink": 89, "readlinkat": 267, "readv": 19, "reboot": 169, "recvfrom": 45, "recvmmsg": 299,
        "recvmsg": 47, "removexattr": 197, "rename": 82, "renameat": 264, "renameat2": 316, "request_key": 249,
        "restart_syscall": 219, "rmdir": 84, "rseq": 334, "rt_sigaction": 13, "rt_sigpending": 127,
        "rt_sigprocmask": 14, "rt_sigqueueinfo": 129, "rt_sigreturn": 15, "rt_sigsuspend": 130,
        "rt_sigtimedwait": 128, "rt_tgsigqueueinfo": 297, "sched_get_priority_max": 146,
        "sched_get_priority_min": 147, "sched_getaffinity": 204, "sched_getattr": 315, "sched_getparam": 143,
        "sched_getscheduler": 145, "sched_rr_get_interval": 148, "sched_setaffinity": 203, "sched_setattr": 314,
        "sched_setparam": 142, "sched_setscheduler": 144, "sched_yield": 24, "select": 23, "semctl": 66,
        "semget": 64, "semop": 65, "semtimedop": 220, "sendfile": 40, "sendmmsg": 307, "sendmsg": 46, "sendto": 44,
        "set_robust_list": 273, "set_tid_address": 218, "setfsgid": 123, "setfsuid": 122, "setgid": 106,
        "setgroups": 116, "setitimer": 38, "setns": 308, "setpgid": 109, "setpriority": 141, "setregid": 114,
        "setresgid": 119, "setresuid": 117, "setreuid": 113, "setrlimit": 160, "setsid": 112, "setsockopt": 54,
        "settimeofday": 164, "setuid": 105, "setxattr": 188, "shmat": 30, "shmctl": 31, "shmdt": 67, "shmget": 29,
        "shutdown": 48, "sigaltstack": 131, "signalfd": 282, "signalfd4": 289, "socket": 41, "socketpair": 53,
        "splice": 275, "stat": 4, "statfs": 137, "statx": 332, "swapoff": 168, "swapon": 167, "symlink": 88,
        "symlinkat": 266, "sync": 162, "syncfs": 306, "sysinfo": 99, "syslog": 103, "tee": 276, "tgkill": 234,
        "time": 201, "timer_create": 222, "timer_delete": 226, "timer_getoverrun": 225, "timer_gettime": 224,
        "timer_settime": 223, "timerfd_create": 283, "timerfd_gettime": 287, "timerfd_settime": 286, "times": 100,
        "tkill": 200, "truncate": 76, "umask": 95, "umount2": 166, "uname": 63, "unlink": 87, "unlinkat": 263,
        "unshare": 272, "uselib": 134, "userfaultfd": 323, "utime": 132, "utimensat": 280, "utimes": 235,
        "vfork": 58, "vhangup": 153, "wait4": 61, "waitid": 247, "write": 1, "writev": 20, "readahead": 187,
    },
    "aarch64": {
        "accept": 202, "accept4": 242, "acct": 89, "add_key": 217, "adjtimex": 171, "bind": 200, "bpf": 280,
        "brk": 214, "capget": 90, "capset": 91, "chdir": 49, "chroot": 51, "clock_adjtime": 266, "clock_getres": 114,
        "clock_gettime": 113, "clock_nanosleep": 115, "clock_settime": 112, "clone": 220, "clone3": 435, "close": 57,
        "close_range": 436, "connect": 203, "copy_file_range": 285, "delete_module": 106, "dup": 23, "dup3": 24,
        "epoll_create1": 20, "epoll_ctl": 21, "epoll_pwait": 22, "epoll_pwait2": 441, "eventfd2": 19, "execve": 221,
        "exit": 93, "exit_group": 94, "faccessat": 48, "faccessat2": 439, "fadvise64": 223, "fallocate": 47,
        "fanotify_init": 262, "fanotify_mark": 263, "fchdir": 50, "fchmod": 52, "fchmodat": 53, "fchown": 55,
        "fchownat": 54, "fcntl": 25, "fdatasync": 83, "fgetxattr": 10, "finit_module": 273, "flistxattr": 13,
        "flock": 32, "fremovexattr": 16, "fsconfig": 431, "fsetxattr": 7, "fsmount": 432, "fsopen": 430,
        "fspick": 433, "fstat": 80, "fstatfs": 44, "fsync": 82, "ftruncate": 46, "futex": 98, "futex_waitv": 449,
        "get_robust_list": 100, "getcpu": 168, "getcwd": 17, "getdents64": 61, "getegid": 177, "geteuid": 175,
        "getgid": 176, "getgroups": 158, "getitimer": 102, "getpeername": 205, "getpgid": 155, "getpid": 172,
        "getppid": 173, "getpriority": 141, "getrandom": 278, "getresgid": 150, "getresuid": 148, "getrlimit": 163,
        "getrusage": 165, "getsid": 156, "getsockname": 204, "getsockopt": 209, "gettid": 178, "gettimeofday": 169,
        "getuid": 174, "getxattr": 8, "init_module": 105, "inotify_add_watch": 27, "inotify_init1": 26,
        "inotify_rm_watch": 28, "io_uring_enter": 426, "io_uring_register": 427, "io_uring_setup": 425, "ioctl": 29,
        "kcmp": 272, "kexec_file_load": 294, "kexec_load": 104, "keyctl": 219, "kill": 129, "lgetxattr": 9,
        "linkat": 37, "listen": 201, "listxattr": 11, "llistxattr": 12, "lookup_dcookie": 18, "lremovexattr": 15,
        "lseek": 62, "lsetxattr": 6, "madvise": 233, "memfd_create": 279, "mincore": 232, "mkdirat": 34,
        "mknodat": 33, "mmap": 222, "mount": 40, "mount_setattr": 442, "move_mount": 429, "mprotect": 226,
        "mremap": 216, "msync": 227, "munmap": 215, "name_to_handle_at": 264, "nanosleep": 101, "newfstatat": 79,
        "open_by_handle_at": 265, "open_tree": 428, "openat": 56, "openat2": 437, "perf_event_open": 241,
        "pidfd_getfd": 438, "pidfd_open": 434, "pidfd_send_signal": 424, "pipe2": 59, "pivot_root": 41, "ppoll": 73,
        "prctl": 167, "pread64": 67, "preadv": 69, "preadv2": 286, "prlimit64": 261, "process_vm_readv": 270,
        "process_vm_writev": 271, "pselect6": 72, "ptrace": 117, "pwrite64": 68, "pwritev": 70, "pwritev2": 287,
        "quotactl": 60, "quotactl_fd": 443, "read": 63, "readlinkat": 78, "readv": 65, "reboot": 142,
        "recvfrom": 207, "recvmmsg": 243, "recvmsg": 212, "removexattr": 14, "renameat": 38, "renameat2": 276,
        "request_key": 218, "restart_syscall": 128, "rseq": 293, "rt_sigaction": 134, "rt_sigpending": 136,
        "rt_sigprocmask": 135, "rt_sigqueueinfo": 138, "rt_sigreturn": 139, "rt_sigsuspend": 133,
        "rt_sigtimedwait": 137, "rt_tgsigqueueinfo": 240, "sched_get_priority_max": 125,
        "sched_get_priority_min": 126, "sched_getaffinity": 123, "sched_getattr": 275, "sched_getparam": 121,
        "sched_getscheduler": 120, "sched_rr_get_interval": 127, "sched_setaffinity": 122, "sched_setattr": 274,
        "sched_setparam": 118, "sched_setscheduler": 119, "sched_yield": 124, "semctl": 191, "semget": 190,
        "semop": 193, "semtimedop": 192, "sendfile": 71, "sendmmsg": 269, "sendmsg": 211, "sendto": 206,
        "set_robust_list": 99, "set_tid_address": 96, "setfsgid": 152, "setfsuid": 151, "setgid": 144,
        "setgroups": 159, "setitimer": 103, "setns": 268, "setpgid": 154, "setpriority": 140, "setregid": 143,
        "setresgid": 149, "setresuid": 147, "setreuid": 145, "setrlimit": 164, "setsid": 157, "setsockopt": 208,
        "settimeofday": 170, "setuid": 146, "setxattr": 5, "shmat": 196, "shmctl": 195, "shmdt": 197, "shmget": 194,
        "shutdown": 210, "sigaltstack": 132, "signalfd4": 74, "socket": 198, "socketpair": 199, "splice": 76,
        "statfs": 43, "statx": 291, "swapoff": 225, "swapon": 224, "symlinkat": 36, "sync": 81, "syncfs": 267,
        "sysinfo": 179, "syslog": 116, "tee": 77, "tgkill": 131, "timer_create": 107, "timer_delete": 111,
        "timer_getoverrun": 109, "timer_gettime": 108, "timer_settime": 110, "timerfd_create": 85,
        "timerfd_gettime": 87, "timerfd_settime": 86, "times": 153, "tkill": 130, "truncate": 45, "umask": 166,
        "umount2": 39, "uname": 160, "unlinkat": 35, "unshare": 97, "userfaultfd": 282, "utimensat": 88,
        "vhangup": 58, "wait4": 260, "waitid": 95, "write": 64, "writev": 66, "readahead": 213,
    },
}
# fmt: on
ARCH_TOKENS = {"x86_64": AUDIT_ARCH_X86_64, "aarch64": AUDIT_ARCH_AARCH64}


def host_arch() -> str:
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


def allowed_names(*, job: bool) -> tuple[str, ...]:
    """The system calls a filter lets through (some only with the right arguments: see CHECKED)."""
    # The checked names pass on their arguments; clone3 never does (its flags sit in memory a filter cannot read).
    names = ALLOW + (() if job else ZYGOTE_ALLOW) + tuple(n for n in CHECKED if n != "clone3")
    return tuple(sorted(set(names) - (set(JOB_DENY) if job else set())))


@dataclass(frozen=True)
class Insn:
    code: int
    k: int | str = 0  # a label name for BPF_JA
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

    def ja(self, target: str) -> None:
        """Jump unconditionally: a 32-bit offset, for targets beyond the 255 a conditional jump reaches."""
        self.items.append(Insn(BPF_JA, target))

    def jeq(self, k: int, jt: int | str = 0, jf: int | str = 0) -> None:
        self.items.append(Insn(BPF_JEQ_K, k, jt, jf))

    def jgt(self, k: int, jt: int | str = 0, jf: int | str = 0) -> None:
        self.items.append(Insn(BPF_JGT_K, k, jt, jf))

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

        def rel(target: int | str, pc: int, limit: int = 255) -> int:
            if isinstance(target, int):
                return target
            off = labels[target] - pc - 1
            if not 0 <= off <= limit:
                raise ValueError(f"jump to {target} out of range ({off})")
            return off

        for pc, ins in enumerate(insns):
            if ins.code == BPF_JA:
                out.append((ins.code, 0, 0, rel(ins.k, pc, 0xFFFFFFFF)))
            else:
                assert isinstance(ins.k, int)
                out.append((ins.code, rel(ins.jt, pc), rel(ins.jf, pc), ins.k & 0xFFFFFFFF))
        return out


def _ranges(numbers: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted numbers as runs of consecutive ones: [(lo, hi), ...]."""
    out: list[tuple[int, int]] = []
    for n in sorted(set(numbers)):
        if out and out[-1][1] == n - 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def _search(a: Assembler, ranges: list[tuple[int, int]], name: str) -> None:
    """A binary search for A (the syscall number) among ``ranges``: allow on a hit, else go to "refused"."""
    if len(ranges) == 1:
        lo, hi = ranges[0]
        a.jge(lo, 0, 2)  # below: refused
        a.jgt(hi, 1, 0)  # above: refused
        a.ret(SECCOMP_RET_ALLOW)
        a.ja("refused")
        return
    mid = len(ranges) // 2
    a.jge(ranges[mid][0], 0, 1)
    a.ja(f"{name}r")
    _search(a, ranges[:mid], f"{name}l")
    a.label(f"{name}r")
    _search(a, ranges[mid:], f"{name}r")


def build(arch: str | None = None, *, job: bool) -> list[tuple[int, int, int, int]]:
    arch = arch or host_arch()
    if arch not in SYSCALLS:
        from .errors import SandboxUnavailable

        raise SandboxUnavailable(
            f"no seccomp syscall table for architecture {arch!r} (supported: {', '.join(SYSCALLS)})"
        )
    nr = SYSCALLS[arch]
    checked = set(CHECKED) | (set(JOB_CHECKED) if job else set())
    allowed = [nr[n] for n in allowed_names(job=job) if n in nr and n not in checked]
    denied = sorted({nr[n] for n in BASE_DENY + (JOB_DENY if job else ()) if n in nr})
    a = Assembler()
    a.ld(OFF_ARCH)
    a.jeq(ARCH_TOKENS[arch], 1, 0)
    a.ret(SECCOMP_RET_KILL_PROCESS)
    a.ld(OFF_NR)
    if arch == "x86_64":
        a.jge(X32_SYSCALL_BIT, 0, 1)
        a.ret(SECCOMP_RET_KILL_PROCESS)

    # The calls decided by their arguments: each block returns; past one, A still holds the number.
    a.jeq(nr["clone3"], 0, 1)
    a.ret(SECCOMP_RET_ERRNO | E.ENOSYS)  # flags live in a struct: make glibc fall back to clone
    if job:
        # The zygote's side (nsforge) clones new pid namespaces; jobs may not.
        a.jeq(nr["clone"], 0, 4)
        a.ld(off_arg_lo(0))  # clone(flags, ...) on both arches
        a.jset(CLONE_NS_FLAGS, 0, 1)
        a.ret(SECCOMP_RET_ERRNO | E.EPERM)
        a.ret(SECCOMP_RET_ALLOW)
        # Reading ahead or evicting shared files' pages (the page cache is everyone's): refused to jobs.
        a.jeq(nr["madvise"], 0, "not_madvise")
        a.ld(off_arg_lo(2))  # advice: an int
        for advice in MADVISE_DENY:
            a.jeq(advice, "eperm_checked", 0)
        a.ret(SECCOMP_RET_ALLOW)
        a.label("not_madvise")
        a.ld(OFF_NR)
    # RWF_NOWAIT answers "is this page cached?" without reading it: a probe of what others read.
    a.jeq(nr["preadv2"], 1, 0)
    a.jeq(nr["pwritev2"], 0, "not_rwf")
    a.ld(off_arg_lo(5))  # flags
    a.jset(RWF_NOWAIT, "eperm_checked", 0)
    a.ret(SECCOMP_RET_ALLOW)
    a.label("eperm_checked")
    a.ret(SECCOMP_RET_ERRNO | E.EPERM)
    a.label("not_rwf")
    a.ld(OFF_NR)
    a.jeq(nr["socket"], 1, 0)
    a.jeq(nr["socketpair"], 0, 4)
    a.ld(off_arg_lo(0))  # domain
    a.jeq(AF_UNIX, 0, 1)
    a.ret(SECCOMP_RET_ALLOW)
    a.ret(SECCOMP_RET_ERRNO | E.EAFNOSUPPORT)
    a.jeq(nr["ioctl"], 0, "not_ioctl")
    a.ld(off_arg_lo(1))  # request: the kernel only looks at 32 bits
    for request in IOCTL_DENY:
        a.jeq(request, "ioctl_denied", 0)
    a.ret(SECCOMP_RET_ALLOW)
    a.label("ioctl_denied")
    a.ret(SECCOMP_RET_ERRNO | E.EPERM)
    a.label("not_ioctl")
    a.jeq(nr["fcntl"], 0, "not_fcntl")
    a.ld(off_arg_lo(1))  # cmd: an unsigned int
    for cmd in FCNTL_ALLOW:
        a.jeq(cmd, "fcntl_allowed", 0)
    a.ret(SECCOMP_RET_ERRNO | E.EPERM)
    a.label("fcntl_allowed")
    a.ret(SECCOMP_RET_ALLOW)
    a.label("not_fcntl")

    _search(a, _ranges(allowed), "t")

    # Not allowed: EPERM for what is refused on purpose, ENOSYS for everything else (unknown or newer).
    a.label("refused")
    for n in denied:
        a.jeq(n, "eperm", 0)
    a.ret(SECCOMP_RET_ERRNO | E.ENOSYS)
    a.label("eperm")
    a.ret(SECCOMP_RET_ERRNO | E.EPERM)
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
        elif code == BPF_JA:
            pc += 1 + k
        else:
            if code == BPF_JEQ_K:
                cond = acc == k
            elif code == BPF_JGT_K:
                cond = acc > k
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


# --- the same policy as a Docker seccomp profile (the Docker backend's job containers) ----------------------

DOCKER_ARCHES = {"x86_64": "SCMP_ARCH_X86_64", "aarch64": "SCMP_ARCH_AARCH64"}
AF_UNIX_ONLY = [{"index": 0, "value": AF_UNIX, "op": "SCMP_CMP_EQ"}]


def docker_profile(arch: str | None = None) -> dict[str, object]:
    """The jobs' policy as a Docker seccomp profile: the same allow list, the same EPERM refusals, the same
    argument checks where a profile can state them, ENOSYS for everything else; only the native ABI.

    Two checks differ, for a reason: ``ioctl`` and ``fcntl`` are allowed whole (a profile compares 64-bit
    arguments, so a deny list of 32-bit commands cannot be stated exactly): a container has no terminal
    but its own, and its files (an overlay mount of its own) share no lock with another container's.
    """
    arch = arch or host_arch()
    if arch not in DOCKER_ARCHES:
        from .errors import SandboxUnavailable

        raise SandboxUnavailable(
            f"no seccomp profile for architecture {arch!r} (supported: {', '.join(DOCKER_ARCHES)})"
        )
    names = set(SYSCALLS[arch])
    checked = set(CHECKED) | set(JOB_CHECKED) | {"ioctl", "fcntl"}
    allowed = sorted(n for n in allowed_names(job=True) if n in names and n not in checked)
    denied = sorted(n for n in BASE_DENY + JOB_DENY if n in names)
    rules: list[dict[str, object]] = [
        {"names": [*allowed, "ioctl", "fcntl"], "action": "SCMP_ACT_ALLOW"},
        {"names": denied, "action": "SCMP_ACT_ERRNO", "errnoRet": E.EPERM},
        {"names": ["socket", "socketpair"], "action": "SCMP_ACT_ALLOW", "args": AF_UNIX_ONLY},
        {
            "names": ["socket", "socketpair"],
            "action": "SCMP_ACT_ERRNO",
            "errnoRet": E.EAFNOSUPPORT,
            "args": [{"index": 0, "value": AF_UNIX, "op": "SCMP_CMP_NE"}],
        },
        # Its flags live in memory: ENOSYS, so glibc falls back to clone, checked below (the engine's EPERM otherwise
        # fails every thread).
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": E.ENOSYS},
        # No namespace flags (the profile compares the whole argument under a mask, as Docker's own does).
        {
            "names": ["clone"],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": 0, "value": CLONE_NS_FLAGS, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}],
        },
        {
            "names": ["preadv2", "pwritev2"],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": 5, "value": RWF_NOWAIT, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}],
        },
    ]
    # madvise: every advice but the refused ones (each its own rule: one comparison per argument and rule).
    for advice in range(0, 32):
        if advice in MADVISE_DENY:
            rules.append(
                {
                    "names": ["madvise"],
                    "action": "SCMP_ACT_ERRNO",
                    "errnoRet": E.EPERM,
                    "args": [{"index": 2, "value": advice, "op": "SCMP_CMP_EQ"}],
                }
            )
        else:
            rules.append(
                {
                    "names": ["madvise"],
                    "action": "SCMP_ACT_ALLOW",
                    "args": [{"index": 2, "value": advice, "op": "SCMP_CMP_EQ"}],
                }
            )
    return {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": E.ENOSYS,
        "architectures": [DOCKER_ARCHES[arch]],
        "syscalls": rules,
    }
