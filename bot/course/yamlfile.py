"""Read one lesson file's YAML keeping the line of every key and item, and collect its problems by line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from bot import lessontext
from bot.course.model import Source
from bot.errors import Problem

ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")  # used with fullmatch: '$' would allow a trailing newline


class LinedMap(dict[str, Any]):
    """A YAML mapping that remembers the line of itself and of each key."""

    line = 0
    key_lines: dict[str, int]


class LinedList(list[Any]):
    """A YAML sequence that remembers the line of itself and of each item."""

    line = 0
    item_lines: list[int]


class AsWritten(str):
    """A scalar YAML would read as a number or boolean, kept as the author wrote it.

    Text fields then show `6.` as `6.`, not `6.0`, and `Yes` as `Yes`, not `True`.
    """

    value: object


class _Loader(yaml.SafeLoader):
    duplicate_keys: list[tuple[int, str]]
    bad_keys: list[int]


def _construct_as_written(loader: _Loader, node: yaml.ScalarNode) -> AsWritten:
    scalar = AsWritten(node.value)
    scalar.value = _TYPED_CONSTRUCTORS[node.tag](loader, node)
    return scalar


_TYPED_CONSTRUCTORS = {
    "tag:yaml.org,2002:bool": yaml.SafeLoader.construct_yaml_bool,
    "tag:yaml.org,2002:int": yaml.SafeLoader.construct_yaml_int,
    "tag:yaml.org,2002:float": yaml.SafeLoader.construct_yaml_float,
}


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> LinedMap:
    loader.flatten_mapping(node)
    result = LinedMap()
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
            loader.duplicate_keys.append((line, key))
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = line
    return result


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> LinedList:
    result = LinedList(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    result.item_lines = [child.start_mark.line + 1 for child in node.value]
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)
for _tag in _TYPED_CONSTRUCTORS:
    _Loader.add_constructor(_tag, _construct_as_written)


_KIND_NAMES = {str: "text", list: "a list", dict: "a mapping", bool: "true or false", object: "a value"}


class ContentFile:
    """One YAML file being read: its data (None if unusable) and the problems found in it."""

    def __init__(self, path: Path, problems: list[Problem]):
        self.path = path
        # The path as the author typed it, so an editor can jump to file:line.
        self.name = str(path)
        self.problems = problems
        self.data: LinedMap | None = None
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            self.problem(1, f"not UTF-8 text ({exc.reason} at byte {exc.start})")
            return
        loader = _Loader(text)
        loader.duplicate_keys = []
        loader.bad_keys = []
        try:
            data = loader.get_single_data()
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
        if data is None:
            self.problem(1, "the file is empty")
        elif not isinstance(data, LinedMap):
            self.problem(1, "expected a mapping of keys (like 'id: ...') at the top of the file")
        else:
            self.data = data

    def problem(self, line: int, message: str) -> None:
        """Record a problem at ``line`` of this file."""
        self.problems.append(Problem(self.name, line, message))

    def source(self, line: int) -> Source:
        """Return where content at ``line`` of this file was written."""
        return Source(self.name, line)

    def fields(
        self, node: LinedMap, where: str, required: dict[str, type], optional: dict[str, type]
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
            if isinstance(value, AsWritten):
                value = str(value) if kind is str else value.value
            if not isinstance(value, kind):
                self.problem(node.key_lines[key], f"{where}: '{key}' must be {_KIND_NAMES[kind]}")
                ok = False
                continue
            if kind is str and isinstance(value, str):
                value = value.strip()
                if not value:
                    self.problem(node.key_lines[key], f"{where}: '{key}' is empty")
                    ok = False
                    continue
            values[key] = value
        return values if ok else None

    def check_lesson_text(self, node: LinedMap, key: str, where: str) -> None:
        """Report text whose lesson markup does not render."""
        try:
            lessontext.parse(node[key])
        except lessontext.MarkupError as exc:
            self.problem(node.key_lines[key], f"{where}: '{key}' has {exc}")

    def items(self, node: object, key: str, where: str) -> list[tuple[int, LinedMap]]:
        """Return the (line, mapping) items of a list, reporting items that are not mappings."""
        seq = node.get(key) if isinstance(node, LinedMap) else None
        if not isinstance(seq, LinedList):
            return []
        items = []
        for line, item in zip(seq.item_lines, seq, strict=True):
            if isinstance(item, LinedMap):
                items.append((line, item))
            else:
                self.problem(line, f"{where}: each entry of '{key}' must be a mapping with an 'id'")
        return items

    def unique_ids(self, items: list[tuple[int, LinedMap]], what: str) -> list[tuple[int, LinedMap, str]]:
        """Return (line, item, id) for items with a well-formed id seen once, reporting the others."""
        seen: dict[str, int] = {}
        result = []
        for line, item in items:
            raw_id = item.get("id")
            if raw_id is None:
                self.problem(line, f"{what} without an 'id'")
                continue
            item_id = str(raw_id)
            if not ID.fullmatch(item_id):
                self.problem(item.key_lines["id"], f"{what} id '{item_id}' must be lowercase words joined by '-'")
                continue
            if item_id in seen:
                self.problem(item.key_lines["id"], f"duplicate {what} id '{item_id}' (first at line {seen[item_id]})")
                continue
            seen[item_id] = item.key_lines["id"]
            result.append((line, item, item_id))
        return result


def plain(value: object) -> object:
    """Return YAML data as plain Python data, numbers and booleans typed again."""
    if isinstance(value, AsWritten):
        return value.value
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return value


def key_line(path: str, steps: tuple[str, ...], key: str) -> int | None:
    """Return the line of ``key`` in the mapping at ``steps`` of a YAML file, or None if it is not there.

    A step is a mapping key, or '#<id>' for the list item with that id: ('slides', '#grad-fn') then 'code'.
    """
    node: object = ContentFile(Path(path), []).data
    for step in steps:
        if step.startswith("#") and isinstance(node, LinedList):
            node = next((item for item in node if isinstance(item, LinedMap) and str(item.get("id")) == step[1:]), None)
        elif isinstance(node, LinedMap):
            node = node.get(step)
        else:
            return None
    return node.key_lines[key] if isinstance(node, LinedMap) and key in node else None


def code_line(path: str, steps: tuple[str, ...], key: str) -> int | None:
    """Return the file line where the code under ``key`` starts (see key_line), or None if it is not there.

    A block scalar (``code: |``) starts on the line after its key; a one-line value on the key's own line.
    """
    line = key_line(path, steps, key)
    if line is None:
        return None
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    header = lines[line - 1].split(" #")[0].rstrip() if line <= len(lines) else ""
    return line + 1 if header.endswith(("|", "|-", "|+", ">", ">-", ">+")) else line
