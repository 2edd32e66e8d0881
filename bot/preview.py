"""Print a lesson as a learner reads it, for authors, without Telegram."""

from __future__ import annotations

from pathlib import Path

from bot import render
from bot.course.model import ParsonsDrill
from bot.errors import ContentError, Problem
from bot.i18n import I18n
from bot.learner import FRESH, DrillProgress
from bot.library.load import load_valid
from bot.telegram_rules.text import visible_length, visible_text


def _buttons(screen: render.Screen) -> str:
    if not screen.buttons:
        return ""
    return "\n".join("  ".join(f"[ {b.text} ]" for b in row) for row in screen.buttons.inline_keyboard)


def preview(lessons_dir: Path, locales_dir: Path, lesson_ref: str, language: str) -> str:
    """Return the text of every message of one lesson, in ``language``, as the learner sees it."""
    i18n = I18n(locales_dir)
    content = load_valid(lessons_dir, i18n)
    course = content.course(language)
    lesson = next((each for each in course.lessons if lesson_ref in (each.id, str(each.number))), None)
    if lesson is None:
        known = ", ".join(f"{each.number} ({each.id})" for each in course.lessons)
        raise ContentError([Problem(str(lessons_dir), 1, f"no lesson {lesson_ref!r}; the lessons are {known}")])
    rule = "─" * 48
    out = []
    with i18n.use(language):
        for index in range(len(lesson.slides)):
            screen = render.slide(course, lesson, index)
            out += [rule, visible_text(screen.text), _buttons(screen), f"({visible_length(screen.text)} characters)"]
        for number, question in enumerate(lesson.quiz, start=1):
            spec = render.poll(question)
            options = [f"  {'✓' if i == spec.correct else '○'} {text}" for i, text in enumerate(spec.options)]
            notice = [visible_text(render.fallback_notice())] if question.fallback else []
            out += [rule, *notice, f"Poll {number}: {spec.question}", *options, f"  💡 {spec.explanation}"]
        result = render.quiz_result(course, lesson, len(lesson.quiz), 0)
        out += [rule, visible_text(result.text), _buttons(result)]
        for drill in lesson.drills:
            # Each drill untouched, then solved the author's way (the right choice, the lines in order).
            order = list(range(len(drill.pieces if isinstance(drill, ParsonsDrill) else drill.choices)))
            placed = tuple(range(len(drill.lines))) if isinstance(drill, ParsonsDrill) else ()
            for view in (
                render.DrillView(FRESH, order),
                render.DrillView(DrillProgress(placed=placed, turn=1, solved=True, done=True), order),
            ):
                screen = render.drill(course, lesson, drill, view)
                out += [rule, visible_text(screen.text), _buttons(screen)]
        out.append(rule)
    return "\n".join(line for line in out if line)
