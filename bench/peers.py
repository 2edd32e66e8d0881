"""The runner next to its peers, side by side in one run: epicbox, a fresh container per job, and ours.

    make bench-peers                     # or: python bench/peers.py [--rounds 10] [--image coursebot-job]

The same learner snippets (a trivial print, a lesson's solution, a 200 ms loop, and that lesson's graded
run) go through three paths, on the same torch (the project's job image holds the same torch 2.13 CPU
wheel as the runner's virtual environment), interleaved round by round so that load on the machine falls
on every path alike:

  epicbox   PyPI epicbox 1.1.0 (Stepik's sandbox) over the docker SDK, in a virtual environment of its own
            (bench/epicbox-requirements.txt says why: it needs urllib3 < 2), with one profile on the
            project's job image and a non-root user, called as its users call it: epicbox.run(profile,
            command, files=..., stdin=..., limits=...).  A job is the project's container boot script
            (runner.docker_backend.BOOT: the code runs as __main__ with Python's and torch's generators
            seeded, as in every path) sent as a file, the job on its stdin.  ``trivial_bare`` is also
            timed: the print as main.py under plain ``python3 main.py``, no torch imported, the
            fastest an epicbox job can be.
  docker    a fresh container per job through the docker SDK: the project's own Docker backend
            (runner.docker_backend.DockerBackend), what a team without a warm pool writes.
  ours      this project's runner (RunnerClient.embedded, 2 slots), as the bot uses it.

Every path has 2 slots.  The graded run is the lesson's solution with the lesson's checks, on a fresh
secret seed per run, judged outside the sandbox by runner.grading.  The peers get the reference's values
for that seed computed before the timed run (untimed), so their graded run is one container: the ratios
compare sandboxes, not grading designs.  Ours does whatever the runner does for a graded run.

Prints one JSON object:
  paths.NAME          per path: p50 / p99 in ms of each snippet (keys trivial, solution, loop, graded,
                      and epicbox's trivial_bare), samples, jobs_per_s (trivial jobs submitted at once to
                      2 slots), idle_mb (what stays resident between jobs: PSS of the runner's processes;
                      a peer keeps nothing running), busy_mb (the largest PSS of everything the path runs,
                      containers and their containerd shims included, sampled every 0.1 s in that burst);
                      ours also says how many graded runs found their reference computed ahead
  ratios.NAME         a peer's p50 over ours for each snippet, and ours' jobs/s over the peer's
  targets             trivial >= 100x epicbox at p50, graded >= 50x epicbox at p50 (None: not measured)
  skipped             a path that did not run, and why (no engine, no PyPI for epicbox's environment)
Progress goes to stderr.  The peers' samples are few (seconds each): their p99 is near their maximum.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import dataclasses
import hashlib
import itertools
import json
import math
import os
import secrets
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.measure import children_of, descendants, memory_kb, pct
from bot.course import runner_checks
from bot.library.load import load_valid
from runner import backend, docker_backend
from runner.backend import Request
from runner.client import ExerciseChecks, RunnerClient, RunnerConfig, RunResult
from runner.limits import Limits

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRIVIAL = "print(1 + 1)"
LOOP = "import time\nend = time.perf_counter() + 0.2\nwhile time.perf_counter() < end:\n    pass\nprint('looped')"
EPICBOX_VENV = os.path.join(ROOT, ".cache", "bench", "epicbox-venv")
EPICBOX_REQUIREMENTS = os.path.join(ROOT, "bench", "epicbox-requirements.txt")
# Every job of every path, with wall and CPU time to spare: a container's wall clock runs until its stream
# closes, its teardown included, which a busy engine can stretch to seconds (a 200 ms loop read as a timeout).
LIMITS = Limits(wall_time_s=60.0, cpu_time_s=30.0)
SAMPLE_EVERY_S = 0.1  # seconds between two looks at a path's memory during its burst
SPACING_S = 0.05  # seconds between two of our jobs: chat traffic, not a burst (the pool refills meanwhile)


def log(message: str) -> None:
    print(f"[peers {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- one job's time, whatever the path ----------------------------------------------------------------

JobRunner = Callable[[str, Limits, int, dict[str, Any] | None], Awaitable[tuple[RunResult, bytes | None]]]


@dataclasses.dataclass
class Path:
    """A way to run a snippet: ``run(code)`` and ``graded(code, checks, seed)``, each timed by the caller."""

    name: str
    run: Callable[[str], Awaitable[RunResult]]
    graded: Callable[[str, ExerciseChecks, int], Awaitable[RunResult]]
    prepare_seed: Callable[[ExerciseChecks, int], Awaitable[None]]  # the reference's values, untimed
    memory_pids: Callable[[], dict[str, list[int]]]  # what it runs now: group -> pids (for PSS)
    idle_pids: Callable[[], list[int]]
    extra: dict[str, Callable[[], Awaitable[RunResult]]] = dataclasses.field(default_factory=dict)  # more jobs
    samples: dict[str, list[float]] = dataclasses.field(default_factory=dict)

    async def timed(self, snippet: str, job: Awaitable[RunResult]) -> RunResult:
        started = time.perf_counter()
        result = await job
        self.samples.setdefault(snippet, []).append((time.perf_counter() - started) * 1000)
        return result


def expect_ok(path: str, snippet: str, result: RunResult, graded: bool = False) -> None:
    """A job that did not do what it should makes every figure of the run meaningless: stop."""
    if result.status != "ok" or (graded and not result.passed):
        checks = [(c.id, c.message_key, dict(c.params)) for c in result.checks]
        raise SystemExit(f"{path}: the {snippet} job failed: {result.status} {result.stderr[-800:]!r} {checks}")


# --- peers: graded runs with the reference's values ready -----------------------------------------------


class ReadyReferences:
    """The reference's values per seed, computed ahead (untimed) with the path's own job runner."""

    def __init__(self, run_job: JobRunner) -> None:
        self._run_job = run_job
        self._values: dict[int, Mapping[str, Any]] = {}

    async def prepare(self, checks: ExerciseChecks, seed: int) -> None:
        self._values[seed] = await backend.run_reference(self._run_job, checks, LIMITS, seed)

    async def graded(self, code: str, checks: ExerciseChecks, seed: int) -> RunResult:
        async def ready(_checks: ExerciseChecks, _limits: Limits, s: int) -> Mapping[str, Any]:
            return self._values.pop(s)

        return await backend.run_request(Request.of(code, LIMITS, checks, seed, LIMITS), self._run_job, ready)


# --- epicbox, in its own environment --------------------------------------------------------------------


def epicbox_python() -> str:
    """epicbox's virtual environment (made, or remade when its requirements change); SkipPath if it cannot be."""
    python = os.path.join(EPICBOX_VENV, "bin", "python")
    with open(EPICBOX_REQUIREMENTS, "rb") as f:
        wanted = hashlib.sha256(f.read()).hexdigest()
    stamp = os.path.join(EPICBOX_VENV, ".requirements-sha256")
    try:
        with open(stamp) as f:
            if f.read().strip() == wanted and os.path.exists(python):
                return python
    except OSError:
        pass
    log(f"making epicbox's environment in {EPICBOX_VENV}")
    # The base interpreter, not ours: nothing of the project's environment leaks into epicbox's.
    base = getattr(sys, "_base_executable", sys.executable)
    steps = [
        [base, "-m", "venv", "--clear", EPICBOX_VENV],
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", EPICBOX_REQUIREMENTS],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise SkipPath(f"cannot make epicbox's environment ({' '.join(step[:3])}...): {last}")
    with open(stamp, "w") as f:
        f.write(wanted)
    return python


class SkipPath(Exception):
    """A path cannot run on this machine; the message says why."""


class Epicbox:
    """bench/epicbox_worker.py in epicbox's environment, asked one job per line."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, image: str, slots: int) -> Epicbox:
        python = await asyncio.to_thread(epicbox_python)
        proc = await asyncio.create_subprocess_exec(
            python,
            os.path.join(ROOT, "bench", "epicbox_worker.py"),
            image,
            str(slots),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=16 << 20,
        )
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        if not line.startswith(b'{"ready"'):
            proc.kill()
            await proc.wait()
            raise SkipPath(f"epicbox's worker did not start: {line[-300:]!r}")
        return cls(proc)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            reply = json.loads(line)
            fut = self._waiting.pop(reply["id"], None)
            if fut is not None and not fut.done():
                fut.set_result(reply)
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(RuntimeError("epicbox's worker exited"))

    async def call(self, command: str, files: dict[str, str], stdin: str | None, limits: dict[str, int]) -> Any:
        rid = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        request = {
            "id": rid,
            "command": command,
            "files": [{"name": n, "content": c} for n, c in files.items()],
            "stdin": stdin,
            "limits": limits,
        }
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        await self.proc.stdin.drain()
        reply = await fut
        if not reply["ok"]:
            raise RuntimeError(f"epicbox: {reply['error']}")
        return reply

    async def run_job(
        self, code: str, lim: Limits, seed: int, spec: dict[str, Any] | None
    ) -> tuple[RunResult, bytes | None]:
        """One job as the Docker backend runs it (its boot script, the job on stdin), but by epicbox."""
        limits = {
            # epicbox's units: CPU and real seconds, megabytes; the interpreter's start and torch's import
            # come first, with the Docker backend's allowance for them.
            "cputime": docker_backend.STARTUP_CPU_S + max(1, math.ceil(lim.cpu_time_s)),
            "realtime": math.ceil(docker_backend.STARTUP_S + lim.wall_time_s),
            "memory": lim.memory_bytes // (1 << 20),
            "processes": lim.max_processes,
        }
        stdin = docker_backend.job_input(code, seed, spec, lim).decode()
        reply = await self.call("python3 -I -B boot.py", {"boot.py": docker_backend.BOOT}, stdin, limits)
        out = base64.b64decode(reply["stdout"])
        err = base64.b64decode(reply["stderr"]).removeprefix(docker_backend.READY_MARKER.encode())
        err, report = docker_backend.split_report(err) if spec is not None else (err, None)
        truncated = len(out) + len(err) > lim.output_bytes
        stderr = err.decode("utf-8", "replace")
        end = docker_backend.job_end(reply["exit_code"], reply["oom_killed"], reply["timeout"], truncated, stderr)
        result = RunResult(
            status=backend.classify(end, lim),
            stdout=out.decode("utf-8", "replace"),
            stderr=stderr,
            exit_code=end.exit_code,
            signal=end.signal,
            duration_ms=round(reply["elapsed_s"] * 1000, 3),
            truncated=truncated,
        )
        return result, report

    async def run(self, code: str) -> RunResult:
        result, _ = await self.run_job(code, LIMITS, secrets.randbits(63), None)
        return result

    async def run_bare(self, code: str) -> RunResult:
        """The snippet as main.py under ``python3 main.py``: epicbox's own example, nothing imported or seeded."""
        limits = {"cputime": 30, "realtime": 60, "memory": LIMITS.memory_bytes // (1 << 20), "processes": 32}
        reply = await self.call("python3 main.py", {"main.py": code}, None, limits)
        stderr = base64.b64decode(reply["stderr"]).decode("utf-8", "replace")
        ok = reply["exit_code"] == 0 and not reply["timeout"]
        return RunResult(
            status="ok" if ok else "error",
            stdout=base64.b64decode(reply["stdout"]).decode("utf-8", "replace"),
            stderr=stderr,
            exit_code=reply["exit_code"],
            signal=None,
            duration_ms=round(reply["elapsed_s"] * 1000, 3),
            truncated=False,
        )

    async def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 60)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        self._reader.cancel()


# --- the engine, the image, the containers' memory -----------------------------------------------------


def engine_problem() -> str | None:
    """Why no Docker engine can be used here (None: one answers; started by container/ensure-engine if need be)."""
    try:
        done = subprocess.run(
            [os.path.join(ROOT, "container", "ensure-engine")], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"no Docker engine: {e}"
    if done.returncode != 0:
        return done.stderr.strip() or "no Docker engine answers"
    try:
        import docker
    except ImportError:
        return "the docker SDK is missing (make setup installs it)"
    try:
        docker.from_env().ping()
    except Exception as e:  # the SDK raises its own errors and requests' alike
        return f"the docker SDK cannot reach the engine: {e}"
    return None


def build_image(tag: str) -> None:
    """The project's job image from this checkout, by the project's scripts (cached layers: seconds if unchanged)."""
    for step in (["base-image"], ["build", "-q", "-t", tag, "--target", "job", "."]):
        log(f"container/{' '.join(step)}")
        # Their output goes to stderr with ours: stdout is the JSON line alone.
        done = subprocess.run(
            [os.path.join(ROOT, "container", step[0]), *step[1:]], cwd=ROOT, stdout=sys.stderr, timeout=3600
        )
        if done.returncode != 0:
            raise SystemExit(f"container/{step[0]} failed (exit {done.returncode}); see its output above")


def container_groups() -> dict[str, list[int]]:
    """Each running container's processes with its containerd shim, by container id."""
    children = children_of()
    groups = {}
    for pid in children.get(1, []):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and b"containerd-shim" in argv[0] and b"-id" in argv:
            groups[argv[argv.index(b"-id") + 1].decode()] = descendants(pid, children)
    return groups


def containers_made(image: str, since: float, until: float) -> set[str]:
    """The ids of the containers made from ``image`` in that time (the engine's own record)."""
    import docker

    client = docker.from_env()
    try:
        events = client.events(
            since=int(since), until=int(until) + 1, filters={"type": "container", "event": "create"}, decode=True
        )
        return {e["id"] for e in events if e.get("Actor", {}).get("Attributes", {}).get("image") == image}
    finally:
        client.close()


class PeakMemory:
    """The largest PSS a path's processes hold together, sampled in a thread while it runs."""

    def __init__(self, groups: Callable[[], dict[str, list[int]]]) -> None:
        self._groups = groups
        self._stop = threading.Event()
        self.samples: list[dict[str, int]] = []  # each look: group -> PSS in KiB
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while True:  # a look at once, then one every SAMPLE_EVERY_S, and a last one when stopped
            self.samples.append({g: memory_kb(pids)[1] for g, pids in self._groups().items()})
            if self._stop.is_set() or self._stop.wait(SAMPLE_EVERY_S):
                break

    def peak_mb(self, keep: Callable[[str], bool] = lambda _: True) -> float:
        return round(max((sum(v for g, v in s.items() if keep(g)) for s in self.samples), default=0) / 1024, 1)


# --- the run ------------------------------------------------------------------------------------------


def summary(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for snippet, xs in path.samples.items():
        out[f"{snippet}_p50_ms"] = round(statistics.median(xs), 2)
        out[f"{snippet}_p99_ms"] = round(pct(xs, 99), 2)
        out[f"{snippet}_samples"] = len(xs)
    return out


async def one_round(path: Path, solution: str, checks: ExerciseChecks, repeat: int, loops: int) -> None:
    """``repeat`` of each snippet (``loops`` of the 200 ms loop), and as many graded runs on fresh seeds."""
    for _ in range(repeat):
        for snippet, code in (("trivial", TRIVIAL), ("solution", solution)):
            await asyncio.sleep(SPACING_S)
            expect_ok(path.name, snippet, await path.timed(snippet, path.run(code)))
        for snippet, job in path.extra.items():
            await asyncio.sleep(SPACING_S)
            expect_ok(path.name, snippet, await path.timed(snippet, job()))
        seed = secrets.randbits(63)
        await path.prepare_seed(checks, seed)
        await asyncio.sleep(SPACING_S)
        expect_ok(path.name, "graded", await path.timed("graded", path.graded(solution, checks, seed)), graded=True)
    for _ in range(loops):
        await asyncio.sleep(SPACING_S)
        expect_ok(path.name, "loop", await path.timed("loop", path.run(LOOP)))


async def burst(path: Path, jobs: int) -> tuple[float, PeakMemory]:
    """``jobs`` trivial jobs submitted at once: jobs per second, and the memory held meanwhile."""
    with PeakMemory(path.memory_pids) as memory:
        started = time.perf_counter()
        results = await asyncio.gather(*[path.run(TRIVIAL) for _ in range(jobs)])
        elapsed = time.perf_counter() - started
    for result in results:
        expect_ok(path.name, "burst", result)
    return jobs / elapsed, memory


async def main(args: argparse.Namespace) -> dict[str, Any]:
    course = load_valid(os.path.join(ROOT, "lessons"), os.path.join(ROOT, "locales")).english
    lesson = next((x for x in course.lessons if x.id == args.lesson), None)
    if lesson is None or lesson.exercise is None:
        raise SystemExit(f"--lesson {args.lesson!r}: no such lesson with an exercise")
    solution, checks = lesson.exercise.solution, runner_checks.exercise_checks(lesson.exercise)
    wanted = set(args.paths.split(","))
    skipped: dict[str, str] = {}
    paths: list[Path] = []
    closers: list[Callable[[], Awaitable[None]]] = []
    out: dict[str, Any] = {"lesson": lesson.id, "image": args.image, "slots": 2}

    config = dataclasses.replace(RunnerConfig.from_env(os.environ), pool_size=2, queue=args.burst_ours + 8)
    ours_client = await RunnerClient.embedded(config)
    closers.append(ours_client.close)
    assert ours_client._proc is not None
    runner_pid = ours_client._proc.pid

    async def ours_graded(code: str, c: ExerciseChecks, _seed: int) -> RunResult:
        # The runner draws its own secret seed, as for the bot.
        return await ours_client.run(code, limits=LIMITS, checks=c)

    async def ours_run(code: str) -> RunResult:
        return await ours_client.run(code, limits=LIMITS)

    async def nothing(_c: ExerciseChecks, _s: int) -> None:
        return None

    if "ours" in wanted:
        paths.append(
            Path(
                "ours",
                ours_run,
                ours_graded,
                nothing,
                lambda: {"runner": descendants(runner_pid)},
                lambda: descendants(runner_pid),
            )
        )
    try:
        peers = wanted & {"epicbox", "docker"}
        problem = engine_problem() if peers else None
        if problem is not None:
            skipped.update(dict.fromkeys(peers, problem))
            peers = set()
        elif peers and not args.no_build:
            await asyncio.to_thread(build_image, args.image)
        if "epicbox" in peers:
            try:
                box = await Epicbox.start(args.image, 2)
            except SkipPath as e:
                skipped["epicbox"] = str(e)
            else:
                closers.append(box.close)
                refs = ReadyReferences(box.run_job)
                paths.append(
                    Path(
                        "epicbox",
                        box.run,
                        refs.graded,
                        refs.prepare,
                        container_groups,
                        lambda: [],
                        extra={"trivial_bare": lambda: box.run_bare(TRIVIAL)},
                    )
                )
                out["epicbox_client_mb"] = round(memory_kb([box.proc.pid])[1] / 1024, 1)
        if "docker" in peers:
            dk = docker_backend.DockerBackend(
                docker_backend.DockerConfig(image=args.image, pool_size=2, queue=args.burst_peers + 8, base_url=None)
            )
            await dk.start()
            closers.append(dk.close)
            # The backend's own job runner: a container per job, exactly as RUNNER_BACKEND=docker runs it.
            refs_dk = ReadyReferences(dk._run_in_slot)

            async def docker_run(code: str) -> RunResult:
                return await dk.run(code, LIMITS)

            paths.append(Path("docker", docker_run, refs_dk.graded, refs_dk.prepare, container_groups, lambda: []))

        started_at = time.time()
        for path in paths:  # warm-up, untimed: images in the page cache, the pool's first jobs
            await path.run(TRIVIAL)
        for r in range(args.rounds):
            order = paths[r % len(paths) :] + paths[: r % len(paths)]
            log(f"round {r + 1}/{args.rounds}")
            for path in order:
                ours = path.name == "ours"
                await one_round(path, solution, checks, args.ours_per_round if ours else 1, 2 if ours else 1)

        results: dict[str, Any] = {}
        for path in paths:
            ours = path.name == "ours"
            log(f"{path.name}: {args.burst_ours if ours else args.burst_peers} jobs at once")
            jobs_per_s, memory = await burst(path, args.burst_ours if ours else args.burst_peers)
            figures = summary(path)
            figures["jobs_per_s"] = round(jobs_per_s, 2)
            if ours:
                await asyncio.sleep(2.0)  # idle: the pool's sandboxes prepared again, waiting
                figures["idle_mb"] = round(memory_kb(path.idle_pids())[1] / 1024, 1)
                figures["busy_mb"] = memory.peak_mb()
                # How many graded runs found their reference computed ahead (the rest computed it on demand).
                figures["references_taken"] = (await ours_client.request({"op": "info"}, 10)).get("references_taken")
            else:
                made = await asyncio.to_thread(containers_made, args.image, started_at, time.time())
                figures["idle_mb"] = 0.0  # nothing runs between jobs (the engine's daemons are shared)
                figures["busy_mb"] = memory.peak_mb(made.__contains__)
            results[path.name] = figures
    finally:
        for close in reversed(closers):
            await close()

    out["paths"] = results
    out["ratios"] = ratios(results)
    out["targets"] = targets(out["ratios"])
    out["skipped"] = skipped
    out["load_avg_1m"] = round(os.getloadavg()[0], 2)
    out["cpus"] = os.cpu_count()
    return out


def ratios(results: dict[str, Any]) -> dict[str, Any]:
    ours = results.get("ours")
    if ours is None:
        return {}
    out: dict[str, Any] = {}
    for name, figures in results.items():
        if name == "ours":
            continue
        r: dict[str, float] = {}
        for key, value in figures.items():
            if key.endswith("_p50_ms"):
                base = ours.get(key) or ours.get("trivial_p50_ms")  # trivial_bare: against our trivial job
                r[key.removesuffix("_ms")] = round(value / base, 1)
        r["jobs_per_s"] = round(ours["jobs_per_s"] / figures["jobs_per_s"], 1)
        out[name] = r
    return out


def targets(r: dict[str, Any]) -> dict[str, Any]:
    box = r.get("epicbox", {})
    trivial, graded = box.get("trivial_p50"), box.get("graded_p50")
    return {
        "trivial_vs_epicbox_p50": trivial,
        "trivial_ge_100x": None if trivial is None else trivial >= 100,
        "graded_vs_epicbox_p50": graded,
        "graded_ge_50x": None if graded is None else graded >= 50,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds (each: every path, every snippet)")
    parser.add_argument("--ours-per-round", type=int, default=20, help="our samples of each snippet per round")
    parser.add_argument("--burst-ours", type=int, default=200, help="trivial jobs at once, for our jobs/s")
    parser.add_argument("--burst-peers", type=int, default=8, help="trivial jobs at once, for a peer's jobs/s")
    parser.add_argument("--image", default="coursebot-job", help="the job image's tag (built from this checkout)")
    parser.add_argument("--no-build", action="store_true", help="use --image as it is; build nothing")
    parser.add_argument("--paths", default="ours,epicbox,docker", help="which paths to run, comma-separated")
    parser.add_argument("--lesson", default="backward", help="the lesson whose solution and checks are used")
    print(json.dumps(asyncio.run(main(parser.parse_args()))))
