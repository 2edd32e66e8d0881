"""How complete and how current each translation is: the coverage table and the warnings lint prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from babel.messages.catalog import Message
from babel.messages.pofile import read_po

from bot.authoring.stamps import Outdated, course_parts, lesson_parts, outdated
from bot.course.model import Content


@dataclass
class Coverage:
    """One language's figures: how much is translated, out of how much, and how much is out of date."""

    language: str
    slides: tuple[int, int] = (0, 0)
    questions: tuple[int, int] = (0, 0)
    exercises: tuple[int, int] = (0, 0)
    drills: tuple[int, int] = (0, 0)
    lesson_texts: tuple[int, int] = (0, 0)  # lesson titles, summaries, recaps and the course's own texts
    messages: tuple[int, int] = (0, 0)  # UI strings in the catalog
    outdated: list[Outdated] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        figures = (self.slides, self.questions, self.exercises, self.drills, self.lesson_texts, self.messages)
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
        report.drills = _add(report.drills, sum(not d.fallback for d in lesson.drills), len(lesson.drills))
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
    done = sum(1 for m in messages if not m.fuzzy and all(s.strip() for s in _strings(m)))
    return (done, len(messages))


def _strings(message: Message) -> tuple[str, ...]:
    """Return a message's translations: one, or one per plural form."""
    if isinstance(message.string, (list, tuple)):
        return tuple(message.string)
    return (message.string or "",)


def _percent(pair: tuple[int, int]) -> str:
    done, total = pair
    return f"{done}/{total}" + (f" ({100 * done // total}%)" if total else "")


def report_lines(reports: list[Coverage]) -> list[str]:
    """Return the coverage table lint prints: one line per language."""
    lines = ["translation coverage (translated/total; out of date = stale or unstamped parts):"]
    for r in reports:
        lines.append(
            f"  {r.language:<6} slides {_percent(r.slides)}, questions {_percent(r.questions)}, "
            f"exercises {_percent(r.exercises)}, drills {_percent(r.drills)}, lesson texts {_percent(r.lesson_texts)}, "
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
        lines.append(f"{path}: {count} translated {noun} no source stamp; run `coursebot lint --stamp {path}`")
    return lines
