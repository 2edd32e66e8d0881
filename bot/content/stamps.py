"""Stamps: the hash of the English each translated part was made from, and rewriting a file's stamps.

Every translatable part of the English course has a short hash of its text. A translation
records (in its `sources:` block) the hash of the English it was made from; when the English
changes, the hashes differ and the translation is reported stale. `coursebot lint --stamp`
writes the block once a translator has brought a file up to date.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from bot.content.model import Course, Drill, Lesson, ParsonsDrill, Translation

STAMP_LENGTH = 8  # hex digits of a part's hash
STAMP = re.compile(f"[0-9a-f]{{{STAMP_LENGTH}}}")  # used with fullmatch


def _digest(*texts: object) -> str:
    return hashlib.sha256(json.dumps(texts, ensure_ascii=False).encode()).hexdigest()[:STAMP_LENGTH]


def course_parts(english: Course) -> dict[str, str]:
    """Return each translatable part of course.yaml and the hash of its English."""
    return {"title": _digest(english.title), "description": _digest(english.description)}


def lesson_parts(english: Lesson) -> dict[str, str]:
    """Return each translatable part of a lesson ('slide/<id>', 'recap', ...) and the hash of its English."""
    parts = {"title": _digest(english.title), "summary": _digest(english.summary)}
    for slide in english.slides:
        parts[f"slide/{slide.id}"] = _digest(slide.title, slide.text, slide.code)
    for question in english.quiz:
        parts[f"question/{question.id}"] = _digest(question.question, question.options, question.explanation)
    parts["recap"] = _digest(english.recap)
    for drill in english.drills:
        parts[f"drill/{drill.id}"] = _digest(drill_text(drill))
    if english.exercise is not None:
        exercise = english.exercise
        parts["exercise"] = _digest(
            exercise.title,
            exercise.instructions,
            exercise.starter,
            exercise.hints,
            [(check.id, check.fail) for check in exercise.checks],
        )
    return parts


def drill_text(drill: Drill) -> list[object]:
    """Return what a drill's translation is made from: its prose, its code and its check messages."""
    if isinstance(drill, ParsonsDrill):
        return [drill.prompt, drill.lines, drill.distractors, drill.explanation, [(c.id, c.fail) for c in drill.checks]]
    return [drill.prompt, drill.code, drill.choices, drill.explanation]


@dataclass(frozen=True)
class Outdated:
    """A translated part whose stamp is missing or does not match the English it translates."""

    path: str
    line: int
    part: str
    stamped: bool  # False: no stamp at all; True: stamped from an older English

    def __str__(self) -> str:
        if self.stamped:
            return (
                f"{self.path}:{self.line}: '{self.part}' is stale: its English changed since it was translated; "
                f"update it, then run `coursebot lint --stamp {self.path}`"
            )
        return f"{self.path}:{self.line}: '{self.part}' has no source hash; run `coursebot lint --stamp {self.path}`"


def outdated(translation: Translation | None, current: dict[str, str]) -> list[Outdated]:
    """Return the parts of ``translation`` not stamped with the current English hash."""
    if translation is None:
        return []
    found = []
    for part, line in translation.parts.items():
        stamp = translation.stamps.get(part)
        if stamp != current[part]:
            found.append(Outdated(translation.path, line, part, stamped=stamp is not None))
    return found


# Stamping: rewrite a file's `sources:` block from the current English.

_BLOCK_START = re.compile(r"^sources:\s*(#.*)?$")


def stamp(path: Path, translation: Translation, current: dict[str, str]) -> int:
    """Write ``path``'s `sources:` block with the current English hash of each part it translates.

    Only the block is rewritten (it is kept last in the file); the translator's text is untouched.
    Returns the number of parts stamped.
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
    block = ["", "sources:  # hashes of the English each part was translated from: `coursebot lint --stamp`"]
    block += [f'  {part}: "{current[part]}"' for part in translation.parts]
    Path(path).write_text("\n".join(kept + block) + "\n", encoding="utf-8")
    return len(translation.parts)
