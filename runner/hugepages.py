"""Back the zygote's warm heap with transparent huge pages, so fork is cheap.

After ``import torch`` the zygote holds ~140 MB of anonymous memory (the
interpreter's objects and torch's C++ state, all on glibc's heap because of
``PYTHONMALLOC=malloc``, see sandbox_env()).  In 4 KiB pages that is ~36,000
page-table entries which *every* job's fork() copies and whose every page
has its reference count raised, and which the job's exit walks again to
unmap: measured ~25 ms of kernel CPU per job, most of a trivial job's cost.
Mapped as 2 MiB pages it is ~70 PMD entries (fork + exit ~6 ms).

glibc's own switch (``GLIBC_TUNABLES=glibc.malloc.hugetlb=1``) does not
work in the sandbox: it reads the THP mode from /sys, which the sandbox does
not mount.  So the zygote asks the kernel directly, once, after warm-up:
``MADV_HUGEPAGE`` marks the ranges (khugepaged keeps them huge later) and
``MADV_COLLAPSE`` (Linux 6.1+) rebuilds them as huge pages right away.  On
older kernels, or with THP disabled, both fail harmlessly and forks stay
slower; nothing else depends on it.
"""

from __future__ import annotations

import ctypes

MADV_HUGEPAGE = 14
MADV_COLLAPSE = 25
HUGE = 2 << 20  # bytes in a PMD-sized page on x86_64 and arm64 (4 KiB base pages)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def anonymous_ranges(maps: str) -> list[tuple[int, int]]:
    """The whole huge pages inside writable private anonymous mappings (pure)."""
    out = []
    for line in maps.splitlines():
        parts = line.split()
        if len(parts) < 5 or not parts[1].startswith("rw") or parts[1][3] != "p":
            continue
        name = parts[5] if len(parts) > 5 else ""
        if name not in ("", "[heap]"):
            continue  # files, stacks, vdso: not ours to remap
        start, end = (int(x, 16) for x in parts[0].split("-"))
        lo = (start + HUGE - 1) & ~(HUGE - 1)
        hi = end & ~(HUGE - 1)
        if hi > lo:
            out.append((lo, hi))
    return out


def collapse() -> int:
    """Remap the process's anonymous memory as huge pages; returns the bytes collapsed."""
    with open("/proc/self/maps") as f:
        ranges = anonymous_ranges(f.read())
    done = 0
    for lo, hi in ranges:
        if _libc.madvise(lo, hi - lo, MADV_HUGEPAGE) != 0:
            continue
        if _libc.madvise(lo, hi - lo, MADV_COLLAPSE) == 0:
            done += hi - lo
    return done
