"""Prove the course in the real runner (`coursebot lint --run`): every exercise solvable, every sample as it says.

What is proven, each failure as ``file:line: message``:

- each exercise's solution passes all of its checks, under every seed in SEEDS;
- its starter runs to its end and fails at least one check, and no check errors on it (it cannot read it);
- each translated starter behaves exactly as the English one (same status, output and verdicts), run on the same seed;
- no hard-coded answer passes a check compared with the reference solution (no ``expect``): for each of SEED_PAIRS
  the solution is graded against the reference run on the pair's other seed. A check that passes in every pair
  gives the same value whatever the inputs; a pair where every compared check passes shows inputs that take so
  few values that the answer of one run, hard-coded, passes others;
- each code sample runs (after its hidden ``setup``) and each ``# -> VALUE`` comment holds;
- each drill as its learners meet it: a Parsons drill's author's order passes its own checks; a fill-in prints what
  its ``# ->`` comments say with the right choice and something else (or an error) with every other; a prediction's
  sample prints exactly its right choice.

The seeds are fixed, so a proof gives the same answer every time. ``prove`` proves the whole course (``lint --run``),
``prove_exercise`` one exercise by the same rules.

Runs are cached by content hash (ResultCache): a job's key covers its code, checks and seed and the fingerprint the
runner that ran it reports (its own code and torch, ``RunnerInfo.fingerprint``), so a result is reused only for the
same runner wherever it runs. When that fingerprint is known before the runner starts (the embedded runner's), a
second proof of unchanged lessons starts no runner at all. Only results the code
decides are kept: a run that hit a limit (a timeout on a busy machine) is tried again and never cached.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.course.model import ChoiceDrill, Content, Drill, Exercise, Lesson, ParsonsDrill, Slide, program
from bot.course.runner_checks import drill_checks, exercise_checks
from bot.course.yamlfile import code_line, key_line
from bot.errors import CoursebotError, Problem
from bot.feedback import shown_value
from runner.client import ExerciseChecks, MessageKey, Runner, RunResult, Status

# The seeds a solution must pass on (the first also runs the starters and the samples).
SEEDS = (1, 2, 3)
# Each pair: the seed the solution runs on, and the seed its reference runs on. Sixteen pairs catch inputs with
# two values for sure, and inputs with 25 values (randint(1, 6) weighted) about half the time.
SEED_PAIRS = tuple((seed, seed + 1) for seed in range(11, 171, 10))
# Jobs sent to the runner at once, at most (it may allow fewer: its pool plus its queue).
MAX_IN_FLIGHT = 16
# Results the code alone decides, kept in the cache. A limit hit (timeout, killed, ...) can come from a busy
# machine: such a job is tried ATTEMPTS times, and its result is never cached.
SETTLED = (Status.OK, Status.ERROR)
ATTEMPTS = 2


class ProofError(CoursebotError):
    """The proof could not be carried out (the runner is off, or the cache folder unusable)."""


# Runs one job, as ``Runner.run`` does: (code, checks=..., seed=...) -> its result.
RunsCode = Callable[..., Awaitable[RunResult]]
OpenRunner = Callable[[], AbstractAsyncContextManager[Runner]]


@dataclass(frozen=True)
class Job:
    """One run in the runner: code, the checks that grade it (None: ungraded), and the seed."""

    code: str
    checks: ExerciseChecks | None
    seed: int

    def key(self, fingerprint: str) -> str:
        """Return the job's content hash: what it runs, on what, with which runner."""
        what = [self.code, self.checks.to_dict() if self.checks else None, self.seed, fingerprint]
        return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()


class ResultCache:
    """Run results by job key, one JSON file each in ``folder``; an unreadable or corrupt entry is a miss.

    Nothing is ever invalidated by hand: a changed lesson, check, seed, runner or torch makes a new key.
    Delete the folder to reclaim its space.
    """

    def __init__(self, folder: Path | None):
        self.folder = folder
        if folder is not None:
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ProofError(f"cannot use {folder} as the proof cache: {exc.strerror}") from None

    def get(self, key: str) -> RunResult | None:
        """Return the cached result of the job with ``key``, or None."""
        if self.folder is None:
            return None
        try:
            return RunResult.from_dict(json.loads((self.folder / f"{key}.json").read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, result: RunResult) -> None:
        """Store a result; written to a temporary file and renamed, so a reader never sees half of it."""
        if self.folder is None:
            return
        fd, temporary = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(result.to_dict(), f)
            os.replace(temporary, self.folder / f"{key}.json")
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


# --- code samples and their '# -> VALUE' comments -----------------------------------------------------------------

# '# -> VALUE' after a one-line print(...), or alone on the line right below one (for a value too wide for a phone).
# A value too wide even then goes on over the comment lines right below it, each '#' and four spaces: the printed
# value is the pieces joined with one space ("# -> tensor(10.," and "#    grad_fn=<MulBackward0>)").
_ARROW = re.compile(r"#\s*->")
_TRAILING = re.compile(r"^\s*print\(.*\)\s+# -> (?P<value>.*?)\s*$")
_BELOW = re.compile(r"^\s*# -> (?P<value>.*?)\s*$")
_MORE = re.compile(r"^\s*#    (?P<value>\S.*?)\s*$")
_PRINT = re.compile(r"^\s*print\(.*\)\s*$")


def expectations(code: str) -> tuple[dict[int, str], list[tuple[int, str]]]:
    """Return what each line of ``code`` must print (line -> value) and the misplaced arrow comments (line, why)."""
    expected: dict[int, str] = {}
    misplaced: list[tuple[int, str]] = []
    lines = code.splitlines()
    last: int | None = None  # the print line of the arrow just above, which a continuation line adds to
    for number, line in enumerate(lines, start=1):
        if last is not None and (more := _MORE.match(line)):
            expected[last] += " " + more.group("value")
            continue
        last = None
        if not _ARROW.search(line):
            continue
        if trailing := _TRAILING.match(line):
            expected[number] = trailing.group("value")
            last = number
        elif (below := _BELOW.match(line)) and number > 1 and _PRINT.match(lines[number - 2]):
            expected[number - 1] = below.group("value")
            last = number - 1
        else:
            misplaced.append(
                (number, "a '# -> VALUE' comment must trail a one-line print(...), or stand alone right below one")
            )
    return expected, misplaced


_SAMPLE_MARK = "@@coursebot-sample-result@@ "
# Runs one sample in the sandbox: its prints tagged with the line that made them, then one line of JSON.
_SAMPLE_HARNESS = """\
import builtins, io, json, sys, traceback

def _prove(source, mark):
    real_print, prints, error = builtins.print, [], None

    def tagged_print(*args, **kwargs):
        target = kwargs.pop("file", None)
        if target is not None and target is not sys.stdout:
            return real_print(*args, file=target, **kwargs)
        frame = sys._getframe(1)
        line = frame.f_lineno if frame.f_code.co_filename == "<sample>" else None
        buffer = io.StringIO()
        real_print(*args, file=buffer, **kwargs)
        prints.append([line, buffer.getvalue()])

    builtins.print = tagged_print
    try:
        exec(compile(source, "<sample>", "exec"), {"__name__": "__main__"})
    except BaseException as exc:
        line = exc.lineno if isinstance(exc, SyntaxError) and exc.filename == "<sample>" else None
        for frame, lineno in traceback.walk_tb(exc.__traceback__):
            if frame.f_code.co_filename == "<sample>":
                line = lineno
        error = {"type": type(exc).__name__, "message": str(exc)[:300], "line": line}
    finally:
        builtins.print = real_print
    real_print(mark + json.dumps({"prints": prints, "error": error}))

_prove(%r, %r)
"""


def sample_program(setup: str | None, code: str) -> tuple[str, int]:
    """Return the program that runs a sample in the sandbox, and how many setup lines precede its code."""
    prelude = (setup or "").rstrip("\n")
    source = f"{prelude}\n{code}" if prelude else code
    offset = prelude.count("\n") + 1 if prelude else 0
    return _SAMPLE_HARNESS % (source, _SAMPLE_MARK), offset


def _sample_outcome(result: RunResult) -> dict[str, Any] | None:
    """Return the harness's report from a sample's run ({prints, error}), or None if there is none to trust."""
    lines = [line for line in result.stdout.splitlines() if line.startswith(_SAMPLE_MARK)]
    try:
        report = json.loads(lines[-1][len(_SAMPLE_MARK) :]) if lines else None
    except ValueError:
        return None
    if not isinstance(report, dict) or not isinstance(report.get("prints"), list):
        return None
    prints = report["prints"]
    if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[1], str) for p in prints):
        return None
    error = report.get("error")
    return {"prints": prints, "error": error if isinstance(error, dict) else None}


def sample_problems(where: str, code: str, offset: int, result: RunResult) -> list[tuple[int, str]]:
    """Return (code line, message) for every claim of a sample that its run does not bear out."""
    expected, misplaced = expectations(code)
    found = [(line, f"{where}: {why}") for line, why in misplaced]
    outcome = _sample_outcome(result)
    if outcome is None:
        return [*found, (1, f"{where}: the sample gave no result ({result.status}): {_last_line(result.stderr)}")]
    error = outcome["error"]
    if error is not None:
        line = error.get("line")
        at = line - offset if isinstance(line, int) and line > offset else None
        found.append(
            (
                at or 1,
                f"{where}: {'the setup' if at is None else 'it'} raised {error.get('type')}: {error.get('message')}",
            )
        )
        return found
    printed: dict[int, list[str]] = {}
    order: list[int] = []
    for line, text in outcome["prints"]:
        if isinstance(line, int) and line - offset in expected:
            printed.setdefault(line - offset, []).append(text[:-1] if text.endswith("\n") else text)
            order.append(line - offset)
    for line, value in sorted(expected.items()):
        outputs = printed.get(line, [])
        if len(outputs) != 1:
            found.append((line, f"{where}: the line should print {value!r} once; it printed {len(outputs)} times"))
        elif outputs[0] != value:
            found.append((line, f"{where}: the line prints {outputs[0]!r}, its comment says {value!r}"))
    if order != sorted(order):
        found.append((min(order), f"{where}: the commented lines print out of their order in the code"))
    return found


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


# --- the plan: every job a proof needs, and what to conclude from their results ------------------------------------

Results = Mapping[str, RunResult]  # by job key
Conclusion = Callable[[Results], list[Problem]]


@dataclass
class Plan:
    """The jobs a proof runs and the conclusions it draws from them."""

    fingerprint: str
    jobs: dict[str, Job] = field(default_factory=dict)  # by key
    conclusions: list[Conclusion] = field(default_factory=list)
    exercises: int = 0
    translated_starters: int = 0
    samples: int = 0
    drills: int = 0

    def job(self, code: str, checks: ExerciseChecks | None, seed: int) -> str:
        """Add a job (once, however often it is asked for); return its key."""
        job = Job(code, checks, seed)
        key = job.key(self.fingerprint)
        self.jobs.setdefault(key, job)
        return key


def plan(content: Content, fingerprint: str) -> Plan:
    """Return every job that proves ``content``, and how to read their results."""
    proof = Plan(fingerprint)
    for lesson in content.english.lessons:
        for slide in lesson.slides:
            if slide.code:
                _plan_sample(proof, lesson, slide)
        if lesson.exercise is not None:
            translated = [course.lessons[lesson.number - 1].exercise for course in content.translations.values()]
            _plan_exercise(proof, lesson.exercise, [e for e in translated if e is not None])
        for drill in lesson.drills:
            _plan_drill(proof, drill)
    return proof


def _plan_drill(proof: Plan, drill: Drill) -> None:
    """Prove a drill: what the learner is told is right runs and is right, and every wrong choice is wrong."""
    proof.drills += 1
    where = f"drill '{drill.id}'"
    at = drill.source
    if isinstance(drill, ParsonsDrill):
        graded = proof.job(drill.program, drill_checks(drill), SEEDS[0])

        def parsons(results: Results) -> list[Problem]:
            result = results[graded]
            if result.status is not Status.OK:
                why = f"{result.status}: {_last_line(result.stderr)}"
                return [Problem(at.path, at.line, f"{where}: the author's order stops ({why})")]
            failed = [o.id for o in result.checks if not o.passed]
            return [Problem(at.path, at.line, f"{where}: the author's order fails check '{c}'") for c in failed]

        proof.conclusions.append(parsons)
        return
    # A prediction's sample is one program whatever the choice; a fill-in runs once per choice.
    choices = range(len(drill.choices)) if drill.kind == "fill" else [drill.correct]
    run = {i: proof.job(program(drill.setup, (_filled(drill, i),)), None, SEEDS[0]) for i in choices}
    proof.conclusions.append(lambda results: _choice_problems(drill, {i: results[k] for i, k in run.items()}))


def _filled(drill: ChoiceDrill, choice: int) -> str:
    return drill.code.replace(drill.GAP, drill.choices[choice], 1) if drill.kind == "fill" else drill.code


def _choice_problems(drill: ChoiceDrill, runs: dict[int, RunResult]) -> list[Problem]:
    where, at = f"drill '{drill.id}'", drill.source
    right = runs[drill.correct]
    if right.status is not Status.OK:
        why = f"{right.status}: {_last_line(right.stderr)}"
        return [Problem(at.path, at.line, f"{where}: the code with the right choice stops ({why})")]
    printed = right.stdout.strip()
    if drill.kind == "fill":
        claimed = "\n".join(value for _, value in sorted(expectations(drill.code)[0].items()))
        found = (
            [] if printed == claimed else [f"with the right choice it prints {printed!r}, its comments say {claimed!r}"]
        )
    else:
        found = [] if printed == drill.choices[drill.correct] else [f"it prints {printed!r}, not its right choice"]
    for index, result in runs.items():
        if index == drill.correct:
            continue
        if drill.kind == "fill" and result.status is Status.OK and result.stdout.strip() == printed:
            found.append(f"choice {index + 1} ({drill.choices[index]!r}) fills the gap as well as the right one")
        elif drill.kind == "predict" and drill.choices[index] == printed:
            found.append(f"choice {index + 1} ({drill.choices[index]!r}) is what the sample prints too")
    return [Problem(at.path, at.line, f"{where}: {message}") for message in found]


def _plan_sample(proof: Plan, lesson: Lesson, slide: Slide) -> None:
    assert slide.code is not None
    code = slide.code
    program, offset = sample_program(slide.setup, code)
    job = proof.job(program, None, SEEDS[0])
    proof.samples += 1
    path = slide.source.path
    where = f"slide '{slide.id}'"

    def conclude(results: Results) -> list[Problem]:
        found = sample_problems(where, code, offset, results[job])
        if not found:
            return []  # finding the code's line reads the file again: only for a problem to report
        first = code_line(path, ("slides", f"#{slide.id}"), "code") or slide.source.line
        return [Problem(path, first + line - 1, message) for line, message in found]

    proof.conclusions.append(conclude)


def _plan_exercise(proof: Plan, exercise: Exercise, translations: list[Exercise]) -> None:
    checks = exercise_checks(exercise)
    compared = tuple(check for check in checks.checks if check.from_reference)
    own = [t for t in translations if not t.fallback and t.starter != exercise.starter]
    proof.exercises += 1
    proof.translated_starters += len(own)
    # The solution graded against the reference run on another seed: only the compared checks, which alone
    # take their expected value from the reference.
    pairs = {
        (seed, other): proof.job(
            exercise.solution, ExerciseChecks(compared, reference=exercise.solution, reference_seed=other), seed
        )
        for seed, other in SEED_PAIRS
    }
    proof.conclusions.append(
        _ExerciseProof(
            exercise,
            solutions={seed: proof.job(exercise.solution, checks, seed) for seed in SEEDS},
            starter=proof.job(exercise.starter, checks, SEEDS[0]),
            pairs=pairs if compared else {},
            translated=[(t, proof.job(t.starter, checks, SEEDS[0])) for t in own],
        ).conclude
    )


@dataclass(frozen=True)
class _ExerciseProof:
    """The jobs that prove one exercise (by key), and what their results mean."""

    exercise: Exercise
    solutions: dict[int, str]  # seed -> the solution graded
    starter: str  # the starter graded, on the first seed
    pairs: dict[tuple[int, int], str]  # (seed, reference seed) -> the solution's compared checks, graded
    translated: list[tuple[Exercise, str]]  # each translation with a starter of its own, graded on the first seed

    def conclude(self, results: Results) -> list[Problem]:
        return [
            *self._solution(results),
            *self._starter(results),
            *self._seed_dependence(results),
            *self._translations(results),
        ]

    def _at(self, key: str) -> tuple[str, int]:
        path = self.exercise.source.path
        return path, code_line(path, ("exercise",), key) or self.exercise.source.line

    def _solution(self, results: Results) -> list[Problem]:
        found = []
        for seed, job in self.solutions.items():
            result = results[job]
            if result.status is not Status.OK:
                why = f"{result.status}: {_last_line(result.stderr)}"
                found.append(Problem(*self._at("solution"), f"exercise: the solution stops with seed {seed} ({why})"))
                continue
            for outcome in result.checks:
                if not outcome.passed:
                    if outcome.message_key is MessageKey.SOURCE:  # it reads the code: no value to show
                        why = f"its code does not show {outcome.params.get('kind')} {outcome.params.get('expr')}"
                    else:
                        value = outcome.params.get("got", outcome.params.get("error", outcome.message_key))
                        why = f"got {shown_value(str(value))}"
                    message = f"exercise: the solution fails check '{outcome.id}' with seed {seed}: {why}"
                    found.append(Problem(*self._at("solution"), message))
        return found

    def _starter(self, results: Results) -> list[Problem]:
        result = results[self.starter]
        if result.status is not Status.OK:
            why = f"{result.status}: {_last_line(result.stderr)}"
            messages = [f"exercise: the starter must run to its end, learners start from it ({why})"]
        else:
            # A check that errors on the starter would greet every learner with an error, not with its hint.
            messages = [
                f"exercise: check '{o.id}' cannot read the starter's variables ({o.params.get('error')})"
                for o in result.checks
                if o.message_key is MessageKey.ERROR
            ]
            if result.passed:
                messages.append("exercise: the starter passes every check; it must fail one")
        # Finding the starter's line reads the file again: only for a problem to report.
        return [Problem(*self._at("starter"), message) for message in messages] if messages else []

    def _seed_dependence(self, results: Results) -> list[Problem]:
        """Hard-coded answers: a check the seed never changes, or inputs so narrow that two seeds coincide.

        In each pair the solution is graded against the reference run on another seed, so a check that passes
        there would pass a learner who hard-coded the other seed's value.
        """
        if not self.pairs:
            return []
        path = self.exercise.source.path
        passing = {pair: {o.id for o in results[job].checks if o.passed} for pair, job in self.pairs.items()}
        compared = {o.id for job in self.pairs.values() for o in results[job].checks}
        always = set.intersection(*passing.values())
        found = []
        for check_id in sorted(always):
            line = key_line(path, ("exercise", "checks", f"#{check_id}"), "id") or self.exercise.source.line
            message = (
                f"check '{check_id}': compared with the reference solution, yet its value is the same with every "
                f"seed tried ({len(self.pairs)} pairs): a learner can hard-code it; make the inputs random or give "
                "it an 'expect'"
            )
            found.append(Problem(path, line, message))
        coinciding = [pair for pair, ids in passing.items() if compared and ids == compared]
        # Every pair coinciding means every check is seed-independent, reported above one by one.
        if coinciding and len(coinciding) < len(self.pairs):
            seed, other = coinciding[0]
            line = key_line(path, ("exercise",), "checks") or self.exercise.source.line
            message = (
                f"exercise: the random inputs take too few values: seeds {seed} and {other} give the same value "
                f"for every compared check, so a hard-coded answer passes about 1 run in "
                f"{round(len(self.pairs) / len(coinciding))}; widen the random inputs (a larger torch.randint "
                "range, or torch.rand)"
            )
            found.append(Problem(path, line, message))
        return found

    def _translations(self, results: Results) -> list[Problem]:
        found = []
        for translation, job in self.translated:
            difference = _behaves_differently(results[job], results[self.starter])
            if difference is not None:
                path = translation.source.path
                line = code_line(path, ("exercise",), "starter") or translation.source.line
                message = f"exercise: 'starter' behaves differently from the English one: {difference}"
                found.append(Problem(path, line, message))
        return found


def _behaves_differently(mine: RunResult, english: RunResult) -> str | None:
    """Say how a translated code's run differs from the English code's, or return None if it does not."""
    if mine.status != english.status:
        return f"it ends with {mine.status}, the English with {english.status}"
    if mine.stdout != english.stdout:
        return f"it prints {mine.stdout[:80]!r}, the English {english.stdout[:80]!r}"
    if _last_line(mine.stderr) != _last_line(english.stderr):
        return f"it stops with {_last_line(mine.stderr)!r}, the English with {_last_line(english.stderr)!r}"
    verdicts = {o.id: (o.passed, o.message_key, dict(o.params)) for o in english.checks}
    for outcome in mine.checks:
        if verdicts.get(outcome.id) != (outcome.passed, outcome.message_key, dict(outcome.params)):
            return f"check '{outcome.id}' {'passes' if outcome.passed else 'fails'} differently"
    return None


# --- running a plan ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    """What a proof found, and what it took."""

    problems: list[Problem]
    plan: Plan
    cached: int  # jobs whose result came from the cache

    @property
    def ran(self) -> int:
        return len(self.plan.jobs) - self.cached


async def prove(content: Content, open_runner: OpenRunner, cache: ResultCache, expected: str | None = None) -> Report:
    """Run every job of ``content``'s proof that the cache lacks for the runner ``open_runner`` opens; conclude.

    ``expected`` is the fingerprint that runner will report when it is known before it starts (the embedded
    runner's, ``runner.client.embedded_fingerprint``): if the cache has every job under it, no runner starts.
    Otherwise results are looked up and stored under the fingerprint of the runner that runs them.
    """
    if expected is not None:
        proof, results = _cached(content, expected, cache)
        if len(results) == len(proof.jobs):
            return _conclude(proof, results, cached=len(results))
    async with open_runner() as runner:
        proof, results = _cached(content, runner.info.fingerprint, cache)
        cached_count = len(results)
        missing = {key: job for key, job in proof.jobs.items() if key not in results}
        if missing:
            await run_jobs(runner, missing, cache, results)
    return _conclude(proof, results, cached=cached_count)


def _cached(content: Content, fingerprint: str, cache: ResultCache) -> tuple[Plan, dict[str, RunResult]]:
    """Return the proof of ``content`` on the runner with ``fingerprint``, and the results the cache has of it."""
    proof = plan(content, fingerprint)
    return proof, {key: result for key in proof.jobs if (result := cache.get(key)) is not None}


def _conclude(proof: Plan, results: Results, cached: int) -> Report:
    problems = [problem for conclude in proof.conclusions for problem in conclude(results)]
    return Report(problems, proof, cached=cached)


async def prove_exercise(exercise: Exercise, run: RunsCode) -> list[Problem]:
    """Prove one exercise by the rules ``prove`` applies to each, running its jobs with ``run`` (no cache)."""
    proof = Plan(fingerprint="")
    _plan_exercise(proof, exercise, [])
    keys = list(proof.jobs)
    done = await asyncio.gather(*(run(job.code, checks=job.checks, seed=job.seed) for job in proof.jobs.values()))
    results = dict(zip(keys, done, strict=True))
    return [problem for conclude in proof.conclusions for problem in conclude(results)]


async def run_jobs(runner: Runner, jobs: dict[str, Job], cache: ResultCache, results: dict[str, RunResult]) -> None:
    """Run ``jobs`` as many at once as the runner takes without refusing; cache each result as it comes."""
    room = runner.info.size + runner.info.queue
    gate = asyncio.Semaphore(max(1, min(MAX_IN_FLIGHT, room)))

    async def one(key: str, job: Job) -> None:
        for _attempt in range(ATTEMPTS):
            async with gate:
                result = await runner.run(job.code, checks=job.checks, seed=job.seed)
            if result.status in SETTLED:
                cache.put(key, result)  # kept even if a later job fails: the next proof resumes here
                break
        results[key] = result

    try:
        async with asyncio.TaskGroup() as group:
            for key, job in jobs.items():
                group.create_task(one(key, job))
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None
