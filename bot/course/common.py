"""What the lesson reader (parsing) and the drill reader (drill_parsing) share, written once.

Hidden checks (a list within bounds, each read by the runner's own rules), their translated fail messages, code
text and code compared with the English, and lists where exactly one entry is correct.
"""

from __future__ import annotations

import io
import tokenize
from dataclasses import replace

from bot.course.model import CHECK_KINDS, FAIL_PLACEHOLDERS, SOURCE_CHECK_KINDS, ExerciseCheck
from bot.course.yamlfile import ContentFile, LinedMap, plain
from runner.client import Check, InvalidRequest

CHECK_COUNT = (1, 6)  # hidden checks of an exercise or a Parsons drill


def read_checks(file: ContentFile, node: LinedMap, where: str) -> tuple[ExerciseCheck, ...] | None:
    """Read the `checks:` list under ``node``; return None if there are too few or too many, or one is unusable."""
    low, high = CHECK_COUNT
    count = len(node["checks"])
    if not low <= count <= high:
        file.problem(node.key_lines["checks"], f"{where}: has {count} checks, expected {low} to {high}")
    checks = [
        check
        for _line, item, check_id in file.unique_ids(file.items(node, "checks", where), "check")
        if (check := read_check(file, item, check_id)) is not None
    ]
    return tuple(checks) if low <= count <= high and len(checks) == count else None


def read_check(file: ContentFile, item: LinedMap, check_id: str) -> ExerciseCheck | None:
    """Read one hidden check of an exercise or a drill, or return None after reporting its problem.

    A check may leave 'expect' out: it is then compared with what the reference (the solution, or a drill's
    own order) gives on the same random inputs.
    """
    check_where = f"check '{check_id}'"
    fields = file.fields(item, check_where, {"id": str, "expr": str, "kind": str, "fail": str}, {"expect": object})
    if fields is None:
        return None
    if fields["kind"] not in CHECK_KINDS:
        file.problem(item.key_lines["kind"], f"{check_where}: kind must be one of {', '.join(CHECK_KINDS)}")
        return None
    if fields["kind"] == "true" and "expect" in fields:
        file.problem(item.key_lines["expect"], f"{check_where}: a 'true' check takes no 'expect'")
        return None
    expect = plain(fields.get("expect"))
    if "expect" in item and item["expect"] is None:
        file.problem(
            item.key_lines["expect"], f"{check_where}: 'expect' is empty; leave it out to compare with the solution"
        )
        return None
    try:
        # The runner's own reading of the expression: what lint accepts is what extraction can evaluate.
        Check(check_id, fields["expr"], fields["kind"], expect=expect)
    except InvalidRequest as exc:
        # The runner names the rule an expression breaks, never the expression: this file's author sees it here.
        reason = str(exc).removeprefix(f"check {check_id!r}: ").removeprefix("'expr': ")
        file.problem(item.key_lines["expr"], f"{check_where}: 'expr' {fields['expr']!r}: {reason}")
        return None
    file.check_lesson_text(item, "fail", check_where)
    check = ExerciseCheck(check_id, fields["expr"], fields["kind"], expect, fields["fail"])
    why_not = ": a 'true' check's value is only False" if check.kind == "true" else ": it reads the code, not a value"
    if (problem := _placeholder_problem(check.fail, _placeholders(check), why_not=why_not)) is not None:
        file.problem(item.key_lines["fail"], f"{check_where}: 'fail' {problem}")
        return None
    return check


def _placeholders(check: ExerciseCheck) -> tuple[str, ...]:
    """The placeholders a check's fail message may use: a 'true' check's value is only False, and it expects True."""
    return () if check.kind == "true" or check.kind in SOURCE_CHECK_KINDS else FAIL_PLACEHOLDERS


def _placeholder_problem(
    fail: str, allowed: tuple[str, ...], required: tuple[str, ...] = (), why_not: str = ""
) -> str | None:
    """Say what is wrong with the braces of a fail message, or return None.

    Each placeholder in ``allowed`` may appear once (``required`` ones must), and no other brace;
    ``why_not`` says why one that is not allowed is not.
    """
    rest = fail
    for placeholder in FAIL_PLACEHOLDERS:
        count = fail.count(placeholder)
        if count and placeholder not in allowed:
            return f"may not use {placeholder}{why_not}"
        if count > 1:
            return f"uses {placeholder} more than once"
        if placeholder in required and not count:
            return f"must use {placeholder}, as the English does"
        rest = rest.replace(placeholder, "")
    if "{" in rest or "}" in rest:
        return f"has braces other than {' and '.join(allowed or FAIL_PLACEHOLDERS)}"
    return None


def translated_checks(
    file: ContentFile, node: LinedMap, english: tuple[ExerciseCheck, ...], where: str
) -> tuple[ExerciseCheck, ...] | None:
    """Return the English checks with the 'fail' messages translated under ``node``, or None if any is missing."""
    fails: dict[str, str] = {}
    by_id = {check.id: check for check in english}
    listed = file.unique_ids(file.items(node, "checks", where), "check")
    absent = [check.id for check in english if check.id not in {check_id for _, _, check_id in listed}]
    if absent:
        file.problem(
            node.key_lines.get("checks", node.line),
            f"{where}: no translated 'fail' for check {', '.join(map(repr, absent))}",
        )
    for _line, item, check_id in listed:
        check_where = f"check '{check_id}'"
        if check_id not in by_id:
            file.problem(item.key_lines["id"], f"{check_where} is not in the English {where}")
            continue
        fields = file.fields(item, check_where, {"id": str, "fail": str}, {})
        if fields is None:
            continue
        file.check_lesson_text(item, "fail", check_where)
        # A translation uses exactly the placeholders its English uses.
        used = tuple(p for p in FAIL_PLACEHOLDERS if p in by_id[check_id].fail)
        problem = _placeholder_problem(fields["fail"], used, required=used, why_not=": the English does not")
        if problem is not None:
            file.problem(item.key_lines["fail"], f"{check_where}: 'fail' {problem}")
            continue
        fails[check_id] = fields["fail"]
    if len(fails) != len(english):
        return None
    return tuple(replace(check, fail=fails[check.id]) for check in english)


def one_correct(file: ContentFile, line: int, where: str, what: str, correct: list[int]) -> bool:
    """Report a list whose entries (options, choices) do not have exactly one marked 'correct: true'."""
    if len(correct) == 1:
        return True
    found = "none is" if not correct else f"{len(correct)} are"
    file.problem(line, f"{where}: exactly one {what} must have 'correct: true', {found}")
    return False


def code_text(value: object) -> str:
    """Return a block of code as written, its trailing newlines and spaces cut ('' for no code)."""
    # Keep the author's indentation; only the block's end goes.
    return value.rstrip("\n").rstrip() if isinstance(value, str) else ""


def _code_tokens(code: str) -> tuple[list[tuple[int, str]], list[str]]:
    """Return the code's tokens without comments, and its '# ->' comments (with their '#    ' continuations)."""
    tokens: list[tuple[int, str]] = []
    arrows: list[str] = []
    for token in tokenize.generate_tokens(io.StringIO(code + "\n").readline):
        if token.type == tokenize.COMMENT:
            if token.string.startswith(("# ->", "#    ")):
                arrows.append(token.string)
        elif token.type not in (tokenize.NL, tokenize.ENDMARKER):
            tokens.append((token.type, token.string))
    return tokens, arrows


def code_difference(translated: str, english: str) -> str | None:
    """Say how translated code differs from the English beyond its comments, or return None."""
    try:
        mine, my_arrows = _code_tokens(translated)
    except (tokenize.TokenError, SyntaxError) as exc:
        return f"is not valid Python ({exc.args[0]})"
    theirs, their_arrows = _code_tokens(english)
    if mine != theirs:
        return "differs from the English code: translate only its comments"
    if my_arrows != their_arrows:
        return "changes a '# ->' comment: those state what the line prints and stay as in English"
    return None
