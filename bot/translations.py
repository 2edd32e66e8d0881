"""How complete and how current each translation is: source hashes, staleness, coverage, stamping.

Every translatable part of the English course has a short hash of its text. A translation
records (in its `sources:` block) the hash of the English it was made from; when the English
changes, the hashes differ and the translation is reported stale. `coursebot lint --stamp`
writes the block once a translator has brought a file up to date.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from babel.messages.pofile import read_po

from bot.course import Content, Course, Lesson, Translation

STAMP_LENGTH = 8


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


@dataclass
class Coverage:
    """One language's figures: how much is translated, out of how much, and how much is out of date."""

    language: str
    slides: tuple[int, int] = (0, 0)
    questions: tuple[int, int] = (0, 0)
    exercises: tuple[int, int] = (0, 0)
    lesson_texts: tuple[int, int] = (0, 0)  # lesson titles, summaries, recaps and the course's own texts
    messages: tuple[int, int] = (0, 0)  # UI strings in the catalog
    outdated: list[Outdated] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        figures = (self.slides, self.questions, self.exercises, self.lesson_texts, self.messages)
        return all(done == total for done, total in figures) and not self.outdated


def _add(pair: tuple[int, int], done: int, total: int) -> tuple[int, int]:
    return pair[0] + done, pair[1] + total


def coverage(content: Content, language: str, catalog: Path | None) -> Coverage:
    """Measure one language's translation of the content and of the UI catalog at ``catalog``."""
    english = content.english
    course = content.course(language)
    report = Coverage(language)
    report.outdated += outdated(course.translation, course_parts(english))
    course_done = len(course.translation.parts) if course.translation else 0
    report.lesson_texts = _add(report.lesson_texts, course_done, 2)
    for source, lesson in zip(english.lessons, course.lessons, strict=False):
        report.slides = _add(report.slides, sum(not s.fallback for s in lesson.slides), len(lesson.slides))
        report.questions = _add(report.questions, sum(not q.fallback for q in lesson.quiz), len(lesson.quiz))
        if lesson.exercise is not None:
            report.exercises = _add(report.exercises, int(not lesson.exercise.fallback), 1)
        texts = [p for p in ("title", "summary", "recap") if lesson.translation and p in lesson.translation.parts]
        report.lesson_texts = _add(report.lesson_texts, len(texts), 3)
        report.outdated += outdated(lesson.translation, lesson_parts(source))
    report.messages = _catalog_figures(catalog)
    return report


def _catalog_figures(path: Path | None) -> tuple[int, int]:
    if path is None or not path.is_file():
        return (0, 0)
    with path.open("rb") as f:
        catalog = read_po(f)
    messages = [m for m in catalog if m.id]
    done = sum(
        1
        for m in messages
        if not m.fuzzy and all(s.strip() for s in (m.string if isinstance(m.string, tuple) else (m.string,)))
    )
    return (done, len(messages))


def _percent(pair: tuple[int, int]) -> str:
    done, total = pair
    return f"{done}/{total}" + (f" ({100 * done // total}%)" if total else "")


def report_lines(reports: list[Coverage]) -> list[str]:
    """Return the coverage table lint prints: one line per language."""
    lines = ["translation coverage (translated/total; out of date = stale or unstamped parts):"]
    for r in reports:
        lines.append(
            f"  {r.language:<6} slides {_percent(r.slides)}, questions {_percent(r.questions)}, "
            f"exercises {_percent(r.exercises)}, lesson texts {_percent(r.lesson_texts)}, "
            f"UI messages {_percent(r.messages)}, out of date {len(r.outdated)}"
        )
    return lines


def warning_lines(reports: list[Coverage]) -> list[str]:
    """Return one line per stale part, and one per file for parts never stamped."""
    lines: list[str] = []
    unstamped: dict[str, int] = {}
    for report in reports:
        for item in report.outdated:
            if item.stamped:
                lines.append(str(item))
            else:
                unstamped[item.path] = unstamped.get(item.path, 0) + 1
    for path, count in unstamped.items():
        noun = "part has" if count == 1 else "parts have"
        lines.append(f"{path}: {count} translated {noun} no source hash; run `coursebot lint --stamp {path}`")
    return lines


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
