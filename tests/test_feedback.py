"""Practice feedback, without Telegram or a sandbox: checks built from lessons, runs turned into messages."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from bot import feedback, mistakes, render
from bot.course import runner_checks
from bot.i18n import I18n
from bot.telegram_rules.limits import MESSAGE_TEXT_MAX
from bot.telegram_rules.text import visible_length
from runner.client import CheckOutcome, RunResult
from tests.conftest import LOCALES, course_content

CONTENT = course_content()
COURSE = CONTENT.english
GRAD = COURSE.lesson("grad").exercise
I18N = I18n(LOCALES)


@dataclass(frozen=True)
class Limits:
    wall_time_s: float = 10.0
    cpu_time_s: float = 5.0
    memory_bytes: int = 512 * 2**20


def _result(status="ok", stdout="", stderr="", checks=(), truncated=False) -> RunResult:
    return RunResult(
        status=status,
        stdout=stdout,
        stderr=stderr,
        exit_code=0 if status == "ok" else 1,
        signal=None,
        duration_ms=3.0,
        truncated=truncated,
        checks=checks,
        passed=bool(checks) and all(c.passed for c in checks),
    )


def test_checks_without_expect_take_the_solution_as_their_reference():
    checks = runner_checks.exercise_checks(GRAD)
    assert [(c.id, c.expr, c.expect) for c in checks.checks] == [(c.id, c.expr, None) for c in GRAD.checks]
    assert checks.reference == GRAD.solution and checks.needs_reference


def test_checks_with_their_own_expectations_send_no_solution():
    literal = replace(GRAD, checks=tuple(replace(c, expect=[1.0]) for c in GRAD.checks))
    checks = runner_checks.exercise_checks(literal)
    assert checks.reference is None and [c.expect for c in checks.checks] == [[1.0], [1.0]]


def test_a_fenced_python_block_is_found_in_a_message():
    assert feedback.fenced_code("try this:\n```python\nprint(1)\n```\nthanks") == "print(1)"
    assert feedback.fenced_code("```\nx = 2\n```") == "x = 2"
    assert feedback.fenced_code("no code here") is None
    assert feedback.fenced_code("``` ```") is None


def test_a_mismatch_shows_the_exercises_own_message_with_what_was_got_and_expected():
    check = GRAD.checks[1]
    outcome = CheckOutcome(check.id, False, "checks.mismatch", {"got": "tensor([8.])", "expected": "tensor([2.])"})
    lines = feedback.check_feedback(GRAD, _result(checks=(outcome,)))
    assert lines == [check.fail.replace("{got}", "`tensor([8.])`").replace("{expected}", "`tensor([2.])`")]
    html = render.feedback_lines(lines)
    assert "<code>tensor([8.])</code>" in html and "<code>tensor([2.])</code>" in html


def test_passed_checks_say_nothing_and_code_that_did_not_finish_says_so_once():
    ok = _result(checks=tuple(CheckOutcome(c.id, True, "checks.passed") for c in GRAD.checks))
    assert feedback.check_feedback(GRAD, ok) == []
    crashed = _result(
        "error", checks=tuple(CheckOutcome(c.id, False, "checks.not_run", {"status": "error"}) for c in GRAD.checks)
    )
    lines = feedback.check_feedback(GRAD, crashed)
    assert len(lines) == 1 and "run to the end" in lines[0]


REASONS = ("missing", "malformed", "too_large", "threads", "hooks", "nonce", "<b>unknown</b>")


@pytest.mark.parametrize("reason", REASONS)
def test_results_that_could_not_be_read_are_told_in_one_line(reason):
    checks = tuple(
        CheckOutcome(c.id, False, "checks.no_report", {"status": "ok", "reason": reason}) for c in GRAD.checks
    )
    lines = feedback.check_feedback(GRAD, _result(checks=checks))
    assert len(lines) == 1 and "\n" not in lines[0] and "unknown" not in lines[0]


def test_each_reason_has_its_own_words():
    said = {
        feedback.check_feedback(
            GRAD, _result(checks=(CheckOutcome("losses", False, "checks.no_report", {"reason": r}),))
        )[0]
        for r in ("missing", "malformed", "too_large", "threads", "hooks")
    }
    assert len(said) == 5


def test_a_check_that_cannot_be_read_names_the_expression_and_a_short_error():
    result = _result(
        checks=(CheckOutcome("losses", False, "checks.error", {"expr": "losses", "error": "NameError" + "x" * 500}),)
    )
    line = feedback.check_feedback(GRAD, result)[0]
    assert "`losses`" in line and "NameError" in line and len(line) < 250


def test_long_output_is_cut_with_a_note_and_html_is_escaped():
    block = feedback.output_block(_result(stdout="<b>" + "x" * 5000))
    assert block.startswith("<pre>&lt;b&gt;")
    assert "cut" in block
    assert len(block) < 3200
    assert "no output" in feedback.output_block(_result())
    assert "cut" in feedback.output_block(_result(stdout="abc"), room=2)
    squeezed = feedback.output_block(_result(stdout="abc"), room=0)
    assert "cut" in squeezed and "no output" not in squeezed


def test_each_limit_gets_its_own_plain_message():
    limits = Limits(cpu_time_s=5, wall_time_s=10)
    # Each names the limit that stopped the code: a busy loop meets the CPU limit, a sleeping one the clock's.
    assert "10 seconds" in feedback.status_line(_result("timeout"), limits)
    assert "processor busy for more than 5 seconds" in feedback.status_line(_result("cpu_limit"), limits)
    assert "512 MB" in feedback.status_line(_result("memory_limit"), limits)
    assert "too much" in feedback.status_line(_result("output_limit"), limits)
    assert "stopped" in feedback.status_line(_result("killed"), limits)
    assert feedback.status_line(_result("ok"), limits) is None


# --- the likely mistake, from the facts the runner measured ------------------------------------------------


def mismatch(check_id, **facts):
    return CheckOutcome(check_id, False, "checks.mismatch", {"got": "x", "expected": "y", **facts})


def test_a_gradient_that_is_a_multiple_of_the_expected_one_is_named_as_accumulation():
    exercise = COURSE.lesson("backward").exercise  # second-pass reads x.grad
    said = feedback.likely_mistakes(exercise, _result(checks=(mismatch("second-pass", ratio=2),)))
    assert len(said) == 1 and "`x.grad` is 2 times" in said[0] and "zero_grad" in said[0]
    # a value that is not a gradient (first is a copy) says nothing of accumulation
    assert feedback.likely_mistakes(exercise, _result(checks=(mismatch("first-pass", ratio=2),))) == []


def test_none_where_a_gradient_was_expected_is_named():
    exercise = COURSE.lesson("backward").exercise
    said = feedback.likely_mistakes(exercise, _result(checks=(mismatch("second-pass", got_none=True),)))
    assert len(said) == 1 and "`x.grad` is `None`" in said[0] and "backward()" in said[0]


def test_a_value_still_in_the_graph_is_named():
    exercise = COURSE.lesson("no-grad").exercise
    said = feedback.likely_mistakes(exercise, _result(checks=(mismatch("pred-value", still_requires_grad=True),)))
    assert len(said) == 1 and "`pred` still requires grad" in said[0] and "detach()" in said[0]


@pytest.mark.parametrize(
    "stderr, words",
    [
        (f"RuntimeError: {mistakes.SECOND_BACKWARD} (or directly access saved tensors...)", "retain_graph=True"),
        (f"RuntimeError: {mistakes.LEAF_IN_PLACE}.", "torch.no_grad()"),
    ],
)
def test_an_error_autograd_raises_is_explained(stderr, words):
    crashed = _result(
        "error", stderr=stderr, checks=tuple(CheckOutcome(c.id, False, "checks.not_run", {}) for c in GRAD.checks)
    )
    said = feedback.likely_mistakes(GRAD, crashed)
    assert len(said) == 1 and words in said[0]


def test_each_mistake_is_named_once_and_facts_of_the_wrong_type_are_ignored():
    exercise = COURSE.lesson("backward").exercise
    both = _result(checks=(mismatch("second-pass", ratio=3), mismatch("second-pass", ratio=4)))
    assert len(feedback.likely_mistakes(exercise, both)) == 1
    forged = _result(checks=(mismatch("second-pass", ratio="3", got_none="yes", still_requires_grad=1),))
    assert feedback.likely_mistakes(exercise, forged) == []


@pytest.mark.parametrize("language", I18N.languages)
def test_every_mistake_is_said_in_every_language(language):
    with I18N.use(language):
        for mistake in mistakes.MISTAKES:
            text = mistake.explain(mistakes.Evidence(expr="w.grad", ratio=3))
            assert text and "{" not in text
            if language != "en":
                with I18N.use("en"):
                    assert text != mistake.explain(mistakes.Evidence(expr="w.grad", ratio=3)), (language, mistake.id)


# --- the verdict always fits one message ------------------------------------------------------------------


@pytest.mark.parametrize("language", I18N.languages)
def test_the_worst_verdict_fits_telegrams_limit_in_every_language(language):
    course = CONTENT.course(language)
    with I18N.use(language):
        for lesson in course.lessons:
            exercise = lesson.exercise
            longest = "[" + "123456.7890, " * 20 + "…"
            failing = tuple(
                CheckOutcome(c.id, False, "checks.mismatch", {"got": longest, "expected": longest})
                for c in exercise.checks
            )
            result = RunResult("ok", "é<" * 4000, "", 0, None, 1.0, True, checks=failing)
            lines = ["status " * 40, *feedback.check_feedback(exercise, result)]
            likely = [m.explain(mistakes.Evidence(expr="x.grad", ratio=9)) for m in mistakes.MISTAKES]
            screen = render.fitting(
                lambda room, lesson=lesson, result=result, lines=lines, likely=likely: render.verdict_screen(
                    course, lesson, result, lines, likely, hints_shown=0, output_room=room
                ),
                feedback.OUTPUT_MAX,
            )
            assert visible_length(screen.text) <= MESSAGE_TEXT_MAX
            assert "<pre>" in screen.text  # some output is still shown


def test_the_event_of_a_graded_run_says_its_verdict_and_first_failing_check():
    passed = _result(checks=(CheckOutcome("losses", True, "checks.passed"),))
    assert feedback.run_event(passed) == ("passed", None)
    failed = _result(checks=(CheckOutcome("losses", True, "checks.passed"), mismatch("w-trained")))
    assert feedback.run_event(failed) == ("failed", "w-trained")
    timed_out = _result("timeout", checks=(CheckOutcome("losses", False, "checks.not_run", {}),))
    assert feedback.run_event(timed_out) == ("timeout", "losses")
