"""One term per concept in each language: `lessons/<language>/glossary.yaml`, checked against that language's texts.

English's glossary names the concepts, by id, with its own terms. A translation's glossary gives every one of those
concepts the one term it uses and, under `not`, the other names a translator might reach for; lint reports each of
those in a lesson text of that language (slides, questions, recap, exercise, drills, as far as the language
translates them), outside `inline code`. A name is matched as a whole word, case-insensitively; a name in a script
written without spaces (Japanese) is matched wherever it occurs.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bot.course.model import Content, Course, Lesson, ParsonsDrill, Source
from bot.course.parsing import GLOSSARY
from bot.course.yamlfile import ID, ContentFile, LinedList, LinedMap
from bot.errors import Problem
from bot.i18n import DEFAULT_LANGUAGE

GLOSSARY_FILE = f"{GLOSSARY}.yaml"
_INLINE_CODE = re.compile(r"`[^`]*`")


@dataclass(frozen=True)
class Term:
    """A concept's one name in a language, and the names it is not to be called there."""

    concept: str
    use: str
    avoid: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class Glossary:
    """A language's glossary file, read."""

    path: str
    terms: tuple[Term, ...]


def check(content: Content, lessons_dir: Path) -> tuple[list[Problem], list[str]]:
    """Check every language's glossary and its lessons; return the problems and the warnings (a glossary missing)."""
    problems: list[Problem] = []
    warnings: list[str] = []
    english_path = Path(lessons_dir) / DEFAULT_LANGUAGE / GLOSSARY_FILE
    if not english_path.is_file():
        return problems, warnings  # a course without a glossary asks nothing of its translations
    english = read(english_path, None, problems)
    if english is None:
        return problems, warnings
    problems += misnamed(content.english, english)
    concepts = [term.concept for term in english.terms]
    for language, course in sorted(content.translations.items()):
        path = Path(lessons_dir) / language / GLOSSARY_FILE
        if not path.is_file():
            warnings.append(
                f"{path.parent}: no {GLOSSARY_FILE}: give each concept of {english_path} its one term in this language"
            )
            continue
        glossary = read(path, concepts, problems)
        if glossary is not None:
            problems += misnamed(course, glossary)
    return problems, warnings


def read(path: Path, concepts: list[str] | None, problems: list[Problem]) -> Glossary | None:
    """Read a glossary; ``concepts`` are English's (None when reading English's own); None if unusable."""
    file = ContentFile(path, problems)
    before = len(problems)
    if file.data is None:
        return None
    values = file.fields(file.data, "glossary", {"terms": dict}, {})
    if values is None:
        return None
    node: LinedMap = file.data["terms"]
    terms: list[Term] = []
    for concept, entry in node.items():
        line = node.key_lines[concept]
        where = f"glossary: '{concept}'"
        if concepts is None and not ID.fullmatch(concept):
            file.problem(line, f"{where}: a concept id is lowercase words joined by '-'")
            continue
        if concepts is not None and concept not in concepts:
            file.problem(line, f"{where} is not a concept of the English glossary ({', '.join(concepts)})")
            continue
        if not isinstance(entry, LinedMap):
            file.problem(line, f"{where}: give it 'use' (its one term) and, if any, 'not' (names not to use)")
            continue
        fields = file.fields(entry, where, {"use": str}, {"not": list})
        if fields is None:
            continue
        avoid = _names(file, entry, where)
        if avoid is None:
            continue
        if fields["use"].casefold() in {name.casefold() for name in avoid}:
            file.problem(entry.key_lines["not"], f"{where}: '{fields['use']}' is its term, so it is not under 'not'")
            continue
        terms.append(Term(concept, fields["use"], avoid, line))
    missing = [c for c in concepts or () if c not in node]
    if missing:
        names = ", ".join(map(repr, missing))
        file.problem(file.data.key_lines["terms"], f"glossary: no term for {names}: one for each English concept")
    return Glossary(file.name, tuple(terms)) if len(problems) == before else None


def _names(file: ContentFile, entry: LinedMap, where: str) -> tuple[str, ...] | None:
    seq = entry.get("not")
    if not isinstance(seq, LinedList):
        return ()
    names = []
    for line, name in zip(seq.item_lines, seq, strict=True):
        if not isinstance(name, str) or not name.strip():
            file.problem(line, f"{where}: each name under 'not' is text")
            return None
        names.append(name.strip())
    return tuple(names)


def misnamed(course: Course, glossary: Glossary) -> list[Problem]:
    """Return a problem for each text of ``course`` that calls a concept by a name its glossary rules out."""
    found: list[Problem] = []
    for source, what, text in _texts(course):
        prose = _INLINE_CODE.sub(" ", text)
        for term in glossary.terms:
            for name in term.avoid:
                if (match := _pattern(name).search(prose)) is not None:
                    found.append(
                        Problem(
                            source.path,
                            source.line,
                            f"{what}: calls '{term.concept}' '{match.group(0)}'; {glossary.path} says '{term.use}'",
                        )
                    )
    return found


def _pattern(name: str) -> re.Pattern[str]:
    """Match ``name`` as a whole word, or anywhere in a script written without spaces between words."""
    if any(unicodedata.east_asian_width(c) in "WF" for c in name):
        return re.compile(re.escape(name), re.IGNORECASE)
    # Not part of a longer word, nor of code written out (`optimizer.zero_grad()` in a title).
    return re.compile(rf"(?<![\w.]){re.escape(name)}(?!\w|\.\w|\()", re.IGNORECASE)


def _texts(course: Course) -> Iterator[tuple[Source, str, str]]:
    """Yield (where, what, text) for each text of ``course`` written in its own language."""
    for lesson in course.lessons:
        yield from _lesson_texts(lesson, english=course.language == DEFAULT_LANGUAGE)


def _lesson_texts(lesson: Lesson, *, english: bool) -> Iterator[tuple[Source, str, str]]:
    parts = lesson.translation.parts if lesson.translation is not None else {}
    at = lesson.source
    for key, text in (("title", lesson.title), ("summary", lesson.summary)):
        if english or key in parts:
            yield (at if english else Source(at.path, parts[key])), f"lesson {key}", text
    if english or not lesson.recap_fallback:
        yield (at if english else Source(at.path, parts.get("recap", at.line))), "the recap", lesson.recap
    for slide in lesson.slides:
        if english or not slide.fallback:
            yield slide.source, f"slide '{slide.id}'", f"{slide.title}\n{slide.text}"
    for question in lesson.quiz:
        if english or not question.fallback:
            texts = [question.question, *question.options, question.explanation]
            yield question.source, f"question '{question.id}'", "\n".join(texts)
    exercise = lesson.exercise
    if exercise is not None and (english or not exercise.fallback):
        texts = [exercise.title, exercise.instructions, *exercise.hints, *(check.fail for check in exercise.checks)]
        yield exercise.source, "exercise", "\n".join(texts)
    for drill in lesson.drills:
        if english or not drill.fallback:
            texts = [drill.prompt, drill.explanation]
            texts += [check.fail for check in drill.checks] if isinstance(drill, ParsonsDrill) else list(drill.reasons)
            yield drill.source, f"drill '{drill.id}'", "\n".join(texts)
