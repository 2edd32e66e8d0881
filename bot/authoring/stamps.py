"""Stamps: the English each translated part was made from, kept in the translation, and how it changed since.

Every translatable part of the English course ('title', 'slide/<id>', 'question/<id>', 'recap', 'exercise', ...)
has a snapshot: its English fields as plain data. A translation keeps, in its `sources:` block, the snapshot of the
English each part was last checked against (`coursebot lint --stamp`). When the English changes, the snapshots
differ: lint reports the part stale and shows the change as a word diff, so a translator sees what to carry over.

Older files hold only an 8-digit hash of that English (a legacy stamp): still compared, but no diff can be shown;
`coursebot lint --upgrade-stamps` recovers their English from the git history.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bot.authoring.worddiff import word_diff
from bot.course.model import Course, Drill, Lesson, ParsonsDrill, Stamp, Translation
from bot.course.sources import legacy_digest, plain

Snapshot = dict[str, Any]  # a part's English fields, in a fixed order: plain strings, lists and mappings


def course_parts(english: Course) -> dict[str, Snapshot]:
    """Return each translatable part of course.yaml and its English."""
    return {"title": {"title": english.title}, "description": {"description": english.description}}


def lesson_parts(english: Lesson) -> dict[str, Snapshot]:
    """Return each translatable part of a lesson ('slide/<id>', 'recap', ...) and its English."""
    parts: dict[str, Snapshot] = {"title": {"title": english.title}, "summary": {"summary": english.summary}}
    for slide in english.slides:
        parts[f"slide/{slide.id}"] = {"title": slide.title, "text": slide.text, "code": slide.code}
    for question in english.quiz:
        parts[f"question/{question.id}"] = {
            "question": question.question,
            "options": list(question.options),
            "explanation": question.explanation,
        }
    parts["recap"] = {"recap": english.recap}
    for drill in english.drills:
        parts[f"drill/{drill.id}"] = drill_snapshot(drill)
    if english.exercise is not None:
        exercise = english.exercise
        parts["exercise"] = {
            "title": exercise.title,
            "instructions": exercise.instructions,
            "starter": exercise.starter,
            "hints": list(exercise.hints),
            "checks": {check.id: check.fail for check in exercise.checks},
        }
    return parts


def is_current(stamp: Stamp, english: Snapshot) -> bool:
    """Say whether a part stamped ``stamp`` was checked against the English as it is now."""
    if stamp.english is None:
        return stamp.digest == legacy_digest(english)
    return bool(plain(stamp.english) == plain(english))


# --- what changed ---------------------------------------------------------------------------------------------------


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, Mapping):
        return " ".join(f"{key}: {text}" for key, text in value.items())
    if isinstance(value, (list, tuple)):
        return " ".join(f"({number}) {text}" for number, text in enumerate(value, start=1))
    return str(value)


def changes(then: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """Return one line per field whose English changed, as 'field: word diff'."""
    lines = []
    for key in dict.fromkeys([*now, *then]):
        old, new = plain(then.get(key)), plain(now.get(key))
        if old != new:
            diff = word_diff(_as_text(old), _as_text(new))
            lines.append(f"{key}: {diff or '(only spacing or line breaks changed)'}")
    return lines


def drill_snapshot(drill: Drill) -> Snapshot:
    """Return what a drill's translation is made from: its prose, its code and its check messages."""
    if isinstance(drill, ParsonsDrill):
        return {
            "prompt": drill.prompt,
            "lines": list(drill.lines),
            "distractors": list(drill.distractors),
            "explanation": drill.explanation,
            "checks": {check.id: check.fail for check in drill.checks},
        }
    return {
        "prompt": drill.prompt,
        "code": drill.code,
        "choices": list(drill.choices),
        "why": [reason for index, reason in enumerate(drill.reasons) if index != drill.correct],
        "explanation": drill.explanation,
    }


@dataclass(frozen=True)
class Outdated:
    """A translated part whose stamp is missing or does not match the English it translates."""

    path: str
    line: int
    part: str
    stamp: Stamp | None  # None: never stamped
    english: Snapshot  # the English as it is now

    @property
    def stamped(self) -> bool:
        return self.stamp is not None

    def changes(self) -> list[str]:
        """Return the English change since the stamp, one line per field ([] when unknown)."""
        if self.stamp is None or self.stamp.english is None:
            return []
        return changes(self.stamp.english, self.english)

    def __str__(self) -> str:
        fix = f"run `coursebot lint --stamp {self.path} --part {self.part}`"
        if self.stamp is None:
            return f"{self.path}:{self.line}: '{self.part}' has no source stamp; {fix}"
        if self.stamp.english is None:
            return (
                f"{self.path}:{self.line}: '{self.part}' is stale: its English changed since it was translated "
                f"(the stamp is a hash, so what changed is unknown: run `coursebot lint --upgrade-stamps`); "
                f"update it, then {fix}"
            )
        shown = "".join(f"\n    {line}" for line in self.changes())
        return (
            f"{self.path}:{self.line}: '{self.part}' is stale: its English changed since it was translated; "
            f"update it, then {fix}{shown}"
        )


def outdated(translation: Translation | None, current: Mapping[str, Snapshot]) -> list[Outdated]:
    """Return the parts of ``translation`` not stamped with the English as it is now."""
    if translation is None:
        return []
    found = []
    for part, line in translation.parts.items():
        stamp = translation.stamps.get(part)
        if stamp is None or not is_current(stamp, current[part]):
            found.append(Outdated(translation.path, line, part, stamp, current[part]))
    return found


# --- writing a file's `sources:` block -------------------------------------------------------------------------------

_BLOCK_START = re.compile(r"^sources:\s*(#.*)?$")
_HEADER = "sources:  # the English each part was translated from; written by `coursebot lint --stamp`, do not edit"


class _BlockDumper(yaml.SafeDumper):
    """Writes code and other multi-line English as literal blocks, the way lesson files hold them."""


def _represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    style = "|" if "\n" in text and not any(line != line.rstrip() for line in text.splitlines()) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


class _Hash(str):
    """A legacy stamp's hash, written quoted as it always was (so upgrading a file changes only its new stamps)."""


_BlockDumper.add_representer(str, _represent_text)
_BlockDumper.add_representer(
    _Hash, lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", str(text), style='"')
)


def _block(stamps: Mapping[str, Stamp]) -> list[str]:
    """Return the lines of a `sources:` block holding ``stamps`` (legacy ones as their hash)."""
    data = {part: plain(s.english) if s.english is not None else _Hash(s.digest) for part, s in stamps.items()}
    dumped = yaml.dump(data, Dumper=_BlockDumper, allow_unicode=True, sort_keys=False, width=100, indent=2)
    return [_HEADER, *("  " + line if line else line for line in dumped.splitlines())]


def stamp(
    path: Path, translation: Translation, current: Mapping[str, Snapshot], parts: Iterable[str] | None = None
) -> list[Outdated]:
    """Record in ``path``'s `sources:` block that ``parts`` (default: every part the file translates) match the
    English as it is now; other parts keep their stamps.

    Returns the parts that were out of date and are now marked current, each with what changed.
    """
    chosen = list(translation.parts) if parts is None else list(parts)
    unknown = [part for part in chosen if part not in translation.parts]
    if unknown:
        raise ValueError(f"{path} does not translate {', '.join(map(repr, unknown))}")
    accepted = [item for item in outdated(translation, current) if item.part in chosen]
    stamps = {
        part: Stamp(current[part], legacy_digest(current[part])) if part in chosen else translation.stamps[part]
        for part in translation.parts
        if part in chosen or part in translation.stamps
    }
    write(path, stamps)
    return accepted


def write(path: Path, stamps: Mapping[str, Stamp]) -> None:
    """Replace ``path``'s `sources:` block with ``stamps``.

    Only the block is rewritten (it is kept last in the file); the translator's text is untouched.
    """
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    kept: list[str] = []
    inside = False
    for line in lines:
        if _BLOCK_START.match(line):
            inside = True
            continue
        if inside and (not line.strip() or line.startswith((" ", "\t", "#"))):
            continue
        inside = False
        kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    Path(path).write_text("\n".join([*kept, "", *_block(stamps)]) + "\n", encoding="utf-8")
