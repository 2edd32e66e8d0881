"""Read a lesson's `drills:` (Parsons, fill in the blank, predict the output) and their translations.

Every problem is reported at its line, as for the rest of a lesson file. The rules that keep a drill on
one phone screen are here; the screens themselves are measured in bot.library.screens.
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import replace
from typing import Any

from bot import lessontext
from bot.course.common import code_difference, code_text, one_correct, read_checks, translated_checks
from bot.course.model import ChoiceDrill, Drill, Lesson, ParsonsDrill, program
from bot.course.phone_width import CODE_LINE_MAX, display_width
from bot.course.yamlfile import ContentFile, LinedList, LinedMap

# A drill id travels in button data with the lesson id (callbacks.MAX_BYTES in all).
DRILL_ID_MAX = 16
DRILLS_MAX = 4  # per lesson
PARSONS_LINES = (3, 7)
DISTRACTORS_MAX = 2
PIECES_MAX = 7  # lines and distractors: each is a row of buttons
CHOICES = (2, 4)
CODE_LINES_MAX = 8  # the code of a fill-in or predict drill
INDENT = 4  # spaces per level: Parsons buttons show levels, not spaces
PROMPT_MAX = 240
EXPLANATION_MAX = 300
REASON_MAX = 160  # why a wrong choice is wrong: a sentence under the code, with the buttons still to tap

_ENGLISH_KEYS: dict[str, tuple[dict[str, type], dict[str, type]]] = {
    "parsons": (
        {"id": str, "kind": str, "prompt": str, "lines": str, "checks": list, "explanation": str},
        {"distractors": str, "setup": str},
    ),
    "fill": (
        {"id": str, "kind": str, "prompt": str, "code": str, "choices": list, "explanation": str},
        {"setup": str},
    ),
    "predict": (
        {"id": str, "kind": str, "prompt": str, "code": str, "choices": list, "explanation": str},
        {"setup": str},
    ),
}


def read_drills(file: ContentFile, data: LinedMap) -> tuple[Drill, ...] | None:
    """Read an English lesson's drills; return None if any of them is unusable (the problems are recorded)."""
    if "drills" not in data or data["drills"] is None:
        return ()
    if not isinstance(data["drills"], LinedList):
        file.problem(data.key_lines["drills"], "'drills' must be a list of drills")
        return None
    count = len(data["drills"])
    if count > DRILLS_MAX:
        file.problem(data.key_lines["drills"], f"a lesson has at most {DRILLS_MAX} drills, this one has {count}")
    drills: list[Drill] = []
    for index, (line, item, drill_id) in enumerate(file.unique_ids(file.items(data, "drills", "lesson"), "drill")):
        if (drill := _read_drill(file, line, item, drill_id, first=index == 0)) is not None:
            drills.append(drill)
    return tuple(drills) if len(drills) == count <= DRILLS_MAX else None


def _read_drill(file: ContentFile, line: int, item: LinedMap, drill_id: str, *, first: bool) -> Drill | None:
    where = f"drill '{drill_id}'"
    if len(drill_id) > DRILL_ID_MAX:
        file.problem(item.key_lines["id"], f"{where}: the id is longer than {DRILL_ID_MAX} characters")
        return None
    kind = item.get("kind")
    if kind not in _ENGLISH_KEYS:
        file.problem(item.key_lines.get("kind", line), f"{where}: 'kind' must be one of {', '.join(_ENGLISH_KEYS)}")
        return None
    required, optional = _ENGLISH_KEYS[kind]
    values = file.fields(item, where, required, optional)
    if values is None:
        return None
    ok = _prose(file, item, values, where)
    if kind == "parsons":
        return _read_parsons(file, line, item, values, where, first=first) if ok else None
    return _read_choices(file, line, item, values, where, kind) if ok else None


def _prose(file: ContentFile, item: LinedMap, values: dict[str, Any], where: str) -> bool:
    """Check a drill's prompt and explanation: lesson markup, short enough to leave room for the code."""
    ok = True
    for key, limit in (("prompt", PROMPT_MAX), ("explanation", EXPLANATION_MAX)):
        if key not in values:
            continue
        problems = len(file.problems)
        file.check_lesson_text(item, key, where)
        if len(values[key]) > limit:
            file.problem(item.key_lines[key], f"{where}: '{key}' has {len(values[key])} characters, at most {limit}")
        ok = ok and len(file.problems) == problems
    return ok


def _block_lines(file: ContentFile, item: LinedMap, key: str, where: str) -> list[str] | None:
    """Return a code block's lines (trailing blank lines dropped), reporting each one too wide for a phone."""
    text: str = item[key]
    lines = text.rstrip("\n").rstrip().split("\n")
    first_line = item.key_lines[key] + 1  # a block scalar starts on the line after its key
    ok = True
    for offset, code_line in enumerate(lines):
        if display_width(code_line) > CODE_LINE_MAX:
            file.problem(
                first_line + offset,
                f"{where}: '{key}' line {offset + 1} has {display_width(code_line)} columns; "
                f"a phone shows {CODE_LINE_MAX}: wrap it",
            )
            ok = False
        if "\t" in code_line:
            file.problem(first_line + offset, f"{where}: '{key}' line {offset + 1} has a tab; indent with spaces")
            ok = False
    return lines if ok else None


def _read_parsons(
    file: ContentFile, line: int, item: LinedMap, values: dict[str, Any], where: str, *, first: bool
) -> ParsonsDrill | None:
    lines = _block_lines(file, item, "lines", where)
    distractors = _block_lines(file, item, "distractors", where) if "distractors" in values else []
    if lines is None or distractors is None:
        return None
    ok = True
    low, high = PARSONS_LINES
    if not low <= len(lines) <= high:
        file.problem(item.key_lines["lines"], f"{where}: has {len(lines)} lines, expected {low} to {high}")
        ok = False
    if len(distractors) > DISTRACTORS_MAX:
        file.problem(item.key_lines["distractors"], f"{where}: use distractors sparingly: at most {DISTRACTORS_MAX}")
        ok = False
    elif distractors and first:
        file.problem(
            item.key_lines["distractors"],
            f"{where}: the lesson's first drill has no distractors: let the learner meet the format first",
        )
        ok = False
    if low <= len(lines) <= high and len(lines) + len(distractors) > PIECES_MAX:
        file.problem(
            item.key_lines["lines"],
            f"{where}: {len(lines) + len(distractors)} lines and distractors to tap; at most {PIECES_MAX} fit",
        )
        ok = False
    for key, pieces in (("lines", lines), ("distractors", distractors)):
        for offset, piece in enumerate(pieces):
            if (problem := _piece_problem(piece)) is not None:
                file.problem(item.key_lines[key] + 1 + offset, f"{where}: '{key}' line {offset + 1} {problem}")
                ok = False
    for offset, distractor in enumerate(distractors):
        if distractor in lines:
            file.problem(
                item.key_lines["distractors"] + 1 + offset,
                f"{where}: distractor {offset + 1} is also a line of the program",
            )
            ok = False
    setup = code_text(values.get("setup"))
    if ok and (error := _syntax_error(program(setup, tuple(lines)))) is not None:
        file.problem(item.key_lines["lines"], f"{where}: the setup and lines in this order are not Python ({error})")
        ok = False
    checks = read_checks(file, item, where)
    if not ok or checks is None:
        return None
    return ParsonsDrill(
        id=str(item["id"]),
        prompt=values["prompt"],
        lines=tuple(lines),
        distractors=tuple(distractors),
        setup=setup,
        checks=checks,
        explanation=values["explanation"],
        source=file.source(line),
    )


def _piece_problem(piece: str) -> str | None:
    """Say what keeps a line from being a Parsons piece (one tap, shown the same in every language)."""
    if not piece.strip():
        return "is blank: every line is one tap"
    indent = len(piece) - len(piece.lstrip(" "))
    if indent % INDENT:
        return f"is indented by {indent} spaces; use multiples of {INDENT}"
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(piece.strip()).readline))
    except (tokenize.TokenError, SyntaxError):
        return "is half a statement: a line is one tap, so join it"
    if any(t.type == tokenize.COMMENT for t in tokens):
        return "has a comment: lines are shown as they are in every language, so explain in the prompt"
    depth = 0
    for token in tokens:
        depth += (token.string in "([{") - (token.string in ")]}") if token.type == tokenize.OP else 0
        if depth < 0:
            return "is half a statement: a line is one tap, so join it"
    return None


def _syntax_error(code: str) -> str | None:
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    return None


def _read_choices(
    file: ContentFile, line: int, item: LinedMap, values: dict[str, Any], where: str, kind: str
) -> ChoiceDrill | None:
    code_lines = _block_lines(file, item, "code", where)
    if code_lines is None:
        return None
    ok = True
    if len(code_lines) > CODE_LINES_MAX:
        file.problem(item.key_lines["code"], f"{where}: 'code' has {len(code_lines)} lines, at most {CODE_LINES_MAX}")
        ok = False
    code = "\n".join(code_lines)
    choices: list[str] = []
    correct: list[int] = []
    reasons: list[str] = []
    seq = values["choices"]
    for index, (choice_line, choice) in enumerate(zip(seq.item_lines, seq, strict=True)):
        text: object = choice
        reasons.append("")
        if isinstance(choice, LinedMap):
            what = f"{where}, choice {index + 1}"
            fields = file.fields(choice, what, {"text": str}, {"correct": bool, "why": str})
            if fields is None:
                return None
            text = fields["text"]
            if fields.get("correct"):
                correct.append(index)
            if "why" in fields:
                ok = _reason(file, choice, "why", what, fields["why"]) and ok
                reasons[-1] = fields["why"]
        text = str(text) if isinstance(text, str) else None
        if not text or not text.strip() or "\n" in text.strip():
            file.problem(choice_line, f"{where}: choice {index + 1} must be one line of text")
            return None
        if display_width(text) > CODE_LINE_MAX:
            file.problem(
                choice_line, f"{where}: choice {index + 1} is {display_width(text)} columns wide, most {CODE_LINE_MAX}"
            )
            ok = False
        choices.append(text.strip())
    low, high = CHOICES
    if not low <= len(choices) <= high:
        file.problem(item.key_lines["choices"], f"{where}: has {len(choices)} choices, expected {low} to {high}")
        return None
    if not one_correct(file, item.key_lines["choices"], where, "choice", correct):
        return None
    if len(set(choices)) != len(choices):
        file.problem(item.key_lines["choices"], f"{where}: two choices are the same")
        return None
    for index, (choice_line, reason) in enumerate(zip(seq.item_lines, reasons, strict=True)):
        if index == correct[0] and reason:
            file.problem(choice_line, f"{where}: choice {index + 1} is the right one, so it takes no 'why'")
            ok = False
        elif index != correct[0] and not reason:
            file.problem(
                choice_line,
                f"{where}: choice {index + 1} is wrong, so it needs a 'why': write it as 'text:' and 'why:', "
                "one sentence on what this choice does instead",
            )
            ok = False
    if kind == "fill":
        ok = _check_gap(file, item, where, code, choices[correct[0]]) and ok
    setup = code_text(values.get("setup"))
    if ok and (error := _syntax_error(program(setup, (code.replace(ChoiceDrill.GAP, choices[correct[0]]),)))):
        file.problem(item.key_lines["code"], f"{where}: the code with the right choice is not Python ({error})")
        ok = False
    if not ok:
        return None
    return ChoiceDrill(
        id=str(item["id"]),
        kind="fill" if kind == "fill" else "predict",
        prompt=values["prompt"],
        code=code,
        choices=tuple(choices),
        correct=correct[0],
        explanation=values["explanation"],
        setup=setup,
        reasons=tuple(reasons),
        source=file.source(line),
    )


def _reason(file: ContentFile, node: LinedMap, key: str, where: str, text: str) -> bool:
    """Check one reason a wrong choice is wrong: lesson markup, short enough to sit under the drill."""
    problems = len(file.problems)
    file.check_lesson_text(node, key, where)
    if len(text) > REASON_MAX:
        file.problem(node.key_lines[key], f"{where}: '{key}' has {len(text)} characters, at most {REASON_MAX}")
    return len(file.problems) == problems


def _check_gap(file: ContentFile, item: LinedMap, where: str, code: str, right: str) -> bool:
    gap = ChoiceDrill.GAP
    if code.count(gap) != 1:
        file.problem(
            item.key_lines["code"], f"{where}: the code must have one gap written {gap}, it has {code.count(gap)}"
        )
        return False
    filled = next(line for line in code.split("\n") if gap in line).replace(gap, right)
    if display_width(filled) > CODE_LINE_MAX:
        file.problem(
            item.key_lines["code"],
            f"{where}: with the right choice the gap's line is {display_width(filled)} columns wide; "
            f"a phone shows {CODE_LINE_MAX}",
        )
        return False
    return True


# Translations


def read_drill_translations(file: ContentFile, data: LinedMap, english: Lesson) -> tuple[Drill, ...]:
    """Overlay a translation's drills on the English ones; those it leaves out are marked as shown in English.

    A drill is translated whole (prompt, explanation, a Parsons drill's check messages, a choice drill's reason for
    each wrong choice) or not at all.
    """
    by_id = {drill.id: drill for drill in english.drills}
    translated: dict[str, Drill] = {}
    for line, item, drill_id in file.unique_ids(file.items(data, "drills", "translation"), "drill"):
        where = f"drill '{drill_id}'"
        source = by_id.get(drill_id)
        if source is None:
            file.problem(item.key_lines["id"], f"{where} is not in the English lesson '{english.id}'")
            continue
        required: dict[str, type] = {"id": str, "prompt": str, "explanation": str}
        optional: dict[str, type] = {"checks": list}
        if not isinstance(source, ParsonsDrill):
            required, optional = {**required, "why": list}, {"code": str}  # a reason for each wrong choice
        values = file.fields(item, where, required, optional)
        if values is None or not _prose(file, item, values, where):
            continue
        if isinstance(source, ParsonsDrill):
            checks = translated_checks(file, item, source.checks, where)
            if checks is None:
                continue
            translated[drill_id] = replace(
                source,
                prompt=values["prompt"],
                explanation=values["explanation"],
                checks=checks,
                source=file.source(line),
            )
            continue
        reasons = _translated_reasons(file, item, source, where)
        if reasons is None:
            continue
        code = source.code
        if "code" in values:
            code = code_text(item["code"])
            if (difference := code_difference(code, source.code)) is not None:
                file.problem(item.key_lines["code"], f"{where}: 'code' {difference}")
                continue
            if _block_lines(file, item, "code", where) is None:
                continue
        translated[drill_id] = replace(
            source,
            prompt=values["prompt"],
            explanation=values["explanation"],
            code=code,
            reasons=reasons,
            source=file.source(line),
        )
    return tuple(translated.get(d.id, replace(d, fallback=True)) for d in english.drills)


def _translated_reasons(file: ContentFile, item: LinedMap, source: ChoiceDrill, where: str) -> tuple[str, ...] | None:
    """Read a translated drill's 'why': one reason per wrong choice, in the order of the English choices."""
    seq = item["why"]
    wrong = [index for index in range(len(source.choices)) if index != source.correct]
    if len(seq) != len(wrong):
        file.problem(
            item.key_lines["why"],
            f"{where}: 'why' has {len(seq)} reasons, the English drill has {len(wrong)} wrong choices: "
            "one reason for each, in the English order",
        )
        return None
    reasons = [""] * len(source.choices)
    for index, line, text in zip(wrong, seq.item_lines, seq, strict=True):
        if not isinstance(text, str) or not text.strip():
            file.problem(line, f"{where}: each reason in 'why' must be text")
            return None
        try:
            lessontext.parse(text)
        except lessontext.MarkupError as exc:
            file.problem(line, f"{where}: a reason in 'why' has {exc}")
            return None
        if len(text.strip()) > REASON_MAX:
            file.problem(line, f"{where}: a reason in 'why' has {len(text.strip())} characters, at most {REASON_MAX}")
            return None
        reasons[index] = text.strip()
    return tuple(reasons)
