"""bot.authoring.proof (`coursebot lint --run`): exercises and code samples proven in the real runner, cached by hash.

One embedded runner (the real sandbox) serves the module; each test proves a copy of the lessons with one fault
put in, and checks that exactly that fault is reported at its file and line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from bot.authoring import proof
from bot.course.model import Content
from bot.library.load import lint
from runner.client import Runner, RunnerClient, RunnerConfig, RunResult, embedded_fingerprint
from tests.test_cli import line_of

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "lessons"
LOCALES = ROOT / "locales"

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="the runner's sandbox needs bubblewrap (apt-get install -y bubblewrap)"
)
module_loop = pytest.mark.asyncio(loop_scope="module")  # the tests share one embedded runner


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def runner() -> AsyncIterator[RunnerClient]:
    async with RunnerClient.embedded(RunnerConfig()) as client:
        yield client


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory) -> Path:
    """One cache for the module: a copy with one fault in it reruns only the jobs the fault touches."""
    return tmp_path_factory.mktemp("proofs")


class Opener:
    """Opens the module's runner for a proof, and counts how often a proof needed it."""

    def __init__(self, client: RunnerClient | None):
        self.client = client
        self.opened = 0

    @contextlib.asynccontextmanager
    async def __call__(self) -> AsyncIterator[Runner]:
        self.opened += 1
        if self.client is None:
            raise AssertionError("the proof started a runner although every result was cached")
        yield self.client


@pytest.fixture
def lessons(tmp_path: Path) -> Path:
    target = tmp_path / "lessons"
    shutil.copytree(LESSONS / "en", target / "en")
    return target


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} is not in {path}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def load(lessons: Path) -> Content:
    content, problems = lint(lessons, LOCALES)
    assert content is not None and not problems, problems
    return content


# What `coursebot lint --run` expects of the embedded runner before it starts it (the module's runner is one).
EXPECTED = embedded_fingerprint(RunnerConfig())


async def prove(lessons: Path, client: RunnerClient | None, cache: Path) -> proof.Report:
    return await proof.prove(load(lessons), Opener(client), proof.ResultCache(cache), EXPECTED)


@module_loop
async def test_the_shipped_lessons_prove_clean(runner):
    # The cache `coursebot lint --run` keeps in the project: cheap after make test's own proof.
    report = await proof.prove(
        load(LESSONS), Opener(runner), proof.ResultCache(ROOT / ".cache" / "coursebot" / "proofs"), EXPECTED
    )
    assert [str(p) for p in report.problems] == []
    assert report.plan.exercises == 4 and report.plan.samples >= 40
    content = load(LESSONS)
    english = {lesson.number: lesson.exercise for lesson in content.english.lessons}
    assert report.plan.translated_starters == sum(  # a starter the translation left as the English is not rerun
        not lesson.exercise.fallback and lesson.exercise.starter != english[lesson.number].starter
        for course in content.translations.values()
        for lesson in course.lessons
        if lesson.exercise is not None and english[lesson.number] is not None
    )


@module_loop
async def test_a_solution_that_fails_a_check_is_reported_at_the_solution_with_the_check_and_seed(
    lessons, runner, shared_cache
):
    path = lessons / "en" / "01-requires-grad.yaml"
    # After the solution's last line (a slide indents it more): `w` is no longer the leaf that requires grad.
    edit(path, "\n    d = y.detach()\n", "\n    d = y.detach()\n    w = w * 1\n")
    report = await prove(lessons, runner, shared_cache)
    solution = line_of(path, "solution: |") + 1
    assert [str(p) for p in report.problems] == [
        f"{path}:{solution}: exercise: the solution fails check 'w-tracked' with seed {seed}: got False"
        for seed in proof.SEEDS
    ]


@module_loop
async def test_a_starter_that_passes_or_crashes_is_reported_at_the_starter(lessons, runner, shared_cache):
    passing = lessons / "en" / "03-grad.yaml"
    # The steps in a right order (the gradient cleared after each step): the starter solves the exercise.
    edit(
        passing,
        "        opt.step()\n        loss.backward()\n",
        "        loss.backward()\n        opt.step()\n        opt.zero_grad()\n",
    )
    crashing = lessons / "en" / "04-no-grad.yaml"
    edit(
        crashing,
        "    pred = w * 2  # the prediction\n",
        "    pred = w * 2  # the prediction\n    1 / 0\n",
    )
    report = await prove(lessons, runner, shared_cache)
    assert [str(p) for p in report.problems] == [
        f"{passing}:{line_of(passing, 'starter: |') + 1}: exercise: the starter passes every check; it must fail one",
        f"{crashing}:{line_of(crashing, 'starter: |') + 1}: exercise: the starter must run to its end, learners "
        "start from it (error: ZeroDivisionError: division by zero)",
    ]


@module_loop
async def test_a_translated_starter_that_behaves_unlike_the_english_is_reported(lessons, runner, shared_cache):
    english = lessons / "en" / "01-requires-grad.yaml"
    edit(
        english,
        "    d = y  # y, cut off from the graph\n",
        "    d = y\n    print(__import__('sys')._getframe().f_lineno)\n",
    )
    starter = yaml.safe_load(english.read_text(encoding="utf-8"))["exercise"]["starter"]
    printed = starter.splitlines().index("print(__import__('sys')._getframe().f_lineno)") + 1
    translation = lessons / "ru" / "01-requires-grad.yaml"
    translation.parent.mkdir()
    # The same tokens (static lint accepts it), but a comment line more: the line number printed changes.
    translated = starter.replace("d = y\n", "# лишняя строка комментария\nd = y\n")
    translation.write_text(
        "lesson: requires-grad\n"
        "exercise:\n"
        "  title: Отследи и отцепи\n"
        "  instructions: Сделай `w` листом.\n"
        "  starter: |\n"
        + "".join(f"    {line}\n" for line in translated.splitlines())
        + "  hints: [Подсказка один., Подсказка два., Подсказка три.]\n"
        "  checks:\n"
        "    - {id: w-tracked, fail: нет}\n"
        '    - {id: y-recorded, fail: "{got}, а не {expected}"}\n'
        '    - {id: d-value, fail: "{got}, а не {expected}"}\n'
        "    - {id: tracking-on, fail: нет}\n"
        "    - {id: cut-loose, fail: нет}\n",
        encoding="utf-8",
    )
    report = await prove(lessons, runner, shared_cache)
    assert [str(p) for p in report.problems] == [
        f"{translation}:6: exercise: 'starter' behaves differently from the English one: "
        f"it prints '{printed + 1}\\n', the English '{printed}\\n'"
    ]
    assert report.plan.translated_starters == 1


@module_loop
async def test_inputs_that_take_few_values_are_reported_at_the_checks(lessons, runner, shared_cache):
    path = lessons / "en" / "01-requires-grad.yaml"
    # Starter and solution (a slide indents its code more) make `w` one whole number, 1 or 2.
    text, made = re.subn(
        r"^    w = torch\..*$",
        "    w = torch.randint(1, 3, (1,)).float()",
        path.read_text(encoding="utf-8"),
        flags=re.M,
    )
    assert made == 2
    path.write_text(text, encoding="utf-8")
    report = await prove(lessons, runner, shared_cache)
    [problem] = report.problems
    assert (problem.path, problem.line) == (str(path), line_of(path, "  checks:", after="exercise:"))
    assert problem.message.startswith("exercise: the random inputs take too few values: seeds ")
    assert "a hard-coded answer passes about 1 run in " in problem.message, problem.message


@module_loop
async def test_a_wrong_arrow_comment_is_reported_at_its_own_line(lessons, runner, shared_cache):
    path = lessons / "en" / "02-backward.yaml"
    edit(path, "      print(b.grad)  # -> tensor(3.)\n", "      print(b.grad)  # -> tensor(4.)\n")
    report = await prove(lessons, runner, shared_cache)
    assert [str(p) for p in report.problems] == [
        f"{path}:{line_of(path, 'print(b.grad)  # -> tensor(4.)')}: slide 'check-by-hand': the line prints "
        "'tensor(3.)', its comment says 'tensor(4.)'"
    ]


@module_loop
async def test_a_drill_that_is_not_what_it_tells_the_learner_is_reported_at_the_drill(lessons, runner, shared_cache):
    # A wrong choice that works, a prediction of what the sample does not print, an author's order that fails.
    grad = lessons / "en" / "03-grad.yaml"
    edit(grad, "      - text: x.zero_()\n", "      - text: x.grad = (None)\n")
    edit(grad, '      - text: "-1.2"\n', '      - text: "-1.3"\n')
    backward = lessons / "en" / "02-backward.yaml"
    edit(
        backward,
        "        expr: w.grad\n        kind: close\n",
        "        expr: w.grad\n        kind: close\n        expect: 0\n",
    )
    report = await prove(lessons, runner, shared_cache)
    assert report.plan.drills == 12
    assert sorted(str(p) for p in report.problems) == sorted(
        [
            f"{backward}:{line_of(backward, '- id: loss-to-grads')}: drill 'loss-to-grads': the author's order "
            "fails check 'w-grad'",
            f"{grad}:{line_of(grad, '- id: clear-guard')}: drill 'clear-guard': choice 3 ('x.grad = (None)') "
            "fills the gap as well as the right one",
            f"{grad}:{line_of(grad, '- id: no-clear')}: drill 'no-clear': it prints '-1.2', not its right choice",
        ]
    )


# Each sample against what the checker must say of it: (setup, code, the problems as (code line, message end)).
SAMPLES = {
    "right": ("x = 2", "print(x + 1)  # -> 3", []),
    "right below": (None, "print(3)\n# -> 3", []),
    "wrong value": (None, "print(1 + 1)  # -> 3", [(1, "the line prints '2', its comment says '3'")]),
    "wrong value below": (None, "x = 1\nprint(x)\n# -> 3", [(2, "the line prints '1', its comment says '3'")]),
    "never printed": (None, "if False:\n    print(1)  # -> 1", [(2, "should print '1' once; it printed 0 times")]),
    "printed twice": (
        None,
        "for i in range(2):\n    print(7)  # -> 7",
        [(2, "should print '7' once; it printed 2 times")],
    ),
    "raises": (None, "x = 1\nprint(x / 0)  # -> 0", [(2, "it raised ZeroDivisionError: division by zero")]),
    "setup raises": ("import nothing_here", "print(1)  # -> 1", [(1, "the setup raised ModuleNotFoundError")]),
    "out of order": (
        None,
        "def f():\n    print('a')  # -> a\nprint('b')  # -> b\nf()",
        [(2, "the commented lines print out of their order in the code")],
    ),
    "misplaced": (None, "x = 3  # -> 3", [(1, "a '# -> VALUE' comment must trail a one-line print(...)")]),
    "extra line": (None, "print('a\\nb')  # -> a", [(1, "the line prints 'a\\nb', its comment says 'a'")]),
    "setup lines": (
        "y = 5\nz = 0",
        "print(y)  # -> 5\nprint(y + 1)  # -> 7",
        [(2, "prints '6', its comment says '7'")],
    ),
    "exits": (None, "raise SystemExit(3)\nprint(1)  # -> 1", [(1, "it raised SystemExit: 3")]),
}


@pytest.mark.parametrize("name", SAMPLES)
@module_loop
async def test_the_sample_checker_says_what_is_wrong_at_the_line(name, runner):
    setup, code, wanted = SAMPLES[name]
    program, offset = proof.sample_program(setup, code)
    result = await runner.run(program, seed=1)
    found = proof.sample_problems("slide 's'", code, offset, result)
    assert len(found) == len(wanted), found
    for (line, message), (wanted_line, ending) in zip(found, wanted, strict=True):
        assert line == wanted_line and message.startswith("slide 's': ") and ending in message, (line, message)


@module_loop
async def test_a_second_proof_of_unchanged_lessons_starts_no_runner_and_a_change_reruns_only_its_job(
    lessons, runner, shared_cache, tmp_path
):
    cache = tmp_path / "cache"
    shutil.copytree(shared_cache, cache)  # whatever earlier tests proved: this test needs no runs of its own
    first = await prove(lessons, runner, cache)
    assert first.problems == [] and first.cached + first.ran == len(first.plan.jobs)
    second = await prove(lessons, None, cache)  # the opener fails the test if it is used
    assert second.cached == len(second.plan.jobs) and second.ran == 0 and second.problems == []
    edit(
        lessons / "en" / "02-backward.yaml",
        "      print(a.grad)  # -> tensor(5.)\n",
        "      print(a.grad)  # -> tensor(5.)\n\n",
    )
    third = await prove(lessons, runner, cache)
    assert third.ran == 1 and third.problems == []


@module_loop
async def test_a_corrupt_cache_entry_is_run_again(lessons, runner, shared_cache, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(shared_cache, cache)
    report = await prove(lessons, runner, cache)
    entry = cache / f"{next(iter(report.plan.jobs))}.json"
    entry.write_text('{"status": "ok", "stdout"', encoding="utf-8")
    again = await prove(lessons, runner, cache)
    assert again.ran == 1 and again.problems == []


def test_a_job_key_changes_with_its_code_checks_seed_and_runner():
    base = proof.Job("print(1)", None, 1)
    keys = {
        base.key("runner-a"),
        proof.Job("print(2)", None, 1).key("runner-a"),
        proof.Job("print(1)", None, 2).key("runner-a"),
        base.key("runner-b"),
    }
    assert len(keys) == 4
    assert base.key("runner-a") == proof.Job("print(1)", None, 1).key("runner-a")


@pytest.mark.parametrize(
    ("value", "flagged"),
    [("torch.tensor(6.0)", True), ("torch.rand(()) + 5.5", False)],
)
@module_loop
async def test_a_reference_compared_check_whose_value_ignores_the_seed_is_flagged(
    lessons, runner, shared_cache, value, flagged
):
    path = lessons / "en" / "01-requires-grad.yaml"
    edit(path, "\n    d = y.detach()\n", f"\n    d = ({value}).detach()\n")  # detach() stays: the source check
    report = await prove(lessons, runner, shared_cache)
    messages = [str(p) for p in report.problems]
    if flagged:
        assert messages == [
            f"{path}:{line_of(path, '- id: d-value')}: check 'd-value': compared with the reference solution, yet its "
            f"value is the same with every seed tried ({len(proof.SEED_PAIRS)} pairs): a learner can hard-code it; "
            "make the inputs random or give it an 'expect'"
        ]
    else:
        assert messages == []


@module_loop
async def test_a_run_that_hits_a_limit_is_tried_again_and_never_cached(runner, tmp_path):
    cache = proof.ResultCache(tmp_path / "cache")
    settled, looping = proof.Job("print(1)", None, 1), proof.Job("while True:\n    pass", None, 1)
    jobs = {job.key("f"): job for job in (settled, looping)}
    results: dict[str, RunResult] = {}
    before = (await runner.request({"op": "info"}))["jobs_done"]
    await proof.run_jobs(runner, jobs, cache, results)
    # The busy loop meets the CPU limit (or, on a loaded machine, the clock's): a limit either way.
    assert results[settled.key("f")].status == "ok" and results[looping.key("f")].status in ("cpu_limit", "timeout")
    assert cache.get(settled.key("f")) is not None and cache.get(looping.key("f")) is None
    assert (await runner.request({"op": "info"}))["jobs_done"] - before == 1 + proof.ATTEMPTS


@module_loop
async def test_the_embedded_runner_reports_the_fingerprint_lint_expects_of_it_before_starting_it(runner):
    assert EXPECTED is not None and runner.info.fingerprint == EXPECTED


class Elsewhere:
    """The module's runner as a runner elsewhere (tcp://, Docker) would show itself: another fingerprint."""

    def __init__(self, client: RunnerClient, fingerprint: str):
        self._client = client
        self.info = dataclasses.replace(client.info, fingerprint=fingerprint)

    async def run(self, *args: object, **kwargs: object) -> RunResult:
        return await self._client.run(*args, **kwargs)  # type: ignore[arg-type]


@module_loop
async def test_results_are_cached_under_the_runner_that_ran_them_not_the_one_expected(lessons, runner, tmp_path):
    # Lesson 1 alone: a proof that reruns everything stays short.
    edit(lessons / "en" / "course.yaml", "  - 02-backward\n  - 03-grad\n  - 04-no-grad\n", "")
    for later in ("02-backward", "03-grad", "04-no-grad"):
        (lessons / "en" / f"{later}.yaml").unlink()
    cache = tmp_path / "cache"
    content = load(lessons)

    @contextlib.asynccontextmanager
    async def open_elsewhere() -> AsyncIterator[Elsewhere]:
        yield Elsewhere(runner, "elsewhere")

    first = await proof.prove(content, open_elsewhere, proof.ResultCache(cache), EXPECTED)
    assert first.cached == 0 and first.problems == []
    # The cache holds nothing under the fingerprint expected (the local checkout's): the next proof opens the
    # runner, learns it is "elsewhere" again, and finds every result there.
    second = await proof.prove(content, open_elsewhere, proof.ResultCache(cache), EXPECTED)
    assert second.cached == len(second.plan.jobs) and second.ran == 0
    # The local embedded runner ran none of them: its own proof runs every job.
    third = await proof.prove(content, Opener(runner), proof.ResultCache(cache), EXPECTED)
    assert third.cached == 0 and third.problems == []
