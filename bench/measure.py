"""What the runner benchmarks measure with: percentiles, a process tree's CPU and its memory (PSS)."""

from __future__ import annotations

import os


def pct(xs: list[float], p: float) -> float:
    """The ``p``-th percentile of ``xs`` (nearest rank below; the largest for p = 100)."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def children_of() -> dict[int, list[int]]:
    """Every live process's children, from /proc (one pass)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    return children


def descendants(pid: int, children: dict[int, list[int]] | None = None) -> list[int]:
    """``pid`` and every live process below it."""
    children = children_of() if children is None else children
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        stack.extend(children.get(p, []))
    return out


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and its live descendants, with the children they reaped (each counted once)."""
    ticks = 0
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def memory_kb(pids: list[int]) -> tuple[int, int]:
    """(RSS, PSS) of ``pids`` together, in KiB: PSS counts a page shared by n processes as 1/n."""
    rss = pss = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
        except OSError:
            pass
    return rss, pss
