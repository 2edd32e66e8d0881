"""The practice exercises at the end of each lesson, graded the way the bot grades a learner: in the REAL sandbox.

Every exercise is proved (bot.authoring.proof.prove_exercise, the rules of `coursebot lint --run`): its solution
passes on several random seeds, its starter runs yet fails, and no hard-coded answer passes a check compared
with the solution.  Known wrong answers each trip exactly the checks meant to catch them, and a correct
answer written another way passes.  The checks are the bot's own (bot.course.runner_checks of the loaded
lessons); this process never imports torch.
"""

from __future__ import annotations

import re
import sys
from dataclasses import replace

import pytest
import pytest_asyncio

from bot.authoring import proof
from bot.course import runner_checks
from runner.client import CHECK_KINDS
from tests.conftest import course_content
from tests.runner_cases.helpers import start_pool

shared_pool = pytest.mark.asyncio(loop_scope="module")  # the runner tests share one pool

COURSE = course_content().english
LESSON_IDS = [lesson.id for lesson in COURSE.lessons]
SEED = 7  # the wrong answers below are graded on one fixed seed

HINTS_MIN, HINTS_MAX = 1, 3
ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")

# Likely wrong answers and the checks each must fail (and only those), or "error" when the code must stop
# with an exception; every check is there to catch a particular mistake.  An empty set: a correct answer
# written another way, which must pass.
T = "import torch\n"
W = T + "w = torch.randint(1, 100, (3,)).float()\n"
X = T + "x = torch.randint(1, 100, (3,)).float()\nx.requires_grad_()\ny = x ** 2\nv = torch.tensor([1.0, 2.0, 0.5])\n"
P = (
    T + "x = torch.rand(3) * 3 + 2\nw = torch.nn.Parameter(torch.zeros(1))\n"
    "opt = torch.optim.SGD([w], lr=0.02)\nlosses = []\nfor step in range(5):\n"
)
G = W + "w.requires_grad_()\nloss = ((w - 3) ** 2).sum()\nloss.backward()\n"
MISTAKES: dict[str, list[tuple[str, set[str] | str]]] = {
    "requires-grad": [
        (W + "w.requires_grad_()\nw = w * 1\ny = w * 3\nd = y.detach()\n", {"w-tracked"}),
        (W + "y = w * 3\nw.requires_grad_()\nd = y.detach()\n", {"y-recorded"}),
        (W + "w.requires_grad_()\ny = w * 3\nd = y\n", {"d-value", "cut-loose"}),
        (W + "w.requires_grad_()\ny = w * 3\nd = y.clone()\n", {"d-value", "cut-loose"}),
        (W + "w.requires_grad_()\ny = w * 3\nd = w.detach()\n", {"d-value"}),
        (W + "w.requires_grad_()\ny = w * 3\nd = torch.tensor([3.0, 6.0, 9.0])\n", {"d-value", "cut-loose"}),
        # No tracking at all: the values of y and d can be computed without it, but not y's place in the graph.
        (W + "y = w * 3\nd = y.detach()\n", {"w-tracked", "y-recorded", "tracking-on"}),
        # The right values cut loose another way: the lesson's concept, detach(), is part of the pass (issue 21).
        (W + "w.requires_grad_()\ny = w * 3\nwith torch.no_grad():\n    d = y * 1\n", {"cut-loose"}),
        (T + "w = torch.randint(1, 100, (3,)).float().requires_grad_()\ny = w * 3\nd = (w * 3).detach()\n", set()),
    ],
    "backward": [
        # The second pass is the mistake the exercise is about: missing, on a freed graph, or too many.
        (X + "y.backward(gradient=v)\n", {"second-pass"}),
        (X + "y.backward(gradient=v)\ny.backward(gradient=v)\n", "error"),
        (X + "for _ in range(4):\n    y = x ** 2\n    y.backward(gradient=v)\n", {"second-pass"}),
        (X + "y.sum().backward()\ny = x ** 2\ny.sum().backward()\n", {"second-pass"}),
        (X + "y.backward(gradient=v, retain_graph=True)\ny.backward(gradient=v)\n", set()),
        (X + "for _ in range(2):\n    (x ** 2 * v).sum().backward()\n", set()),
    ],
    "grad": [
        (
            P + "    pred = w * x\n    loss = ((pred - 2 * x) ** 2).mean()\n    loss.backward()\n    opt.step()\n"
            "    losses.append(loss.item())\n",
            {"losses", "w-trained"},
        ),
        (
            P + "    opt.zero_grad()\n    pred = w * x\n    loss = ((pred - 2 * x) ** 2).mean()\n    opt.step()\n"
            "    loss.backward()\n    losses.append(loss.item())\n",
            {"losses", "w-trained"},
        ),
        (
            P + "    w.grad.zero_()\n    pred = w * x\n    loss = ((pred - 2 * x) ** 2).mean()\n    loss.backward()\n"
            "    opt.step()\n    losses.append(loss.item())\n",
            "error",
        ),
        (
            P + "    pred = w * x\n    loss = ((pred - 2 * x) ** 2).mean()\n    loss.backward()\n    opt.step()\n"
            "    opt.zero_grad()\n    losses.append(loss.item())\n",
            set(),
        ),
        (
            P + "    if w.grad is not None:\n        w.grad.zero_()\n    loss = ((w * x - 2 * x) ** 2).mean()\n"
            "    loss.backward()\n    opt.step()\n    losses.append(loss.item())\n",
            set(),
        ),
    ],
    "no-grad": [
        (G + "with torch.no_grad():\n    w = w - 0.1 * w.grad\n    pred = w * 2\n", {"w-leaf"}),
        (
            G + "with torch.no_grad():\n    w -= 0.1 * w.grad\npred = w * 2\nw.grad = None\n",
            {"pred-value", "pred-no-grad"},
        ),
        (
            G + "with torch.no_grad():\n    w += 0.1 * w.grad\n    pred = w * 2\nw.grad = None\n",
            {"w-value", "pred-value"},
        ),
        (G + "with torch.no_grad():\n    w -= 0.1 * w.grad\n    pred = w * 2\n", {"grad-cleared"}),
        (G + "w -= 0.1 * w.grad\nwith torch.no_grad():\n    pred = w * 2\n", "error"),
        # The right values without the lesson's concept, no_grad() (issue 21): .data and detach() get round it.
        (G + "w.data -= 0.1 * w.grad\npred = (w * 2).detach()\nw.grad = None\n", {"update-no-grad", "pred-no-grad"}),
        (G + "with torch.no_grad():\n    w.sub_(w.grad * 0.1)\n    pred = w * 2\nw.grad = None\n", set()),
    ],
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pool():
    p = await start_pool(pool_size=2, queue=64)
    yield p
    await p.close()


async def prove(exercise, pool) -> list[str]:
    return [p.message for p in await proof.prove_exercise(exercise, pool.run)]


def describe(result) -> str:
    lines = [f"status {result.status}: {result.stderr.strip()[-400:]}"]
    lines += [f"  {o.id}: {'pass' if o.passed else 'FAIL'} {o.message_key} {dict(o.params)}" for o in result.checks]
    return "\n".join(lines)


# --------------------------------------------------------------------------
# Proved in the real runner


@pytest.mark.parametrize("lesson_id", LESSON_IDS)
@shared_pool
async def test_every_exercise_is_proved_in_the_real_runner(pool, lesson_id):
    exercise = COURSE.lesson(lesson_id).exercise
    assert await prove(exercise, pool) == []


@pytest.mark.parametrize("lesson_id", LESSON_IDS)
@shared_pool
async def test_each_check_catches_its_mistake_and_another_correct_answer_passes(pool, lesson_id):
    exercise = COURSE.lesson(lesson_id).exercise
    checks = runner_checks.exercise_checks(exercise)
    ids = {c.id for c in exercise.checks}
    caught: set[str] = set()
    assert MISTAKES.get(lesson_id), f"{lesson_id}: no known mistakes to grade"
    for code, should_fail in MISTAKES[lesson_id]:
        result = await pool.run(code, checks=checks, seed=SEED)
        if should_fail == "error":
            assert result.status == "error" and not result.passed, f"{code}\n{describe(result)}"
            continue
        assert result.status == "ok", f"{code}\n{describe(result)}"
        failed = {o.id for o in result.checks if not o.passed}
        assert failed == should_fail, f"{lesson_id}:\n{code}\n{describe(result)}"
        caught |= failed
    assert caught == ids, f"{lesson_id}: checks no mistake trips: {sorted(ids - caught)}"


@shared_pool
async def test_a_check_the_seed_does_not_change_is_refused_by_the_proof(pool):
    # Lesson 3 with fixed inputs: one hard-coded answer would pass every run.
    exercise = COURSE.lesson("grad").exercise
    problems = await prove(with_inputs(exercise, "x", "torch.tensor([1.0, 2.0, 3.0])"), pool)
    assert any("check 'losses'" in p and "hard-code it" in p for p in problems), problems
    assert any("check 'w-trained'" in p for p in problems), problems


@shared_pool
async def test_a_broken_solution_and_a_starter_that_passes_are_reported(pool):
    exercise = COURSE.lesson("no-grad").exercise
    problems = await prove(replace(exercise, solution=exercise.starter), pool)
    assert any("the solution fails check 'w-leaf' with seed 1" in p for p in problems), problems
    assert any(
        "the solution fails check 'pred-no-grad' with seed 1: its code does not show inside pred" in p for p in problems
    ), problems
    # (A solution compared with itself: the starter swapped for it is then right in value and in the graph.)
    assert "exercise: the starter passes every check; it must fail one" in await prove(
        replace(exercise, starter=exercise.solution), pool
    )


@pytest.mark.parametrize(
    ("inputs", "reported"), [("torch.randint(1, 3, (1,)).float()", True), ("torch.rand(3)", False)]
)
@shared_pool
async def test_inputs_that_take_few_values_are_reported_as_a_hard_coded_answer_passes_some_runs(pool, inputs, reported):
    # Lesson 1 on one whole number, 1 or 2: the answer of one run, hard-coded, passes about half the runs.
    problems = await prove(with_inputs(COURSE.lesson("requires-grad").exercise, "w", inputs), pool)
    few = [p for p in problems if "take too few values" in p]
    if reported:
        assert len(few) == 1 and "a hard-coded answer passes about 1 run in " in few[0], problems
        assert "widen the random inputs" in few[0]
    else:
        assert problems == []


def with_inputs(exercise, name: str, inputs: str):
    """Return ``exercise`` with the line that makes its input ``name`` making it from ``inputs`` instead."""
    line = re.compile(rf"^{name} = .*$", re.MULTILINE)
    assert line.search(exercise.solution) and line.search(exercise.starter), exercise.solution
    return replace(
        exercise,
        solution=line.sub(f"{name} = {inputs}", exercise.solution, count=1),
        starter=line.sub(f"{name} = {inputs}", exercise.starter, count=1),
    )


# --------------------------------------------------------------------------
# The exercise's own shape (no runner needed)


@pytest.mark.parametrize("lesson_id", LESSON_IDS)
def test_exercise_fields(lesson_id):
    exercise = COURSE.lesson(lesson_id).exercise
    for text in (exercise.title, exercise.instructions, exercise.starter, exercise.solution):
        assert text.strip()
    assert exercise.starter.strip() != exercise.solution.strip(), f"{lesson_id}: starter is the solution"
    # The proof tells whether the inputs are random enough; this says where they come from, for a reader.
    for code in (exercise.starter, exercise.solution):
        assert "torch.randint(" in code or "torch.rand(" in code, f"{lesson_id}: inputs are not random"


@pytest.mark.parametrize("lesson_id", LESSON_IDS)
def test_hints(lesson_id):
    hints = COURSE.lesson(lesson_id).exercise.hints
    assert HINTS_MIN <= len(hints) <= HINTS_MAX, hints
    assert all("\n" not in hint for hint in hints), f"{lesson_id}: a hint is one line"
    assert len(set(hints)) == len(hints), f"{lesson_id}: repeated hint"


@pytest.mark.parametrize("lesson_id", LESSON_IDS)
def test_checks_and_their_fail_messages(lesson_id):
    exercise = COURSE.lesson(lesson_id).exercise
    assert any(c.from_solution for c in exercise.checks), f"{lesson_id}: nothing is compared with the solution"
    for c in exercise.checks:
        assert ID_RE.match(c.id) and c.kind in CHECK_KINDS
        assert "\n" not in c.fail.strip(), f"{lesson_id}: {c.id}: fail is one line"
        text = c.fail.replace("{got}", "`tensor(8.)`").replace("{expected}", "`tensor(4.)`")
        assert "{" not in text and "}" not in text
        if c.kind == "true":
            # A `true` check's value is just False, and what it expects is True: nothing useful to show.
            assert "{got}" not in c.fail and "{expected}" not in c.fail, f"{lesson_id}: {c.id}"
        outside = re.sub(r"`[^`]*`", "", c.fail)
        assert c.fail.count("`") % 2 == 0 and outside.count("**") % 2 == 0, f"{lesson_id}: {c.id}: unclosed markup"


def test_lesson_3_asks_for_a_training_step_that_uses_its_own_gradient_and_never_teaches_zero_on_a_none_grad():
    exercise = COURSE.lesson("grad").exercise
    body = [line.strip() for line in exercise.solution.splitlines()]
    order = ["opt.zero_grad()", "loss = ((w * x - y) ** 2).mean()", "loss.backward()", "opt.step()"]
    assert [body.index(step) for step in order] == sorted(body.index(step) for step in order)
    # The instructions ask for the behaviour (each step on its own gradient), not the lines: no zero_grad there.
    assert "opt.step()" in exercise.instructions and "zero_grad" not in exercise.instructions
    for hint in exercise.hints:
        assert "grad.zero_()" not in hint or "None" in hint, hint


def test_every_hint_named_for_a_mistake_names_one_the_bot_can_find():
    # hints_for (lessons/FORMAT.md) orders a learner's hints by the mistake their run shows (issue 20).
    from bot import mistakes

    known = {m.id for m in mistakes.MISTAKES}
    named = [(lesson.id, made) for lesson in COURSE.lessons for made, _n in lesson.exercise.hints_for]
    assert named and all(made in known for _lesson, made in named), named
    grad = COURSE.lesson("grad").exercise
    # Lesson 3: a learner who forgot zero_grad() reads first of clearing, not of the order they had right.
    assert grad.hint_order("stale-gradient") == (1, 0, 2) and grad.hint_order(None) == (0, 1, 2)
    assert "clears" in grad.hints[grad.hint_order("stale-gradient")[0]]


def test_grading_never_imports_torch_here():
    assert "torch" not in sys.modules
