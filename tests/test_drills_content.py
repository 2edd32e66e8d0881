"""The shipped drills, proven in the real runner, and their coverage of every lesson in every language.

Parsons: the author's order passes its own checks; each order listed in EQUIVALENT passes too (that is
what "equivalent" means: the same values for every check, on the same seed, as the author's order); each
order in WRONG fails for the reason given. Fill in the blank: the right choice makes code that prints what
its `# ->` comments say, and every other choice does something else. Predict the output: the sample
prints exactly the right choice.
"""

from __future__ import annotations

import re
import shutil

import pytest
import pytest_asyncio

from bot import drills
from bot.course import runner_checks
from bot.course.model import ChoiceDrill, ParsonsDrill, program
from bot.drills import Reason
from runner.client import RunnerClient, RunnerConfig
from tests.conftest import course_content

CONTENT = course_content()
ENGLISH = CONTENT.english
PARSONS = {(lesson.id, d.id): d for lesson in ENGLISH.lessons for d in lesson.drills if isinstance(d, ParsonsDrill)}
CHOICES = {(lesson.id, d.id): d for lesson in ENGLISH.lessons for d in lesson.drills if isinstance(d, ChoiceDrill)}

# Orders other than the author's that give the same results: they must pass.
EQUIVALENT = {
    ("requires-grad", "track-first"): [(1, 0, 2, 3), (0, 2, 1, 3)],  # `k` is independent of `w`
    ("backward", "loss-to-grads"): [(1, 0, 2, 3, 4)],  # `w` and `b` are independent
    # Clearing anywhere before backward(), or after the step, leaves each step its own gradient.
    ("grad", "step-order"): [(0, 2, 1, 3, 4, 5), (0, 2, 3, 1, 4, 5), (0, 2, 3, 4, 5, 1)],
}
# Orders that must fail, and why: (order, reason, the id of the check that fails, if it is a check).
WRONG = {
    ("requires-grad", "track-first"): [((0, 1, 3, 2), Reason.CHECKS, "y-tracked"), ((0, 3, 1, 2), Reason.RAISES, None)],
    ("backward", "loss-to-grads"): [((0, 1, 2, 4, 3), Reason.RAISES, None), ((2, 0, 1, 3, 4), Reason.RAISES, None)],
    ("grad", "step-order"): [
        ((0, 2, 3, 4, 1, 5), Reason.CHECKS, "w-after"),
        ((1, 0, 2, 3, 4, 5), Reason.STRAY_INDENT, None),  # the loop's body before its `for`
    ],
    ("no-grad", "hand-update"): [
        ((0, 1, 2, 5, 4), Reason.DISTRACTOR, None),
        ((0, 2, 3, 1, 4), Reason.RAISES, None),  # the step before backward(): w.grad is None
        ((4, 0, 1, 2, 3), Reason.CHECKS, "w-cleared"),  # cleared before backward(): this step's gradient is left
    ],
}
ARROW = re.compile(r"#\s*->\s*(.*)$")

sandbox = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="the runner's sandbox needs bubblewrap (apt-get install -y bubblewrap)"
)
module_loop = pytest.mark.asyncio(loop_scope="module")  # the tests below share one embedded runner


def test_every_lesson_has_a_parsons_problem_and_a_fill_in_in_every_language():
    for language in ["en", *CONTENT.translations]:
        for lesson in CONTENT.course(language).lessons:
            kinds = {drill.kind for drill in lesson.drills}
            assert {"parsons", "fill"} <= kinds, (language, lesson.id)
            untranslated = [drill.id for drill in lesson.drills if drill.fallback]
            assert untranslated == [], (language, lesson.id)


def test_lesson_three_drills_the_order_of_a_training_step():
    body = " ".join(PARSONS[("grad", "step-order")].lines)
    steps = ["zero_grad()", "pred =", "loss =", "backward()", "step()"]
    assert [body.index(step) for step in steps] == sorted(body.index(step) for step in steps)


def test_every_parsons_drill_has_orders_that_prove_its_checks():
    assert set(WRONG) == set(PARSONS), "each Parsons drill needs wrong orders here (and equivalent ones if any)"
    assert set(EQUIVALENT) <= set(PARSONS)


def test_only_later_drills_have_distractors_and_sparingly():
    for lesson in ENGLISH.lessons:
        assert not getattr(lesson.drills[0], "distractors", ()), lesson.id
    assert sum(len(d.distractors) for d in PARSONS.values()) <= len(ENGLISH.lessons)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def runner():
    if shutil.which("bwrap") is None:
        pytest.skip("the runner's sandbox needs bubblewrap (apt-get install -y bubblewrap)")
    async with RunnerClient.embedded(RunnerConfig.from_env({})) as client:
        yield client


async def _grade(runner, drill: ParsonsDrill, order: tuple[int, ...]) -> drills.Verdict:
    """Grade an order as the bot does: without running where that is certain, else in the runner."""
    verdict = drills.precheck(drill, order)
    if verdict is not None:
        return verdict
    result = await runner.run(drills.arranged_program(drill, order), checks=runner_checks.drill_checks(drill))
    return drills.run_verdict(drill, result)


@sandbox
@module_loop
@pytest.mark.parametrize("key", sorted(PARSONS))
async def test_the_authors_order_passes_its_own_checks_in_the_runner(runner, key):
    drill = PARSONS[key]
    result = await runner.run(drill.program, checks=runner_checks.exercise_checks(drill.exercise))
    assert result.status == "ok", result.stderr
    assert result.passed, result.checks


@sandbox
@module_loop
@pytest.mark.parametrize(("key", "order"), [(key, order) for key, orders in EQUIVALENT.items() for order in orders])
async def test_an_equivalent_order_passes(runner, key, order):
    drill = PARSONS[key]
    assert drills.arrangement(drill, order) != drill.lines, "an equivalent order is another order"
    verdict = await _grade(runner, drill, order)
    assert verdict.right and verdict.reason is Reason.SAME_RESULTS, verdict


@sandbox
@module_loop
@pytest.mark.parametrize(
    ("key", "order", "reason", "check"),
    [(key, order, reason, check) for key, cases in WRONG.items() for order, reason, check in cases],
)
async def test_a_wrong_order_fails_for_its_reason(runner, key, order, reason, check):
    drill = PARSONS[key]
    verdict = await _grade(runner, drill, order)
    assert not verdict.right and verdict.reason is reason, verdict
    if check is not None:
        message = next(c.fail for c in drill.checks if c.id == check).split("{got}")[0]
        assert len(verdict.failed) == 1 and verdict.failed[0].startswith(message), verdict.failed


def _claims(code: str) -> list[str]:
    return [match.group(1).strip() for line in code.splitlines() if (match := ARROW.search(line))]


@sandbox
@module_loop
@pytest.mark.parametrize("key", sorted(k for k, d in CHOICES.items() if d.kind == "fill"))
async def test_the_right_choice_fills_the_gap_and_every_other_does_something_else(runner, key):
    drill = CHOICES[key]
    right = await runner.run(program(drill.setup, (drill.answer,)))
    assert right.status == "ok", right.stderr
    assert right.stdout.strip().splitlines() == _claims(drill.code)
    for index, choice in enumerate(drill.choices):
        if index == drill.correct:
            continue
        other = await runner.run(program(drill.setup, (drill.code.replace(drill.GAP, choice),)))
        assert other.status != "ok" or other.stdout != right.stdout, choice


@sandbox
@module_loop
@pytest.mark.parametrize("key", sorted(k for k, d in CHOICES.items() if d.kind == "predict"))
async def test_the_sample_prints_exactly_the_right_choice(runner, key):
    drill = CHOICES[key]
    result = await runner.run(program(drill.setup, (drill.code,)))
    assert result.status == "ok", result.stderr
    assert result.stdout.strip() == drill.choices[drill.correct]
    assert all(choice != result.stdout.strip() for i, choice in enumerate(drill.choices) if i != drill.correct)
