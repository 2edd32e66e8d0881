"""Which system calls the sandbox's processes really make: the evidence behind seccomp.py's allow lists.

    sudo .venv/bin/python bench/seccomp_trace.py [--out /tmp/trace.txt] [--quick]

Starts the warm pool with its sandbox under ``strace -f`` (as root, so the tracer follows the launcher into
bwrap and every job), runs a workload through it, stops, and prints one JSON object:

  zygote        syscalls made on the zygote's side after bwrap installed its filter (the zygote,
                nsforge, the pid namespaces' inits, each job's own setup before the job filter)
  job           syscalls made by learner code, i.e. after a job installed the job filter (its
                children and threads included)
  job_refused / zygote_refused   of those, what seccomp.py's allow lists do not allow: each must be
                a call the policy refuses on purpose (the run's jobs still pass), or a gap to close

The workload is what learners run: every code sample (after its setup), starter and solution of
lessons/en, the solutions graded with their checks (extraction runs in the job), the runner tests'
ordinary snippets, and everyday Python (files, threads, a forked multiprocessing pool, tracebacks).
Hostile snippets are NOT part of it: what they attempt is no evidence of need.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runner import seccomp, zygote_control
from runner.config import RunnerConfig
from runner.grading import Check, ExerciseChecks
from runner.pool import Pool, PoolConfig
from tests.runner_cases.everyday import EVERYDAY

ROOT = Path(__file__).resolve().parent.parent


def lesson_snippets() -> tuple[list[str], list[tuple[str, ExerciseChecks]]]:
    """(every sample, starter and solution; every solution and starter with its checks)."""
    plain, graded = [], []
    for path in sorted((ROOT / "lessons" / "en").glob("[0-9]*.yaml")):
        lesson = yaml.safe_load(path.read_text(encoding="utf-8"))
        for slide in lesson.get("slides", []):
            if slide.get("code"):
                plain.append((slide.get("setup") or "") + slide["code"])
        ex = lesson.get("exercise") or {}
        checks = tuple(
            Check(c["id"], c["expr"], kind=c.get("kind", "close"), expect=c.get("expect"))
            for c in ex.get("checks", [])
            if "expect" in c or c.get("kind") == "true"
        )
        for key in ("starter", "solution"):
            if ex.get(key):
                plain.append(ex[key])
                if checks:
                    graded.append((ex[key], ExerciseChecks(checks=checks)))
    return plain, graded


def runner_test_snippets() -> list[str]:
    """The ordinary (not hostile) snippets of the pool tests."""
    return [
        "import torch\nx = torch.tensor(3.0, requires_grad=True)\n(x ** 2).backward()\nprint(x.grad.item())",
        "def f(x):\n    return x / 0\n\nf(1)\n",
        "import torch\ntorch.ones(2, 3) @ torch.ones(4, 5)\n",
        "x = (\n",
        "import sys; sys.exit(3)",
        "import os; os._exit(5)",
        "raise SystemExit('bye')",
        "import random, torch\nprint(random.random(), torch.rand(1).item())",
        "print('x' * 100000)",
        "import threading, os\nprint(threading.active_count(), len(os.listdir('/proc/self/task')))",
    ]


async def workload(pool: Pool, quick: bool = False) -> int:
    plain, graded = lesson_snippets()
    snippets = plain + runner_test_snippets() + list(EVERYDAY.values())
    if quick:  # a smoke test: a few of each kind
        snippets, graded = plain[:1] + runner_test_snippets()[:2], graded[:1]
    ran = 0
    for code in snippets:
        r = await pool.run(code, limits={"wall_time_s": 60, "cpu_time_s": 50})
        ran += 1
        if r.status not in ("ok", "error", "output_limit"):
            print(f"workload job ended {r.status}: {code[:60]!r} {r.stderr[-300:]}", file=sys.stderr)
    for code, checks in graded:
        await pool.run(code, checks=checks, limits={"wall_time_s": 60, "cpu_time_s": 50})
        ran += 1
    return ran


LINE = re.compile(r"^(\d+)\s+(?:<\.\.\. (\w+) resumed>|(\w+)\()")
EXITED = re.compile(r"^(\d+)\s+\+\+\+ (?:exited|killed)")
INSTALL = re.compile(r"prctl\(PR_SET_SECCOMP, SECCOMP_MODE_FILTER|seccomp\(SECCOMP_SET_MODE_FILTER")
CLONES = {"clone", "clone3", "fork", "vfork"}
# A child's pid as the tracer sees it: inside a pid namespace the return value is the namespace's pid,
# and --pidns-translation adds the tracer's.
RETURNED = re.compile(r"= (\d+)(?: /\* (\d+) in strace's PID NS \*/)?$")


@dataclasses.dataclass
class Proc:
    level: int  # seccomp filters in force (1: the zygote's, 2: the job's on top)


def parse(trace: str) -> dict[str, set[str]]:
    """Syscall names per filter level, following clones (children inherit their parent's level)."""
    live: dict[int, Proc] = {}
    pending: dict[int, int] = {}  # child pid -> the level it inherits (its first line may come first)
    seen: dict[int, set[str]] = defaultdict(set)
    started: dict[int, int] = {}  # pid -> level at the start of a clone still unfinished
    for line in trace.splitlines():
        m = EXITED.match(line)
        if m:
            live.pop(int(m.group(1)), None)
            continue
        m = LINE.match(line)
        if not m:
            continue
        pid = int(m.group(1))
        name = m.group(2) or m.group(3)
        proc = live.get(pid)
        if proc is None:
            proc = live[pid] = Proc(pending.pop(pid, 0))
        if proc.level:
            seen[proc.level].add(name)
        if m.group(3) and INSTALL.search(line):
            proc.level += 1
        if name in CLONES:
            if m.group(3):
                started[pid] = proc.level
            returned = RETURNED.search(line)
            if returned and int(returned.group(1)) > 0:
                child = int(returned.group(2) or returned.group(1))
                level = started.pop(pid, proc.level)
                if child in live:  # it ran before the parent's clone returned
                    live[child].level = max(live[child].level, level)
                else:
                    pending[child] = level
    return {"zygote": seen[1], "job": seen[2] | seen[3]}


def allowed(job: bool) -> set[str]:
    return set(seccomp.allowed_names(job=job))


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None, help="keep the raw strace output here")
    ap.add_argument("--quick", action="store_true", help="a handful of jobs: a smoke test, no evidence")
    args = ap.parse_args()
    if os.geteuid() != 0 or not shutil.which("strace"):
        sys.exit("needs root and strace (apt-get install -y strace)")
    tmp = tempfile.mkdtemp(prefix="coursebot-trace-")
    out = args.out or os.path.join(tmp, "trace.txt")
    real_popen = subprocess.Popen
    tracers: list[subprocess.Popen[bytes]] = []

    def traced(argv: list[str], *a: Any, **k: Any) -> subprocess.Popen[bytes]:
        # strace attaches to the launcher rather than starting it: the pool maps the jobs' uids into the
        # launcher's user namespace by its pid, which must be bwrap's own, not a tracer's. bwrap waits for
        # that mapping before it does anything of interest, so attaching here misses nothing.
        proc = real_popen(argv, *a, **k)
        argv = ["strace", "-f", "-q", "--pidns-translation", "-s", "48", "-e", "signal=none", "-o", out]
        tracers.append(real_popen([*argv, "-p", str(proc.pid)], stderr=subprocess.DEVNULL))
        for _ in range(1000):  # until the tracer holds it (TracerPid), at most 10 s
            status = Path(f"/proc/{proc.pid}/status").read_text()
            if re.search(r"^TracerPid:\s*[1-9]", status, re.M):
                break
            time.sleep(0.01)
        else:
            sys.exit("strace did not attach to the sandbox's launcher in 10 s")
        return proc

    zygote_control.subprocess.Popen = traced  # type: ignore[misc, assignment]
    config = dataclasses.replace(RunnerConfig.from_env(os.environ), startup_timeout_s=600.0)
    pool = Pool(PoolConfig.from_config(config))
    await pool.start()
    try:
        ran = await workload(pool, args.quick)
    finally:
        await pool.close()
        for tracer in tracers:  # strace ends with the last process it follows; its file is whole then
            tracer.wait(timeout=60)
    seen = parse(Path(out).read_text(errors="replace"))
    print(
        json.dumps(
            {
                "jobs": ran,
                "zygote": sorted(seen["zygote"]),
                "job": sorted(seen["job"]),
                "zygote_refused": sorted(seen["zygote"] - allowed(job=False)),
                "job_refused": sorted(seen["job"] - allowed(job=True)),
            }
        )
    )
    if not args.out:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
