"""Parse lesson files (YAML) into the course model, collecting every problem with its file and line."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from bot import lessontext
from bot.callbacks import ShowSlide
from bot.course.common import code_difference, code_text, one_correct, read_checks, translated_checks
from bot.course.drill_parsing import read_drill_translations, read_drills
from bot.course.model import (
    Content,
    Course,
    Exercise,
    Lesson,
    Question,
    Slide,
    Stamp,
    Translation,
    untranslated,
)
from bot.course.sources import LEGACY, STAMP_LENGTH, legacy_digest
from bot.course.sources import plain as stamp_plain
from bot.course.yamlfile import ID, ContentFile, LinedMap
from bot.errors import Problem
from bot.i18n import DEFAULT_LANGUAGE

# A lesson id travels in button data (callbacks.MAX_BYTES in all, with a prefix and a slide id).
LESSON_ID_MAX = 32
# A stamp left for a part the file no longer translates: harmless, and `coursebot lint --stamp FILE` drops it.
ORPHAN_STAMP = "is not translated in this file"
# lessons/<language>/glossary.yaml is no lesson: the language's terms, which bot.authoring.glossary checks.
GLOSSARY = "glossary"
LANGUAGE_DIR = re.compile(r"^[a-z]{2,3}(_[A-Z][a-zA-Z]{1,3})?$")


SLIDE_COUNT = (10, 14)
QUIZ_COUNT = (2, 4)


_T = TypeVar("_T")


def _all_read(items: list[_T | None]) -> tuple[_T, ...] | None:
    """Return the items as a tuple, or None if any of them could not be read."""
    read = tuple(item for item in items if item is not None)
    return read if len(read) == len(items) else None


def _read_english_lesson(file: ContentFile, data: LinedMap, number: int) -> Lesson | None:
    top = file.fields(
        data,
        "lesson",
        {"id": str, "title": str, "summary": str, "slides": list, "quiz": list, "recap": str, "exercise": dict},
        {"drills": list},
    )
    slides = [
        _read_slide(file, line, item, item_id)
        for line, item, item_id in file.unique_ids(file.items(data, "slides", "lesson"), "slide")
    ]
    quiz = [
        _read_question(file, line, item, item_id)
        for line, item, item_id in file.unique_ids(file.items(data, "quiz", "lesson"), "question")
    ]
    if top is None:
        return None
    if not ID.fullmatch(top["id"]):
        file.problem(data.key_lines["id"], f"lesson id '{top['id']}' must be lowercase words joined by '-'")
    elif len(top["id"]) > LESSON_ID_MAX:
        file.problem(data.key_lines["id"], f"lesson id '{top['id']}' is longer than {LESSON_ID_MAX} characters")
    else:
        _check_slide_buttons(file, top["id"], [slide for slide in slides if slide is not None])
    for key in ("title", "summary", "recap"):
        file.check_lesson_text(data, key, "lesson")
    _count(file, data, "slides", len(data["slides"]), SLIDE_COUNT, "slides")
    _count(file, data, "quiz", len(data["quiz"]), QUIZ_COUNT, "questions in the Quick Check")
    exercise = _read_exercise(file, data["exercise"])
    drills = read_drills(file, data)
    read_slides, read_quiz = _all_read(slides), _all_read(quiz)
    if read_slides is None or read_quiz is None or exercise is None or drills is None:
        return None
    return Lesson(
        id=top["id"],
        number=number,
        title=top["title"],
        summary=top["summary"],
        slides=read_slides,
        quiz=read_quiz,
        recap=top["recap"],
        exercise=exercise,
        drills=drills,
        source=file.source(data.line),
    )


def _check_slide_buttons(file: ContentFile, lesson_id: str, slides: list[Slide]) -> None:
    """Report a slide whose Back or Next button could not carry its id (Telegram's 64 bytes of data)."""
    for slide in slides:
        try:
            ShowSlide(lesson_id, slide.id).pack()
        except ValueError as exc:
            file.problem(slide.source.line, f"slide '{slide.id}': {exc}")


HINT_COUNT = (1, 3)


def _texts(file: ContentFile, node: LinedMap, key: str, where: str, bounds: tuple[int, int]) -> tuple[str, ...] | None:
    seq = node[key]
    low, high = bounds
    if not low <= len(seq) <= high:
        file.problem(node.key_lines[key], f"{where}: has {len(seq)} {key}, expected {low} to {high}")
        return None
    texts = []
    for line, item in zip(seq.item_lines, seq, strict=True):
        if not isinstance(item, str) or not item.strip():
            file.problem(line, f"{where}: each of its {key} must be text")
            return None
        try:
            lessontext.parse(item)
        except lessontext.MarkupError as exc:
            file.problem(line, f"{where}: a hint has {exc}")
            return None
        texts.append(item.strip())
    return tuple(texts)


def _read_exercise(file: ContentFile, node: LinedMap) -> Exercise | None:
    where = "exercise"
    values = file.fields(
        node,
        where,
        {"title": str, "instructions": str, "starter": str, "hints": list, "checks": list, "solution": str},
        {"hints_for": dict},
    )
    if values is None:
        return None
    for key in ("title", "instructions"):
        file.check_lesson_text(node, key, where)
    hints = _texts(file, node, "hints", where, HINT_COUNT)
    checks = read_checks(file, node, where)
    if hints is None or checks is None:
        return None
    hints_for = _hints_for(file, node, values.get("hints_for") or {}, len(hints))
    return Exercise(
        title=values["title"],
        instructions=values["instructions"],
        starter=_required_code(values["starter"]),
        hints=hints,
        checks=checks,
        solution=_required_code(values["solution"]),
        hints_for=hints_for,
        source=file.source(node.line),
    )


_MISTAKE_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def _hints_for(file: ContentFile, node: LinedMap, given: dict[Any, Any], count: int) -> tuple[tuple[str, int], ...]:
    """Read ``hints_for``: which hint (1-based) to show first to a learner whose run shows a mistake (by its id)."""
    pairs = []
    for mistake, written in given.items():
        # The lesson files' YAML reads every value as text.
        number = int(written) if isinstance(written, str) and written.isdigit() else written
        if not isinstance(mistake, str) or not _MISTAKE_ID.fullmatch(mistake):
            file.problem(node.key_lines["hints_for"], f"exercise: hints_for: {mistake!r} is not a mistake id")
        elif type(number) is not int or not 1 <= number <= count:
            file.problem(node.key_lines["hints_for"], f"exercise: hints_for: {mistake}: name a hint from 1 to {count}")
        else:
            pairs.append((mistake, number))
    return tuple(pairs)


def _count(file: ContentFile, data: LinedMap, key: str, n: int, bounds: tuple[int, int], what: str) -> None:
    low, high = bounds
    if not low <= n <= high:
        file.problem(data.key_lines[key], f"a lesson has {low} to {high} {what}, this one has {n}")


def _read_slide(file: ContentFile, line: int, item: LinedMap, slide_id: str) -> Slide | None:
    where = f"slide '{slide_id}'"
    values = file.fields(item, where, {"id": str, "title": str, "text": str}, {"code": str, "setup": str})
    if values is None:
        return None
    file.check_lesson_text(item, "title", where)
    file.check_lesson_text(item, "text", where)
    return Slide(
        id=slide_id,
        title=values["title"],
        text=values["text"],
        code=_code(item.get("code")),
        setup=_code(item.get("setup")),
        source=file.source(line),
    )


def _code(value: object) -> str | None:
    return code_text(value) or None


def _required_code(value: str) -> str:
    return _code(value) or value


def _read_question(file: ContentFile, line: int, item: LinedMap, question_id: str) -> Question | None:
    where = f"question '{question_id}'"
    values = file.fields(item, where, {"id": str, "question": str, "options": list, "explanation": str}, {})
    if values is None:
        return None
    listed = file.items(item, "options", where)
    if len(listed) != len(values["options"]):
        return None  # an option that is not a mapping, reported by items()
    options: list[str] = []
    ids: list[str] = []
    correct: list[int] = []
    # Each option's id is what an answer is recorded by, whatever order the bot shows the options in.
    for index, (_opt_line, option, option_id) in enumerate(file.unique_ids(listed, "option")):
        fields = file.fields(option, f"{where}, option {index + 1}", {"id": str, "text": str}, {"correct": bool})
        if fields is None:
            return None
        options.append(fields["text"])
        ids.append(option_id)
        if fields.get("correct"):
            correct.append(index)
    if len(options) != len(listed):
        return None  # an option without a usable id, reported by unique_ids()
    if not one_correct(file, item.key_lines["options"], where, "option", correct):
        return None
    return Question(
        id=question_id,
        question=values["question"],
        options=tuple(options),
        correct=correct[0],
        explanation=values["explanation"],
        option_ids=tuple(ids),
        source=file.source(line),
    )


_Original = TypeVar("_Original", Slide, Question)


def _translated(
    file: ContentFile, data: LinedMap, key: str, originals: Sequence[_Original], what: str, lesson_id: str
) -> Iterator[tuple[int, LinedMap, str, _Original]]:
    """Yield (line, item, where, English original) for each translated entry, reporting unknown ids."""
    by_id = {original.id: original for original in originals}
    for line, item, item_id in file.unique_ids(file.items(data, key, "translation"), what):
        where = f"{what} '{item_id}'"
        if item_id not in by_id:
            file.problem(item.key_lines["id"], f"{where} is not in the English lesson '{lesson_id}'")
            continue
        yield line, item, where, by_id[item_id]


def _read_translation(file: ContentFile, data: LinedMap, english: Lesson) -> Lesson:
    """Overlay one translation file on its English lesson; anything missing stays English."""
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
                "drills": list,
                "sources": dict,
            },
        )
        or {}
    )
    for key in ("title", "summary", "recap"):
        if key in top:
            file.check_lesson_text(data, key, "translation")
    translated_slides: dict[str, Slide] = {}
    for line, item, where, source in _translated(file, data, "slides", english.slides, "slide", english.id):
        values = file.fields(item, where, {"id": str, "title": str, "text": str}, {"code": str})
        if values is None:
            continue
        file.check_lesson_text(item, "title", where)
        file.check_lesson_text(item, "text", where)
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
    for line, item, where, question in _translated(file, data, "quiz", english.quiz, "question", english.id):
        values = file.fields(item, where, {"id": str, "question": str, "options": list, "explanation": str}, {})
        if values is None:
            continue
        options = values["options"]
        if len(options) != len(question.options):
            file.problem(
                item.key_lines["options"],
                f"{where}: has {len(options)} options, the English question has {len(question.options)}",
            )
            continue
        if any(not isinstance(o, str) or not o.strip() for o in options):
            file.problem(
                item.key_lines["options"],
                f"{where}: list options as plain text; the correct answer comes from English",
            )
            continue
        translated_quiz[question.id] = replace(
            question,
            question=values["question"],
            options=tuple(str(o).strip() for o in options),
            explanation=values["explanation"],
            source=file.source(line),
        )
    parts: dict[str, int] = {key: data.key_lines[key] for key in ("title", "summary", "recap") if key in top}
    parts |= {f"slide/{slide_id}": slide.source.line for slide_id, slide in translated_slides.items()}
    parts |= {f"question/{question_id}": q.source.line for question_id, q in translated_quiz.items()}
    drills = read_drill_translations(file, data, english)
    parts |= {f"drill/{drill.id}": drill.source.line for drill in drills if not drill.fallback}
    exercise: Exercise | None = english.exercise
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
        drills=drills,
        translation=_translation(
            file,
            data,
            top,
            parts
            | ({"exercise": data.key_lines["exercise"]} if exercise is not None and not exercise.fallback else {}),
        ),
    )


def _translation(file: ContentFile, data: LinedMap, top: dict[str, Any], parts: dict[str, int]) -> Translation:
    """Record a translation's parts and its 'sources:' stamps, reporting malformed ones."""
    stamps: dict[str, Stamp] = {}
    node = data.get("sources") if "sources" in top else None
    if not isinstance(node, LinedMap):
        node = LinedMap()
    for key, value in node.items():
        line = node.key_lines[key]
        if isinstance(value, LinedMap):
            english = stamp_plain(value)
            stamp = Stamp(english, legacy_digest(english))
        elif isinstance(value, str) and LEGACY.fullmatch(value):
            stamp = Stamp(None, value)
        else:
            file.problem(
                line,
                f"sources: '{key}' must hold the English it was translated from (or a legacy hash of "
                f"{STAMP_LENGTH} hex digits); run `coursebot lint --stamp {file.name} --part {key}`",
            )
            continue
        if key not in parts:
            file.problem(line, f"sources: '{key}' {ORPHAN_STAMP}; run `coursebot lint --stamp {file.name}`")
        else:
            stamps[key] = stamp
    return Translation(file.name, parts, stamps)


def _read_exercise_translation(file: ContentFile, node: LinedMap, english: Exercise) -> Exercise:
    """Overlay a translated exercise; on any problem the English exercise is used (and lint fails)."""
    where = "exercise"
    fallback = replace(english, fallback=True)
    values = file.fields(
        node, where, {"title": str, "instructions": str, "hints": list, "checks": list}, {"starter": str}
    )
    if values is None:
        return fallback
    for key in ("title", "instructions"):
        file.check_lesson_text(node, key, where)
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
    checks = translated_checks(file, node, english.checks, where)
    if hints is None or checks is None or (starter is None and "starter" in values):
        return fallback
    return replace(
        english,
        title=values["title"],
        instructions=values["instructions"],
        starter=starter or english.starter,
        hints=hints,
        checks=checks,
        source=file.source(node.line),
    )


def _read_course_file(file: ContentFile, english: bool) -> dict[str, Any]:
    if file.data is None:
        return {}
    if english:
        return (
            file.fields(file.data, "course", {"id": str, "title": str, "description": str, "lessons": list}, {}) or {}
        )
    return file.fields(file.data, "course translation", {}, {"title": str, "description": str, "sources": dict}) or {}


def parse(lessons_dir: Path) -> tuple[Content | None, list[Problem]]:
    """Read every language under ``lessons_dir``; return the content (None if unusable) and all problems."""
    problems: list[Problem] = []
    root = Path(lessons_dir)
    english_dir = root / DEFAULT_LANGUAGE
    course_path = english_dir / "course.yaml"
    if not course_path.is_file():
        problems.append(Problem(str(course_path), 1, "missing: the English course file is required"))
        return None, problems
    course_file = ContentFile(course_path, problems)
    course = _read_course_file(course_file, english=True)
    if not course:
        return None, problems
    lessons: list[Lesson] = []
    lesson_stems: list[str] = []
    listed = course["lessons"]
    for number, (line, stem) in enumerate(zip(listed.item_lines, listed, strict=True), start=1):
        path = english_dir / f"{stem}.yaml"
        if not isinstance(stem, str) or not path.is_file():
            course_file.problem(line, f"lesson '{stem}' has no file {path}")
            continue
        lesson_file = ContentFile(path, problems)
        lesson = _read_english_lesson(lesson_file, lesson_file.data, number) if lesson_file.data is not None else None
        if lesson is not None:
            lessons.append(lesson)
            lesson_stems.append(stem)
    seen: dict[str, str] = {}
    for lesson in lessons:
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
        if path.stem not in ("course", GLOSSARY) and path.stem not in lesson_stems and path.stem not in listed:
            problems.append(Problem(str(path), 1, "this lesson is not listed in course.yaml"))
    if not lessons or len(lessons) != len(listed) or problems:
        return None, problems
    english_course = Course(
        id=course["id"],
        language=DEFAULT_LANGUAGE,
        title=course["title"],
        description=course["description"],
        lessons=tuple(lessons),
    )
    translations: dict[str, Course] = {}
    for language_dir in sorted(p for p in root.iterdir() if p.is_dir() and p.name != DEFAULT_LANGUAGE):
        if not LANGUAGE_DIR.match(language_dir.name):
            problems.append(
                Problem(str(language_dir), 1, "a language folder is named by its code, like 'ru' or 'pt_BR'")
            )
            continue
        translations[language_dir.name] = _read_language(language_dir, english_course, lesson_stems, problems)
    return Content(english=english_course, translations=translations), problems


def _read_language(language_dir: Path, english: Course, stems: list[str], problems: list[Problem]) -> Course:
    by_stem = dict(zip(stems, english.lessons, strict=True))
    course: dict[str, Any] = {}
    course_translation = None
    overlays: dict[str, Lesson] = {}
    for path in sorted(language_dir.glob("*.y*ml")):
        if path.stem == GLOSSARY:
            continue
        file = ContentFile(path, problems)
        if path.stem == "course":
            course = _read_course_file(file, english=False)
            if file.data is not None:
                parts: dict[str, int] = {
                    key: file.data.key_lines[key] for key in ("title", "description") if key in course
                }
                course_translation = _translation(file, file.data, course, parts)
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
                f"'lesson' must be '{source.id}', the id of {DEFAULT_LANGUAGE}/{path.name}",
            )
        overlays[source.id] = _read_translation(file, file.data, source)
    lessons = tuple(overlays.get(lesson.id) or untranslated(lesson) for lesson in english.lessons)
    return replace(
        english,
        language=language_dir.name,
        title=course.get("title", english.title),
        description=course.get("description", english.description),
        lessons=lessons,
        translation=course_translation,
    )
