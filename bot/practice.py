"""Practice and snippets, without Telegram: turn an exercise into runner checks and a run into feedback."""

from __future__ import annotations

import html
import re

from bot import markup
from bot.course import Exercise
from bot.i18n import _, number
from runner.grading import Check, ExerciseChecks
from runner.result import RunResult

# Telegram allows 4096 characters; output gets what the frame around it leaves.
OUTPUT_MAX = 3000
_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n?(.*?)```", re.DOTALL | re.IGNORECASE)


def runner_checks(exercise: Exercise) -> ExerciseChecks:
    """Return the exercise's checks as the runner takes them; expected values stay outside the sandbox."""
    return ExerciseChecks(tuple(Check(id=c.id, expr=c.expr, kind=c.kind, expect=c.expect) for c in exercise.checks))


def fenced_code(text: str) -> str | None:
    """Return the code of the first ```python fenced block in a message, or None."""
    match = _FENCE.search(text or "")
    return match.group(1).strip("\n") if match and match.group(1).strip() else None


def _shown(value: str) -> str:
    # The runner renders values as JSON; learners read Python.
    return {"null": "None", "true": "True", "false": "False"}.get(value, value)


def output_block(result: RunResult) -> str:
    """Render what the learner's code printed, as a code block, cut to fit a message."""
    text = result.stdout + (
        ("\n" if result.stdout and not result.stdout.endswith("\n") else "") + result.stderr if result.stderr else ""
    )
    text = text.rstrip("\n")
    cut = len(text) > OUTPUT_MAX or result.truncated
    if len(text) > OUTPUT_MAX:
        text = text[:OUTPUT_MAX]
    parts = []
    if text:
        parts.append("<pre>" + html.escape(text, quote=False) + "</pre>")
    else:
        parts.append("<i>" + html.escape(_("(no output)")) + "</i>")
    if cut:
        parts.append("<i>" + html.escape(_("The output was long, so it is cut here.")) + "</i>")
    return "\n".join(parts)


def status_line(result: RunResult, limits) -> str | None:
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
    """Return one message per failed check, the exercise's own where the runner reports a mismatch."""
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
                    "`{expr}` could not be read after your code ran ({error}). Keep the variable names of the starter code."
                ).format(expr=outcome.params.get("expr", ""), error=outcome.params.get("error", ""))
            )
        elif check is not None:
            got = _shown(str(outcome.params.get("got", "?")))
            lines.append(check.fail.replace("{got}", f"`{got}`" if "`" not in got else got))
    return lines


def markup_lines(lines: list[str]) -> str:
    """Render feedback lines, each with the lesson markup, as HTML bullets."""
    return "\n".join("✗ " + _safe_markup(line) for line in lines)


def _safe_markup(line: str) -> str:
    # A value from the learner's code may itself hold a backtick; then show the line literally.
    try:
        return markup.to_html(line)
    except markup.MarkupError:
        return html.escape(line, quote=False)
