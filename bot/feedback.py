"""Runs turned into feedback, without Telegram: code found in a message, an exercise's checks for the runner,
and what a run printed, why it ended and which checks failed, in the learner's words."""

from __future__ import annotations

import re

from bot import lessontext
from bot.content.model import Exercise
from bot.i18n import _, number
from bot.safehtml import Html, escape, italic, pre
from runner.client import Check, ExerciseChecks, Limits, RunResult

# Telegram allows 4096 characters; output gets what the frame around it leaves.
OUTPUT_MAX = 3000
_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n?(.*?)```", re.DOTALL | re.IGNORECASE)


def runner_checks(exercise: Exercise) -> ExerciseChecks:
    """Return the exercise's checks as the runner takes them; expected values stay outside the sandbox.

    A check without an expected value compares with what the exercise's solution gives, run on the same seed.
    """
    return ExerciseChecks(
        tuple(Check(id=c.id, expr=c.expr, kind=c.kind, expect=c.expect) for c in exercise.checks),
        reference=exercise.solution,
    )


def fenced_code(text: str) -> str | None:
    """Return the code of the first ```python fenced block in a message, or None."""
    match = _FENCE.search(text)
    return match.group(1).strip("\n") if match and match.group(1).strip() else None


def _shown(value: str) -> str:
    # The runner renders values as JSON; learners read Python.
    return {"null": "None", "true": "True", "false": "False"}.get(value, value)


def output_block(result: RunResult) -> Html:
    """Render what the learner's code printed, as a code block, cut to fit a message."""
    text = result.stdout
    if result.stderr:
        text += ("\n" if text and not text.endswith("\n") else "") + result.stderr
    text = text.rstrip("\n")
    cut = len(text) > OUTPUT_MAX or result.truncated
    parts = [pre(text[:OUTPUT_MAX]) if text else italic(_("(no output)"))]
    if cut:
        parts.append(italic(_("The output was long, so it is cut here.")))
    return Html("\n".join(parts))


def status_line(result: RunResult, limits: Limits) -> str | None:
    """Explain in the learner's terms why a run ended, or None when it simply finished."""
    if result.status == "timeout":
        return _(
            "Your code ran longer than {seconds} seconds and was stopped. Look for a loop that never ends."
        ).format(seconds=number(limits.wall_time_s))
    if result.status == "memory_limit":
        return _("Your code used more than {mb} MB of memory and was stopped. Try smaller tensors.").format(
            mb=number(limits.memory_bytes / 2**20)
        )
    if result.status == "output_limit":
        return _("Your code printed or wrote too much, so it was stopped. Print less, or only a summary.")
    if result.status == "killed":
        return _("Your code was stopped by the sandbox (it may have used too many processes or a forbidden call).")
    if result.status == "error":
        return _("Your code stopped with an error.")
    return None


def check_feedback(exercise: Exercise, result: RunResult) -> list[str]:
    """Return one message (lesson markup) per failed check: the exercise's own where the runner reports a mismatch."""
    by_id = {c.id: c for c in exercise.checks}
    lines: list[str] = []
    for outcome in result.checks:
        if outcome.passed:
            continue
        check = by_id.get(outcome.id)
        key = outcome.message_key
        if key in ("checks.not_run", "checks.no_report"):
            return [_("The checks could not run: your code has to run to the end without an error first.")]
        if key == "checks.error":
            lines.append(
                _(
                    "`{expr}` could not be read after your code ran ({error}). "
                    "Keep the variable names of the starter code."
                ).format(expr=outcome.params.get("expr", ""), error=outcome.params.get("error", ""))
            )
        elif check is not None:
            got = _shown(str(outcome.params.get("got", "?")))
            lines.append(check.fail.replace("{got}", f"`{got}`" if "`" not in got else got))
    return lines


def feedback_lines(lines: list[str]) -> Html:
    """Render feedback lines, each in lesson markup, as HTML bullets."""
    return Html("\n".join("✗ " + _line_html(line) for line in lines))


def _line_html(line: str) -> Html:
    # A value from the learner's code may itself hold a backtick; then show the line literally.
    try:
        return lessontext.to_html(line)
    except lessontext.MarkupError:
        return escape(line)
