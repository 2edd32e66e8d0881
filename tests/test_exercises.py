"""The practice exercises at the end of each lesson in lessons/en/.

Every exercise's ``solution`` must pass all its checks and its ``starter``
must run cleanly yet fail at least one, graded the way the runner grades a
learner: the code runs first, then ``runner.grading`` extracts each check's
expression from the namespace into a nonce-stamped report (in a child
process, the only place torch is imported), and the verdict is decided here,
outside, by ``runner.grading.verify`` against the hidden ``expect`` values.

All exercises run in ONE subprocess per test session; this process hosts the
bot in other tests and must never import torch.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from runner import grading

ROOT = Path(__file__).resolve().parent.parent
EN = ROOT / "lessons" / "en"
TIMEOUT = 180  # seconds for the one subprocess

HINTS_MIN, HINTS_MAX = 1, 3
CHECKS_MIN, CHECKS_MAX = 1, 4
ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
# What {got} may look like when the bot fills it in.
SAMPLE_GOTS = ("tensor(8.)", "8.0", "tensor([4., 8.])", "None", "NameError", "<function>")

# Likely wrong answers and the checks each must fail (and only those): every
# check is there to catch a particular mistake.
T = "import torch\n"
MISTAKES: dict[str, list[tuple[str, set[str]]]] = {
    "01-requires-grad": [
        (T + "w = torch.tensor(2.0)\ny = w * 3\nw.requires_grad_()\nd = y.detach()\n", {"y-recorded"}),
        (T + "w = torch.tensor(2.0, requires_grad=True)\ny = w * 3\nd = y\n", {"d-detached"}),
        (T + "w = torch.tensor(2.0, requires_grad=True)\ny = w * 3\nd = w.detach()\n", {"d-value"}),
    ],
    "02-backward": [
        (
            T + "x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)\ny = x ** 2\n"
            "v = torch.tensor([1.0, 0.0, 0.5])\ny.backward(gradient=v, retain_graph=True)\n"
            "first = x.grad\ny.backward(gradient=v)\n",
            {"first-pass"},
        ),
        (
            T + "x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)\ny = x ** 2\n"
            "v = torch.tensor([1.0, 0.0, 0.5])\ny.backward(gradient=v)\nfirst = x.grad.clone()\n",
            {"second-pass"},
        ),
        (
            T + "x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)\ny = x ** 2\n"
            "v = torch.tensor([1.0, 0.0, 0.5])\ny.sum().backward(retain_graph=True)\n"
            "first = x.grad.clone()\ny.sum().backward()\n",
            {"first-pass", "second-pass"},
        ),
    ],
    "03-grad": [
        (
            T + "x = torch.tensor(2.0, requires_grad=True)\ngrads = []\nfor step in range(2):\n"
            "    loss = x ** 2\n    loss.backward()\n    grads.append(x.grad.item())\n"
            "    x.grad = None\n",
            {"grad-value"},
        ),
        (
            T + "x = torch.tensor(2.0, requires_grad=True)\ngrads = []\n"
            "loss = x ** 2\nloss.backward()\ngrads.append(x.grad.item())\n",
            {"grads-per-step"},
        ),
    ],
    "04-no-grad": [
        (
            T + "w = torch.tensor(1.0, requires_grad=True)\nloss = (w - 3) ** 2\nloss.backward()\n"
            "with torch.no_grad():\n    w = w - 0.5 * w.grad\n    pred = w * 2\n",
            {"w-leaf"},
        ),
        (
            T + "w = torch.tensor(1.0, requires_grad=True)\nloss = (w - 3) ** 2\nloss.backward()\n"
            "with torch.no_grad():\n    w -= 0.5 * w.grad\npred = w * 2\n",
            {"pred-untracked"},
        ),
        (
            T + "w = torch.tensor(1.0, requires_grad=True)\nloss = (w - 3) ** 2\nloss.backward()\n"
            "with torch.no_grad():\n    w += 0.5 * w.grad\n    pred = w * 2\n",
            {"w-value", "pred-value"},
        ),
    ],
}

# Runs in the child: argv[1] = JSON list of jobs, argv[2] = where to write
# the results.  A job is {"code", "spec"} where spec is grading.job_spec().
CHILD = r"""
import builtins, contextlib, io, json, os, sys, tempfile, traceback

from runner import grading

grading.capture_pristine()   # before any exercise code exists, like the zygote
import torch

with open(sys.argv[1], encoding="utf-8") as f:
    jobs = json.load(f)
results = []
for job in jobs:
    ns = {"__name__": "__main__", "__builtins__": builtins}
    out = io.StringIO()
    error = None
    try:
        code = compile(job["code"], "<exercise>", "exec", dont_inherit=True)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            exec(code, ns)
    except BaseException as exc:
        error = "".join(traceback.format_exception_only(type(exc), exc)).strip()[:500]
    report = None
    if error is None:
        # The real report path: write_report() into a descriptor, then read it.
        fd, path = tempfile.mkstemp()
        try:
            grading.write_report(fd, ns, job["spec"])
            with open(path, "rb") as r:
                report = r.read().decode("utf-8")
        finally:
            os.unlink(path)
    torch.set_grad_enabled(True)   # an exercise left inside no_grad must not leak
    results.append({"error": error, "report": report, "output": out.getvalue()[-2000:]})
with open(sys.argv[2], "w", encoding="utf-8") as f:
    json.dump(results, f)
"""


# --------------------------------------------------------------------------
# Loading


def lesson_files() -> list[Path]:
    return sorted(p for p in EN.glob("*.yaml") if p.name != "course.yaml")


LESSON_FILES = lesson_files()
STEMS = [p.stem for p in LESSON_FILES]


def exercise_of(stem: str) -> dict:
    with (EN / f"{stem}.yaml").open(encoding="utf-8") as f:
        data = yaml.safe_load(f)
    ex = data.get("exercise")
    assert isinstance(ex, dict), f"{stem}.yaml has no exercise section"
    return ex


def kind_of(check: dict) -> str:
    # Unquoted `kind: true` is a YAML boolean; the bot's loader reads it as the word.
    kind = check.get("kind")
    return "true" if kind is True else str(kind)


def checks_of(ex: dict) -> grading.ExerciseChecks:
    return grading.ExerciseChecks(
        tuple(
            grading.Check(id=c["id"], expr=str(c["expr"]), kind=kind_of(c), expect=c.get("expect"))
            for c in ex["checks"]
        )
    )


def is_plain(value, depth: int = 0) -> bool:
    """JSON-like data only: what the runner can compare without torch."""
    if depth > grading.MAX_DEPTH:
        return False
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(is_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return (
            all(isinstance(k, str) for k in value)
            and not any(k.startswith("__") for k in value)
            and all(is_plain(v, depth + 1) for v in value.values())
        )
    return False


def numeric(value) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    return isinstance(value, list) and bool(value) and all(numeric(v) for v in value)


# --------------------------------------------------------------------------
# One subprocess grades every solution and starter


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[tuple[str, str], dict]:
    """(stem, "solution" | "starter" | "mistake-N") -> {error, output, outcomes, passed}."""
    base = tmp_path_factory.mktemp("exercises")
    keys, jobs, contexts = [], [], []
    for stem in STEMS:
        ex = exercise_of(stem)
        checks = checks_of(ex)
        variants = [("solution", ex["solution"]), ("starter", ex["starter"])]
        variants += [(f"mistake-{i}", code) for i, (code, _) in enumerate(MISTAKES.get(stem, []))]
        for variant, code in variants:
            nonce = grading.new_nonce()
            keys.append((stem, variant))
            jobs.append({"code": code, "spec": grading.job_spec(checks, nonce)})
            contexts.append((checks, nonce))
    in_file, out_file = base / "jobs.json", base / "results.json"
    in_file.write_text(json.dumps(jobs), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(in_file), str(out_file)],
        cwd=str(ROOT),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0 and out_file.exists(), (
        f"exercise runner failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    )
    results = json.loads(out_file.read_text(encoding="utf-8"))
    assert len(results) == len(jobs)

    graded = {}
    for key, (checks, nonce), result in zip(keys, contexts, results, strict=False):
        status = "ok" if result["error"] is None else "error"
        raw = result["report"].encode("utf-8") if result["report"] is not None else None
        outcomes, passed = grading.verify(checks, status, raw, nonce)
        graded[key] = {**result, "outcomes": {o.id: o for o in outcomes}, "passed": passed}
    return graded


def describe(run: dict) -> str:
    lines = [f"error: {run['error']}"] if run["error"] else []
    for o in run["outcomes"].values():
        lines.append(f"  {o.id}: {'pass' if o.passed else 'FAIL'} {o.message_key} {dict(o.params)}")
    if run["output"]:
        lines.append(f"  output: {run['output']!r}")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# The verdicts


def test_every_lesson_has_an_exercise():
    assert STEMS
    for stem in STEMS:
        exercise_of(stem)


@pytest.mark.parametrize("stem", STEMS)
def test_solution_passes_every_check(stem, graded):
    run = graded[(stem, "solution")]
    assert run["error"] is None, f"{stem}: the solution raised:\n{run['error']}"
    assert run["passed"], f"{stem}: the solution fails:\n{describe(run)}"
    assert all(o.passed for o in run["outcomes"].values())


@pytest.mark.parametrize("stem", STEMS)
def test_starter_runs_but_fails_a_check(stem, graded):
    run = graded[(stem, "starter")]
    assert run["error"] is None, f"{stem}: the starter must run, it raised:\n{run['error']}"
    assert not run["passed"], f"{stem}: the starter already passes:\n{describe(run)}"
    failed = [o for o in run["outcomes"].values() if not o.passed]
    assert failed
    # Every check must be able to look at the starter's variables: a check
    # that errors (NameError, AttributeError) shows a generic message, not
    # its own diagnosis.
    errors = [o for o in run["outcomes"].values() if o.message_key == "checks.error"]
    assert not errors, f"{stem}: checks raise on the starter:\n{describe(run)}"


@pytest.mark.parametrize("stem", STEMS)
def test_fail_messages_read_with_what_the_starter_got(stem, graded):
    ex = exercise_of(stem)
    run = graded[(stem, "starter")]
    for check in ex["checks"]:
        outcome = run["outcomes"][check["id"]]
        if not outcome.passed and "got" in outcome.params:
            text = check["fail"].format(got=outcome.params["got"])
            assert "{" not in text and "}" not in text, (stem, check["id"], text)


@pytest.mark.parametrize("stem", STEMS)
def test_each_check_catches_its_mistake(stem, graded):
    ex = exercise_of(stem)
    ids = {c["id"] for c in ex["checks"]}
    mistakes = MISTAKES.get(stem, [])
    assert mistakes, f"{stem}: no known mistakes to grade"
    caught = set()
    for i, (code, should_fail) in enumerate(mistakes):
        assert should_fail <= ids, (stem, should_fail - ids)
        run = graded[(stem, f"mistake-{i}")]
        assert run["error"] is None, f"{stem}: mistake {i} raised:\n{run['error']}"
        failed = {o.id for o in run["outcomes"].values() if not o.passed}
        assert failed == should_fail, f"{stem}: mistake {i}:\n{code}\n{describe(run)}"
        caught |= failed
    starter = graded[(stem, "starter")]
    caught |= {o.id for o in starter["outcomes"].values() if not o.passed}
    assert caught == ids, f"{stem}: checks no mistake trips: {sorted(ids - caught)}"


# --------------------------------------------------------------------------
# The exercise's own shape (no torch needed)


@pytest.mark.parametrize("stem", STEMS)
def test_exercise_fields(stem):
    ex = exercise_of(stem)
    assert set(ex) == {"title", "instructions", "starter", "hints", "checks", "solution"}, set(ex)
    for key in ("title", "instructions", "starter", "solution"):
        assert isinstance(ex[key], str) and ex[key].strip(), f"{stem}: {key} is empty"
    assert ex["starter"].strip() != ex["solution"].strip(), f"{stem}: starter is the solution"


@pytest.mark.parametrize("stem", STEMS)
def test_hints(stem):
    hints = exercise_of(stem)["hints"]
    assert isinstance(hints, list) and HINTS_MIN <= len(hints) <= HINTS_MAX, hints
    for hint in hints:
        assert isinstance(hint, str) and hint.strip(), hints
        assert "\n" not in hint.strip(), f"{stem}: a hint is one line: {hint!r}"
    assert len(set(hints)) == len(hints), f"{stem}: repeated hint"


@pytest.mark.parametrize("stem", STEMS)
def test_checks(stem):
    checks = exercise_of(stem)["checks"]
    assert isinstance(checks, list) and CHECKS_MIN <= len(checks) <= CHECKS_MAX, checks
    ids = [c.get("id") for c in checks]
    assert len(ids) == len(set(ids)), f"{stem}: duplicate check ids {ids}"
    for c in checks:
        at = f"{stem}: check {c.get('id')!r}"
        assert set(c) <= {"id", "expr", "kind", "expect", "fail"}, f"{at}: keys {set(c)}"
        assert isinstance(c["id"], str) and ID_RE.match(c["id"]), f"{at}: id not kebab-case"
        assert isinstance(c["expr"], str) and c["expr"].strip(), f"{at}: no expr"
        compile(c["expr"], "<check>", "eval")
        kind = kind_of(c)
        assert kind in grading.KINDS, f"{at}: kind {kind!r}"
        if kind == "true":
            assert "expect" not in c, f"{at}: kind true takes no expect"
        else:
            assert "expect" in c, f"{at}: missing expect"
            assert is_plain(c["expect"]), f"{at}: expect is not plain data: {c['expect']!r}"
        if kind == "close":
            assert numeric(c["expect"]), f"{at}: close needs a number or list of numbers"
        if kind == "shape":
            assert isinstance(c["expect"], list), f"{at}: shape expects a list"
        if kind == "dtype":
            assert isinstance(c["expect"], str), f"{at}: dtype expects a name like float32"
        # the runner accepts it as it is
        grading.Check(id=c["id"], expr=c["expr"], kind=kind, expect=c.get("expect"))


@pytest.mark.parametrize("stem", STEMS)
def test_fail_messages_format(stem):
    for c in exercise_of(stem)["checks"]:
        fail = c.get("fail")
        assert isinstance(fail, str) and fail.strip(), f"{stem}: {c['id']}: no fail message"
        assert "\n" not in fail.strip(), f"{stem}: {c['id']}: fail is one line"
        for got in SAMPLE_GOTS:
            text = fail.format(got=got)  # no stray braces, no other fields
            assert text.strip() and "{" not in text and "}" not in text
        if kind_of(c) == "true":
            # a `true` check's value is just False: nothing useful to show
            assert "{got}" not in fail, f"{stem}: {c['id']}: {{got}} of a true check is False"
        outside = re.sub(r"`[^`]*`", "", fail)
        assert fail.count("`") % 2 == 0 and outside.count("**") % 2 == 0, f"{stem}: {c['id']}: unclosed markup"


def test_verdict_is_decided_here_without_torch():
    """Also: extraction in the child must not leak torch into this process."""
    assert "torch" not in sys.modules
