"""Runs turned into feedback, without Telegram: code found in a message,
and what a run printed, why it ended, which checks failed and the likely mistake, in the learner's words."""

from __future__ import annotations

import ast
import keyword
import re

from bot import mistakes
from bot.course.model import Exercise, ExerciseCheck
from bot.i18n import _, number
from bot.safehtml import Html, italic, pre
from runner.client import Limits, MessageKey, RunResult, Status

# Telegram allows 4096 characters; output gets what the frame around it leaves (at most this).
OUTPUT_MAX = 3000
_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n?(.*?)```", re.DOTALL | re.IGNORECASE)


def fenced_code(text: str) -> str | None:
    """Return the code of the first ```python fenced block in a message, or None."""
    match = _FENCE.search(text)
    return match.group(1).strip("\n") if match and match.group(1).strip() else None


# A word of a sentence: letters (any script), perhaps with an apostrophe, perhaps ending in punctuation.
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*[.,!?;:…]*", re.UNICODE)
_CODE_SIGNS = re.compile(r"=|^\s*(?:import|from|def|class|return|print)\b|[:({\[]\s*$|^\s{2,}\S", re.MULTILINE)


def _parses(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def reads_as_prose(text: str) -> bool:
    """Whether a message is a sentence, not Python: it fails to parse, and reads like words, not code.

    ("I don't understand why my loss goes up" is prose; a loop with a missing colon is code to run and correct.)
    """
    if fenced_code(text) is not None or _CODE_SIGNS.search(text):
        return False
    tree = _parses(text)
    if tree is not None:
        # A sentence in a script without spaces (Japanese) can be one valid name: prose all the same.
        return (
            len(tree.body) == 1
            and isinstance(tree.body[0], ast.Expr)
            and isinstance(tree.body[0].value, ast.Name)
            and not text.strip().isascii()
        )
    tokens = text.split()
    if len(tokens) == 1:
        # No spaces: a question ("what?"), or a sentence in a script that uses none, letters and punctuation only.
        letters = sum(1 for c in tokens[0] if c.isalpha())
        return (text.strip().endswith(("?", "？", "!")) or not tokens[0].isascii()) and letters >= 0.7 * len(tokens[0])
    words = [t for t in tokens if _WORD.fullmatch(t) and not keyword.iskeyword(t.rstrip(".,!?;:…"))]
    return len(words) == len(tokens) if len(tokens) == 2 else len(words) >= 0.6 * len(tokens)


def looks_like_code(text: str) -> bool:
    """Whether a message outside practice is Python pasted in (to be sent with /run), rather than chat."""
    return (
        not reads_as_prose(text)
        and (_CODE_SIGNS.search(text) is not None or _parses(text) is not None)
        and ("(" in text or "=" in text or "\n" in text.strip())
    )


def shown_value(value: str) -> str:
    """Return a value the runner rendered (as JSON) as learners and authors read it: Python."""
    return {"null": "None", "true": "True", "false": "False"}.get(value, value)


def output_block(result: RunResult, room: int = OUTPUT_MAX) -> Html:
    """Render what the learner's code printed, as a code block, cut to ``room`` characters."""
    text = result.stdout
    if result.stderr:
        text += ("\n" if text and not text.endswith("\n") else "") + result.stderr
    text = text.rstrip("\n")
    cut = len(text) > room or result.truncated
    parts = [pre(text[:room])] if text[:room] else ([] if text else [italic(_("(no output)"))])
    if cut:
        parts.append(italic(_("The output was long, so it is cut here.")))
    return Html("\n".join(parts))


def status_line(result: RunResult, limits: Limits) -> str | None:
    """Explain in the learner's terms why a run ended, or None when it simply finished."""
    if result.status is Status.TIMEOUT:
        return _(
            "Your code ran longer than {seconds} seconds and was stopped. Look for a loop that never ends."
        ).format(seconds=number(limits.wall_time_s))
    if result.status is Status.CPU_LIMIT:
        return _(
            "Your code kept the processor busy for more than {seconds} seconds and was stopped. "
            "Look for a loop that never ends, or do less work."
        ).format(seconds=number(limits.cpu_time_s))
    if result.status is Status.MEMORY_LIMIT:
        return _("Your code used more than {mb} MB of memory and was stopped. Try smaller tensors.").format(
            mb=number(limits.memory_bytes / 2**20)
        )
    if result.status is Status.OUTPUT_LIMIT:
        return _("Your code printed or wrote too much, so it was stopped. Print less, or only a summary.")
    if result.status is Status.KILLED:
        return _("Your code was stopped by the sandbox (it may have used too many processes or a forbidden call).")
    if result.status is Status.ERROR:
        return _("Your code stopped with an error.")
    return None


def _no_report(reason: object) -> str:
    """One line for a run whose results the checks could not read (runner.grading.NO_REPORT_REASONS)."""
    if reason == "too_large":
        return _("Your code's results were too large to check. Keep the variables the checks read small.")
    if reason == "threads":
        return _(
            "Your code left a thread running, so the checks could not read its results. "
            "Let every thread finish before the end."
        )
    if reason == "hooks":
        return _("Your code left a trace or profile hook set, so the checks could not read its results. Remove it.")
    if reason in ("malformed", "nonce"):
        return _(
            "The checks could not read your code's results: something in it wrote to or read from "
            "a file descriptor it did not open."
        )
    return _("The checks found no results: let your code run to its end, without `sys.exit()` or `os._exit()`.")


def _shown(value: object) -> str:
    """A value the runner rendered, as inline code (as it is, when it holds a backtick itself)."""
    text = shown_value(str(value))
    return f"`{text}`" if "`" not in text else text


def _failed(check: ExerciseCheck, params: dict[str, object]) -> str:
    """The check's own message, with what the learner's code gave and what it should have."""
    text = check.fail.replace("{got}", _shown(params.get("got", "?")))
    return text.replace("{expected}", _shown(params.get("expected", "?")))


def check_feedback(exercise: Exercise, result: RunResult, *, diagnosed: bool = False) -> list[str]:
    """Return one message (lesson markup) per failed check: the exercise's own where the runner reports a mismatch.

    ``diagnosed``: the likely mistake is named from the values, so a mismatch says only what was found and what was
    expected, not the check's whole rule again.
    """
    by_id = {c.id: c for c in exercise.checks}
    lines: list[str] = []
    for outcome in result.checks:
        if outcome.passed:
            continue
        check = by_id.get(outcome.id)
        key = outcome.message_key
        if key is MessageKey.NOT_RUN:
            return [_("The checks could not run: your code has to run to the end without an error first.")]
        if key is MessageKey.NO_REPORT:
            return [_no_report(outcome.params.get("reason"))]
        if key is MessageKey.ERROR:
            lines.append(
                _(
                    "`{expr}` could not be read after your code ran ({error}). "
                    "Keep the variable names of the starter code."
                ).format(expr=outcome.params.get("expr", ""), error=str(outcome.params.get("error", ""))[:60])
            )
        elif diagnosed and key is MessageKey.MISMATCH and "expected" in outcome.params:
            lines.append(
                _("`{expr}` is {got}, expected {expected}.").format(
                    expr=outcome.params.get("expr", ""),
                    got=_shown(outcome.params.get("got", "?")),
                    expected=_shown(outcome.params.get("expected", "?")),
                )
            )
        elif check is not None:
            lines.append(_failed(check, dict(outcome.params)))
    return lines


def likely_mistakes(exercise: Exercise, result: RunResult) -> list[str]:
    """Return what the run shows of a likely autograd mistake (lesson markup), from its failed checks and error."""
    return list(diagnosis(exercise, result).values())


def diagnosis(exercise: Exercise, result: RunResult) -> dict[str, str]:
    """Return each likely mistake the run shows, by id (bot.mistakes), with what to tell the learner."""
    exprs = {c.id: c.expr for c in exercise.checks}
    evidence = [
        mistakes.Evidence.of_check(exprs[o.id], o.params)
        for o in result.checks
        if not o.passed and o.message_key is MessageKey.MISMATCH and o.id in exprs
    ]
    if result.status is Status.ERROR:
        evidence.append(mistakes.Evidence(stderr=result.stderr))
    return mistakes.diagnose(evidence)


def run_advice(result: RunResult) -> list[str]:
    """Return what an ungraded run's error shows of a likely mistake (a slide's code without its import)."""
    return mistakes.likely([mistakes.Evidence(stderr=result.stderr)]) if result.status is Status.ERROR else []


def run_event(result: RunResult) -> tuple[str, str | None]:
    """The verdict and first failing check of a graded run, as a learning event records them ("run")."""
    if result.passed:
        return "passed", None
    failed = next((o.id for o in result.checks if not o.passed), None)
    return ("failed" if result.status is Status.OK else str(result.status)), failed
