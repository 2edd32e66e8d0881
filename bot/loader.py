"""Load lesson files (YAML) into the course model, collecting every problem with its file and line."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from bot import markup
from bot.course import (
    SOURCE_LANGUAGE,
    Content,
    Course,
    Exercise,
    ExerciseCheck,
    Lesson,
    Question,
    Slide,
    Source,
    Translation,
    untranslated,
)
from bot.errors import Problem

ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")  # used with fullmatch: '$' would allow a trailing newline
# A lesson id travels in button data (64 bytes in all, with a prefix and a slide number).
LESSON_ID_MAX = 32
LANGUAGE_DIR = re.compile(r"^[a-z]{2,3}(_[A-Z][a-zA-Z]{1,3})?$")


class _Map(dict):
    """A YAML mapping that remembers the line of itself and of each key."""

    line = 0
    key_lines: dict[str, int]


class _Seq(list):
    """A YAML sequence that remembers the line of itself and of each item."""

    line = 0
    item_lines: list[int]


class _Typed(str):
    """A scalar YAML would read as a number or boolean, kept as the author wrote it.

    Text fields then show `6.` as `6.`, not `6.0`, and `Yes` as `Yes`, not `True`.
    """

    value: object


class _Loader(yaml.SafeLoader):
    duplicate_keys: list[tuple[int, str]]
    bad_keys: list[int]


def _construct_typed(loader: _Loader, node: yaml.ScalarNode) -> _Typed:
    typed = _Typed(node.value)
    typed.value = _TYPED_CONSTRUCTORS[node.tag](loader, node)
    return typed


_TYPED_CONSTRUCTORS = {
    "tag:yaml.org,2002:bool": yaml.SafeLoader.construct_yaml_bool,
    "tag:yaml.org,2002:int": yaml.SafeLoader.construct_yaml_int,
    "tag:yaml.org,2002:float": yaml.SafeLoader.construct_yaml_float,
}


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> _Map:
    loader.flatten_mapping(node)
    result = _Map()
    result.line = node.start_mark.line + 1
    result.key_lines = {}
    for key_node, value_node in node.value:
        line = key_node.start_mark.line + 1
        if not isinstance(key_node, yaml.ScalarNode):
            loader.bad_keys.append(line)
            continue
        key = str(loader.construct_object(key_node, deep=True))
        if key in result:
            # PyYAML keeps the last value silently; an author deserves to know.
            loader.duplicate_keys.append((line, str(key)))
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = line
    return result


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> _Seq:
    result = _Seq(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    result.item_lines = [child.start_mark.line + 1 for child in node.value]
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)
for _tag in _TYPED_CONSTRUCTORS:
    _Loader.add_constructor(_tag, _construct_typed)


class _File:
    """One YAML file being read: its data and the problems found in it."""

    def __init__(self, path: Path, problems: list[Problem], root: Path):
        self.path = path
        self.name = _display(path, root)
        self.problems = problems
        self.data: Any = None
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            self.problem(1, f"not UTF-8 text ({exc.reason} at byte {exc.start})")
            return
        loader = _Loader(text)
        loader.duplicate_keys = []
        loader.bad_keys = []
        try:
            self.data = loader.get_single_data()
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = mark.line + 1 if mark else 1
            reason = getattr(exc, "problem", None) or str(exc)
            self.problem(line, f"invalid YAML: {reason}")
            return
        finally:
            loader.dispose()
        for line, key in loader.duplicate_keys:
            self.problem(line, f"duplicate key '{key}'")
        for line in loader.bad_keys:
            self.problem(line, "a key must be plain text, like 'title'")
        if self.data is None:
            self.problem(1, "the file is empty")
        elif not isinstance(self.data, _Map):
            self.problem(1, "expected a mapping of keys (like 'id: ...') at the top of the file")
            self.data = None

    def problem(self, line: int, message: str) -> None:
        self.problems.append(Problem(self.name, line, message))

    def source(self, line: int) -> Source:
        return Source(self.name, line)

    def fields(
        self, node: _Map, where: str, required: dict[str, type], optional: dict[str, type]
    ) -> dict[str, Any] | None:
        """Check a mapping's keys and value types; return its values, or None if unusable."""
        ok = True
        allowed = {**required, **optional}
        for key in node:
            if key not in allowed:
                expected = ", ".join(sorted(allowed))
                self.problem(node.key_lines[key], f"{where}: unknown key '{key}' (expected {expected})")
        values: dict[str, Any] = {}
        for key, kind in allowed.items():
            if key not in node or node[key] is None:
                if key in required:
                    self.problem(node.line, f"{where}: missing '{key}'")
                    ok = False
                continue
            value = node[key]
            if isinstance(value, _Typed):
                value = str(value) if kind is str else value.value
            if not isinstance(value, kind):
                self.problem(node.key_lines[key], f"{where}: '{key}' must be {_KIND_NAMES[kind]}")
                ok = False
                continue
            if kind is str:
                value = value.strip()
                if not value:
                    self.problem(node.key_lines[key], f"{where}: '{key}' is empty")
                    ok = False
                    continue
            values[key] = value
        return values if ok else None

    def markup(self, node: _Map, key: str, where: str) -> None:
        """Report text whose markup does not render."""
        try:
            markup.parse(node[key])
        except markup.MarkupError as exc:
            self.problem(node.key_lines[key], f"{where}: '{key}' has {exc}")


_KIND_NAMES = {str: "text", list: "a list", dict: "a mapping", bool: "true or false", object: "a value"}


def _display(path: Path, root: Path) -> str:
    # Paths as the author typed them, so an editor can jump to file:line.
    return str(path)


def _items(file: _File, node: Any, key: str, where: str) -> list[tuple[int, _Map]]:
    """Return the (line, mapping) items of a list, reporting items that are not mappings."""
    seq = node.get(key) if isinstance(node, _Map) else None
    if not isinstance(seq, _Seq):
        return []
    items = []
    for line, item in zip(seq.item_lines, seq, strict=False):
        if isinstance(item, _Map):
            items.append((line, item))
        else:
            file.problem(line, f"{where}: each entry of '{key}' must be a mapping with an 'id'")
    return items


def _unique_ids(file: _File, items: list[tuple[int, _Map]], what: str) -> list[tuple[int, _Map, str]]:
    seen: dict[str, int] = {}
    result = []
    for line, item in items:
        item_id = item.get("id")
        if item_id is None:
            file.problem(line, f"{what} without an 'id'")
            continue
        item_id = str(item_id)
        if not ID.fullmatch(item_id):
            file.problem(item.key_lines["id"], f"{what} id '{item_id}' must be lowercase words joined by '-'")
            continue
        if item_id in seen:
            file.problem(item.key_lines["id"], f"duplicate {what} id '{item_id}' (first at line {seen[item_id]})")
            continue
        seen[item_id] = item.key_lines["id"]
        result.append((line, item, item_id))
    return result


SLIDE_COUNT = (10, 14)
QUIZ_COUNT = (2, 4)


def _read_english_lesson(file: _File, number: int) -> Lesson | None:
    data = file.data
    if data is None:
        return None
    top = file.fields(
        data,
        "lesson",
        {"id": str, "title": str, "summary": str, "slides": list, "quiz": list, "recap": str, "exercise": dict},
        {},
    )
    slides = [
        _read_slide(file, line, item, item_id)
        for line, item, item_id in _unique_ids(file, _items(file, data, "slides", "lesson"), "slide")
    ]
    quiz = [
        _read_question(file, line, item, item_id)
        for line, item, item_id in _unique_ids(file, _items(file, data, "quiz", "lesson"), "question")
    ]
    if top is None:
        return None
    if not ID.fullmatch(top["id"]):
        file.problem(data.key_lines["id"], f"lesson id '{top['id']}' must be lowercase words joined by '-'")
    elif len(top["id"]) > LESSON_ID_MAX:
        file.problem(data.key_lines["id"], f"lesson id '{top['id']}' is longer than {LESSON_ID_MAX} characters")
    for key in ("title", "summary", "recap"):
        file.markup(data, key, "lesson")
    _count(file, data, "slides", len(data["slides"]), SLIDE_COUNT, "slides")
    _count(file, data, "quiz", len(data["quiz"]), QUIZ_COUNT, "questions in the Quick Check")
    exercise = _read_exercise(file, data["exercise"])
    if None in slides or None in quiz or exercise is None:
        return None
    return Lesson(
        id=top["id"],
        number=number,
        title=top["title"],
        summary=top["summary"],
        slides=tuple(slides),
        quiz=tuple(quiz),
        recap=top["recap"],
        exercise=exercise,
        source=file.source(data.line),
    )


CHECK_KINDS = ("equal", "close", "shape", "dtype", "true")
HINT_COUNT = (1, 3)
CHECK_COUNT = (1, 4)


def _texts(file: _File, node: _Map, key: str, where: str, bounds: tuple[int, int]) -> tuple[str, ...] | None:
    seq = node[key]
    low, high = bounds
    if not low <= len(seq) <= high:
        file.problem(node.key_lines[key], f"{where}: has {len(seq)} {key}, expected {low} to {high}")
        return None
    texts = []
    for line, item in zip(seq.item_lines, seq, strict=False):
        if not isinstance(item, str) or not item.strip():
            file.problem(line, f"{where}: each of its {key} must be text")
            return None
        try:
            markup.parse(item)
        except markup.MarkupError as exc:
            file.problem(line, f"{where}: a hint has {exc}")
            return None
        texts.append(item.strip())
    return tuple(texts)


def _read_exercise(file: _File, node: _Map) -> Exercise | None:
    where = "exercise"
    values = file.fields(
        node,
        where,
        {"title": str, "instructions": str, "starter": str, "hints": list, "checks": list, "solution": str},
        {},
    )
    if values is None:
        return None
    for key in ("title", "instructions"):
        file.markup(node, key, where)
    hints = _texts(file, node, "hints", where, HINT_COUNT)
    checks = []
    low, high = CHECK_COUNT
    if not low <= len(node["checks"]) <= high:
        file.problem(node.key_lines["checks"], f"{where}: has {len(node['checks'])} checks, expected {low} to {high}")
    for line, item, check_id in _unique_ids(file, _items(file, node, "checks", where), "check"):
        check_where = f"check '{check_id}'"
        fields = file.fields(item, check_where, {"id": str, "expr": str, "kind": str, "fail": str}, {"expect": object})
        if fields is None:
            continue
        if fields["kind"] not in CHECK_KINDS:
            file.problem(item.key_lines["kind"], f"{check_where}: kind must be one of {', '.join(CHECK_KINDS)}")
            continue
        if fields["kind"] != "true" and "expect" not in fields:
            file.problem(item.line, f"{check_where}: missing 'expect' (only kind 'true' goes without)")
            continue
        try:
            compile(fields["expr"], "<check>", "eval")
        except SyntaxError as exc:
            file.problem(item.key_lines["expr"], f"{check_where}: 'expr' is not a Python expression ({exc.msg})")
            continue
        file.markup(item, "fail", check_where)
        checks.append(
            ExerciseCheck(check_id, fields["expr"], fields["kind"], _plain(fields.get("expect")), fields["fail"])
        )
    if hints is None or len(checks) != len(node["checks"]):
        return None
    return Exercise(
        title=values["title"],
        instructions=values["instructions"],
        starter=_code(values["starter"]),
        hints=hints,
        checks=tuple(checks),
        solution=_code(values["solution"]),
        source=file.source(node.line),
    )


def _plain(value: object) -> object:
    """Return YAML data as plain Python data, numbers and booleans typed again."""
    if isinstance(value, _Typed):
        return value.value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _count(file: _File, data: _Map, key: str, n: int, bounds: tuple[int, int], what: str) -> None:
    low, high = bounds
    if not low <= n <= high:
        file.problem(data.key_lines[key], f"a lesson has {low} to {high} {what}, this one has {n}")


def _read_slide(file: _File, line: int, item: _Map, slide_id: str) -> Slide | None:
    where = f"slide '{slide_id}'"
    values = file.fields(item, where, {"id": str, "title": str, "text": str}, {"code": str, "setup": str})
    if values is None:
        return None
    file.markup(item, "title", where)
    file.markup(item, "text", where)
    return Slide(
        id=slide_id,
        title=values["title"],
        text=values["text"],
        code=_code(item.get("code")),
        source=file.source(line),
    )


def _code(value: Any) -> str | None:
    # Keep the author's indentation; only the block's trailing newline goes.
    return value.rstrip("\n").rstrip() if isinstance(value, str) and value.strip() else None


def _read_question(file: _File, line: int, item: _Map, question_id: str) -> Question | None:
    where = f"question '{question_id}'"
    values = file.fields(item, where, {"id": str, "question": str, "options": list, "explanation": str}, {})
    if values is None:
        return None
    options: list[str] = []
    correct: list[int] = []
    for index, (opt_line, option) in enumerate(zip(values["options"].item_lines, values["options"], strict=False)):
        if isinstance(option, _Map):
            fields = file.fields(option, f"{where}, option {index + 1}", {"text": str}, {"correct": bool})
            if fields is None:
                return None
            options.append(fields["text"])
            if fields.get("correct"):
                correct.append(index)
        elif isinstance(option, str) and option.strip():
            options.append(str(option).strip())
        else:
            file.problem(opt_line, f"{where}: option {index + 1} must be text or a mapping with 'text'")
            return None
    if len(correct) != 1:
        found = "none is" if not correct else f"{len(correct)} are"
        file.problem(item.key_lines["options"], f"{where}: exactly one option must have 'correct: true', {found}")
        return None
    return Question(
        id=question_id,
        question=values["question"],
        options=tuple(options),
        correct=correct[0],
        explanation=values["explanation"],
        source=file.source(line),
    )


def _translated(file: _File, data: _Map, key: str, originals, what: str, lesson_id: str):
    """Yield (line, item, where, English original) for each translated entry, reporting unknown ids."""
    by_id = {original.id: original for original in originals}
    for line, item, item_id in _unique_ids(file, _items(file, data, key, "translation"), what):
        where = f"{what} '{item_id}'"
        if item_id not in by_id:
            file.problem(item.key_lines["id"], f"{where} is not in the English lesson '{lesson_id}'")
            continue
        yield line, item, where, by_id[item_id]


def _read_translation(file: _File, english: Lesson) -> Lesson:
    """Overlay one translation file on its English lesson; anything missing stays English."""
    data = file.data
    top = (
        file.fields(
            data,
            "translation",
            {"lesson": str},
            {
                "title": str,
                "summary": str,
                "slides": list,
                "quiz": list,
                "recap": str,
                "exercise": dict,
                "sources": dict,
            },
        )
        or {}
    )
    for key in ("title", "summary", "recap"):
        if key in top:
            file.markup(data, key, "translation")
    translated_slides: dict[str, Slide] = {}
    for line, item, where, source in _translated(file, data, "slides", english.slides, "slide", english.id):
        values = file.fields(item, where, {"id": str, "title": str, "text": str}, {"code": str})
        if values is None:
            continue
        file.markup(item, "title", where)
        file.markup(item, "text", where)
        code = _code(item.get("code"))
        if code is not None:
            if source.code is None:
                file.problem(item.key_lines["code"], f"{where}: has code, the English slide has none")
                continue
            if (difference := code_difference(code, source.code)) is not None:
                file.problem(item.key_lines["code"], f"{where}: 'code' {difference}")
                continue
        translated_slides[source.id] = replace(
            source,
            title=values["title"],
            text=values["text"],
            code=code or source.code,
            source=file.source(line),
        )
    translated_quiz: dict[str, Question] = {}
    for line, item, where, source in _translated(file, data, "quiz", english.quiz, "question", english.id):
        values = file.fields(item, where, {"id": str, "question": str, "options": list, "explanation": str}, {})
        if values is None:
            continue
        options = values["options"]
        if len(options) != len(source.options):
            file.problem(
                item.key_lines["options"],
                f"{where}: has {len(options)} options, the English question has {len(source.options)}",
            )
            continue
        if any(not isinstance(o, str) or not o.strip() for o in options):
            file.problem(
                item.key_lines["options"],
                f"{where}: list options as plain text; the correct answer comes from English",
            )
            continue
        translated_quiz[source.id] = replace(
            source,
            question=values["question"],
            options=tuple(str(o).strip() for o in options),
            explanation=values["explanation"],
            source=file.source(line),
        )
    parts = {key: data.key_lines[key] for key in ("title", "summary", "recap") if key in top}
    parts |= {f"slide/{slide_id}": slide.source.line for slide_id, slide in translated_slides.items()}
    parts |= {f"question/{question_id}": q.source.line for question_id, q in translated_quiz.items()}
    exercise = english.exercise
    if "exercise" in top and english.exercise is not None:
        exercise = _read_exercise_translation(file, top["exercise"], english.exercise)
    elif english.exercise is not None:
        exercise = replace(english.exercise, fallback=True)
    return replace(
        english,
        title=top.get("title", english.title),
        summary=top.get("summary", english.summary),
        slides=tuple(translated_slides.get(s.id, replace(s, fallback=True)) for s in english.slides),
        quiz=tuple(translated_quiz.get(q.id, replace(q, fallback=True)) for q in english.quiz),
        recap=top.get("recap", english.recap),
        recap_fallback="recap" not in top,
        exercise=exercise,
        translation=_translation(
            file,
            top,
            parts
            | ({"exercise": data.key_lines["exercise"]} if exercise is not None and not exercise.fallback else {}),
        ),
    )


STAMP = re.compile(r"[0-9a-f]{8}")


def _translation(file: _File, top: dict[str, Any], parts: dict[str, int]) -> Translation:
    """Record a translation's parts and its 'sources:' stamps, reporting malformed ones."""
    stamps: dict[str, str] = {}
    node = file.data.get("sources") if "sources" in top else None
    for key, value in (node or {}).items():
        line = node.key_lines[key]
        if not isinstance(value, str) or not STAMP.fullmatch(value):
            file.problem(
                line, f"sources: '{key}' must be an 8-digit hex hash; run `coursebot lint --stamp {file.name}`"
            )
        elif key not in parts:
            file.problem(
                line, f"sources: '{key}' is not translated in this file; run `coursebot lint --stamp {file.name}`"
            )
        else:
            stamps[key] = value
    return Translation(file.name, parts, stamps)


def _read_exercise_translation(file: _File, node: _Map, english: Exercise) -> Exercise:
    """Overlay a translated exercise; on any problem the English exercise is used (and lint fails)."""
    where = "exercise"
    fallback = replace(english, fallback=True)
    values = file.fields(
        node, where, {"title": str, "instructions": str, "hints": list, "checks": list}, {"starter": str}
    )
    if values is None:
        return fallback
    for key in ("title", "instructions"):
        file.markup(node, key, where)
    hints = _texts(file, node, "hints", where, HINT_COUNT)
    if hints is not None and len(hints) != len(english.hints):
        file.problem(
            node.key_lines["hints"], f"{where}: has {len(hints)} hints, the English exercise has {len(english.hints)}"
        )
        hints = None
    starter = _code(values.get("starter"))
    if starter is not None and (difference := code_difference(starter, english.starter)) is not None:
        file.problem(node.key_lines["starter"], f"{where}: 'starter' {difference}")
        starter = None
    fails: dict[str, str] = {}
    by_id = {check.id: check for check in english.checks}
    listed = _unique_ids(file, _items(file, node, "checks", where), "check")
    absent = [check.id for check in english.checks if check.id not in {check_id for _, _, check_id in listed}]
    if absent:
        file.problem(
            node.key_lines["checks"], f"{where}: no translated 'fail' for check {', '.join(map(repr, absent))}"
        )
    for line, item, check_id in listed:
        check_where = f"check '{check_id}'"
        if check_id not in by_id:
            file.problem(item.key_lines["id"], f"{check_where} is not in the English exercise")
            continue
        fields = file.fields(item, check_where, {"id": str, "fail": str}, {})
        if fields is None:
            continue
        file.markup(item, "fail", check_where)
        wanted = "{got}" in by_id[check_id].fail
        others = fields["fail"].replace("{got}", "")
        if ("{got}" in fields["fail"]) != wanted or "{" in others or "}" in others:
            file.problem(
                item.key_lines["fail"],
                f"{check_where}: 'fail' must use {{got}} "
                + (
                    "once, as the English does, and no other braces"
                    if wanted
                    else "only if the English does: it does not"
                ),
            )
            continue
        fails[check_id] = fields["fail"]
    if hints is None or len(fails) != len(english.checks) or (starter is None and "starter" in values):
        return fallback
    return replace(
        english,
        title=values["title"],
        instructions=values["instructions"],
        starter=starter or english.starter,
        hints=hints,
        checks=tuple(replace(check, fail=fails[check.id]) for check in english.checks),
        source=file.source(node.line),
    )


def _code_tokens(code: str) -> tuple[list[tuple[int, str]], list[str]]:
    """Return the code's tokens without comments, and its '# ->' comments, which state what it prints."""
    tokens, arrows = [], []
    for token in tokenize.generate_tokens(io.StringIO(code + "\n").readline):
        if token.type == tokenize.COMMENT:
            if token.string.startswith("# ->"):
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


def _read_course_file(file: _File, english: bool) -> dict[str, Any]:
    if file.data is None:
        return {}
    if english:
        return (
            file.fields(file.data, "course", {"id": str, "title": str, "description": str, "lessons": list}, {}) or {}
        )
    return file.fields(file.data, "course translation", {}, {"title": str, "description": str, "sources": dict}) or {}


def load(lessons_dir: Path) -> tuple[Content | None, list[Problem]]:
    """Read every language under ``lessons_dir``; return the content (None if unusable) and all problems."""
    problems: list[Problem] = []
    root = Path(lessons_dir)
    english_dir = root / SOURCE_LANGUAGE
    course_path = english_dir / "course.yaml"
    if not course_path.is_file():
        problems.append(Problem(_display(course_path, root), 1, "missing: the English course file is required"))
        return None, problems
    course_file = _File(course_path, problems, root)
    course = _read_course_file(course_file, english=True)
    if not course:
        return None, problems
    lessons: list[Lesson] = []
    lesson_stems: list[str] = []
    listed = course["lessons"]
    for number, (line, stem) in enumerate(zip(listed.item_lines, listed, strict=False), start=1):
        path = english_dir / f"{stem}.yaml"
        if not isinstance(stem, str) or not path.is_file():
            course_file.problem(line, f"lesson '{stem}' has no file {_display(path, root)}")
            continue
        lesson = _read_english_lesson(_File(path, problems, root), number)
        if lesson is not None:
            lessons.append(lesson)
            lesson_stems.append(stem)
    seen: dict[str, str] = {}
    for stem, lesson in zip(lesson_stems, lessons, strict=False):
        if lesson.id in seen:
            problems.append(
                Problem(
                    lesson.source.path,
                    lesson.source.line,
                    f"duplicate lesson id '{lesson.id}' (also in {seen[lesson.id]})",
                )
            )
        seen[lesson.id] = lesson.source.path
    for path in sorted(english_dir.glob("*.yaml")):
        if path.stem != "course" and path.stem not in lesson_stems and path.stem not in listed:
            problems.append(Problem(_display(path, root), 1, "this lesson is not listed in course.yaml"))
    if not lessons or len(lessons) != len(listed) or problems:
        return None, problems
    english_course = Course(
        id=course["id"],
        language=SOURCE_LANGUAGE,
        title=course["title"],
        description=course["description"],
        lessons=tuple(lessons),
    )
    translations = {}
    for language_dir in sorted(p for p in root.iterdir() if p.is_dir() and p.name != SOURCE_LANGUAGE):
        if not LANGUAGE_DIR.match(language_dir.name):
            problems.append(
                Problem(_display(language_dir, root), 1, "a language folder is named by its code, like 'ru' or 'pt_BR'")
            )
            continue
        translations[language_dir.name] = _read_language(language_dir, english_course, lesson_stems, problems, root)
    return Content(english=english_course, translations=translations), problems


def _read_language(
    language_dir: Path, english: Course, stems: list[str], problems: list[Problem], root: Path
) -> Course:
    by_stem = dict(zip(stems, english.lessons, strict=False))
    course: dict[str, Any] = {}
    course_translation = None
    overlays: dict[str, Lesson] = {}
    for path in sorted(language_dir.glob("*.y*ml")):
        file = _File(path, problems, root)
        if path.stem == "course":
            course = _read_course_file(file, english=False)
            if file.data is not None:
                parts = {key: file.data.key_lines[key] for key in ("title", "description") if key in course}
                course_translation = _translation(file, course, parts)
            continue
        if file.data is None:
            continue
        source = by_stem.get(path.stem)
        if source is None:
            file.problem(1, f"no English lesson named '{path.stem}' (expected one of {', '.join(stems)})")
            continue
        lesson_id = file.data.get("lesson")
        if lesson_id != source.id:
            file.problem(
                file.data.key_lines.get("lesson", file.data.line),
                f"'lesson' must be '{source.id}', the id of {SOURCE_LANGUAGE}/{path.name}",
            )
        overlays[source.id] = _read_translation(file, source)
    lessons = tuple(overlays.get(lesson.id) or untranslated(lesson) for lesson in english.lessons)
    return replace(
        english,
        language=language_dir.name,
        title=course.get("title", english.title),
        description=course.get("description", english.description),
        lessons=lessons,
        translation=course_translation,
    )
