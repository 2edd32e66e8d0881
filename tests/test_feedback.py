"""Practice feedback, without Telegram or a sandbox: checks built from lessons, runs turned into messages."""

from __future__ import annotations

from dataclasses import dataclass

from bot import feedback
from bot.content.load import load_valid
from runner.client import CheckOutcome, RunResult
from tests.conftest import LESSONS, LOCALES

COURSE = load_valid(LESSONS, LOCALES).english
GRAD = COURSE.lesson("grad").exercise


@dataclass(frozen=True)
class Limits:
    wall_time_s: float = 5.0
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


def test_runner_checks_carry_expressions_and_expectations_from_the_lesson():
    checks = feedback.runner_checks(GRAD)
    assert [c.id for c in checks.checks] == [c.id for c in GRAD.checks]
    assert [c.expect for c in checks.checks] == [c.expect for c in GRAD.checks]


def test_a_fenced_python_block_is_found_in_a_message():
    assert feedback.fenced_code("try this:\n```python\nprint(1)\n```\nthanks") == "print(1)"
    assert feedback.fenced_code("```\nx = 2\n```") == "x = 2"
    assert feedback.fenced_code("no code here") is None
    assert feedback.fenced_code("``` ```") is None


def test_a_mismatch_shows_the_exercises_own_message_with_the_learners_value():
    check = GRAD.checks[0]
    result = _result(checks=(CheckOutcome(check.id, False, "checks.mismatch", {"got": "tensor(8.)"}),))
    lines = feedback.check_feedback(GRAD, result)
    assert lines == [check.fail.replace("{got}", "`tensor(8.)`")]
    assert "<code>tensor(8.)</code>" in feedback.feedback_lines(lines)


def test_json_values_are_shown_as_python():
    check = GRAD.checks[0]
    result = _result(checks=(CheckOutcome(check.id, False, "checks.mismatch", {"got": "null"}),))
    assert "`None`" in feedback.check_feedback(GRAD, result)[0]


def test_passed_checks_say_nothing_and_code_that_did_not_finish_says_so_once():
    ok = _result(checks=tuple(CheckOutcome(c.id, True, "checks.passed") for c in GRAD.checks))
    assert feedback.check_feedback(GRAD, ok) == []
    crashed = _result(
        "error", checks=tuple(CheckOutcome(c.id, False, "checks.not_run", {"status": "error"}) for c in GRAD.checks)
    )
    lines = feedback.check_feedback(GRAD, crashed)
    assert len(lines) == 1 and "run to the end" in lines[0]


def test_a_check_that_cannot_be_read_names_the_expression():
    result = _result(
        checks=(CheckOutcome("grad-value", False, "checks.error", {"expr": "x.grad", "error": "NameError"}),)
    )
    assert "`x.grad`" in feedback.check_feedback(GRAD, result)[0]


def test_long_output_is_cut_with_a_note_and_html_is_escaped():
    block = feedback.output_block(_result(stdout="<b>" + "x" * 5000))
    assert block.startswith("<pre>&lt;b&gt;")
    assert "cut" in block
    assert len(block) < 3200
    assert "no output" in feedback.output_block(_result())


def test_each_limit_gets_its_own_plain_message():
    limits = Limits()
    assert "5 seconds" in feedback.status_line(_result("timeout"), limits)
    assert "512 MB" in feedback.status_line(_result("memory_limit"), limits)
    assert "too much" in feedback.status_line(_result("output_limit"), limits)
    assert "stopped" in feedback.status_line(_result("killed"), limits)
    assert feedback.status_line(_result("ok"), limits) is None
