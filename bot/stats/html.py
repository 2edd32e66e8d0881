"""The stats report as one self-contained HTML page: charts drawn inline as SVG, no script, nothing fetched.

A funnel per lesson (a bar per slide, as long as the share of the lesson's learners who reached it) and a bar per
question option (as long as the share of first answers that chose it, the right one green). Every text from the
course or the events is escaped.
"""

from __future__ import annotations

from html import escape

from bot.stats.report import ExerciseStats, LessonStats, QuestionStats, Report
from bot.stats.text import counted, describe_filters, seconds, share

# Layout of the charts, in SVG user units (the page scales them to its width).
WIDTH = 640
LABEL = 250  # room for the labels left of the bars
BAR = 22  # height of a row
GAP = 6

_STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2328; margin: 0;
       background: #f6f8fa; }
main { max-width: 860px; margin: 0 auto; padding: 16px; }
section.lesson { background: #fff; border: 1px solid #d0d7de; border-radius: 8px; padding: 12px 16px;
                 margin: 16px 0; }
h1 { font-size: 1.5em; margin: 8px 0; } h2 { font-size: 1.25em; margin: 4px 0 8px; } h3 { font-size: 1.05em; }
.filters, .note { color: #57606a; } .note { border-left: 3px solid #bf8700; padding-left: 8px; }
svg { width: 100%; height: auto; display: block; margin: 8px 0; }
svg text { font: 13px system-ui, sans-serif; fill: #1f2328; } svg text.value { fill: #57606a; }
rect.reached { fill: #54aeff; } rect.stop { fill: #cf222e; } rect.track { fill: #eaeef2; }
rect.right { fill: #2da44e; } rect.wrong { fill: #8c959f; }
table { border-collapse: collapse; width: 100%; font-size: 0.93em; }
th, td { text-align: right; padding: 2px 6px; border-bottom: 1px solid #eaeef2; }
th:nth-child(2), td:nth-child(2) { text-align: left; }
.flag { display: inline-block; background: #fff8c5; border: 1px solid #d4a72c; border-radius: 12px;
        padding: 0 8px; margin: 2px 4px 2px 0; font-size: 0.9em; }
"""


def render(report: Report) -> str:
    """Return the whole report as an HTML page."""
    title = f"{report.course_title}: where learners struggle"
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body><main>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="filters">{escape(describe_filters(report))}</p>',
    ]
    if report.missing_indexes:
        parts.append(
            f'<p class="note">The database lacks the report\'s indexes ({escape(", ".join(report.missing_indexes))}):'
            " it reads slowly.</p>"
        )
    parts += [_lesson(lesson) for lesson in report.lessons]
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"


def _lesson(lesson: LessonStats) -> str:
    head = (
        f'<section class="lesson" id="lesson-{lesson.number}">'
        f"<h2>Lesson {lesson.number}: {escape(lesson.title)}</h2>"
        f"<p>{lesson.started} started, {lesson.finished} finished ({share(lesson.finished, lesson.started)}); "
        f"{lesson.stopped_at_quiz} read every slide but left at the Quick Check.</p>"
    )
    rows = "".join(
        f"<tr><td>{s.number}</td><td>{escape(s.title)}</td><td>{s.reached}</td><td>{s.stopped}</td>"
        f"<td>{share(s.stopped, s.reached)}</td><td>{seconds(s.median_seconds)}</td></tr>"
        for s in lesson.slides
    )
    table = (
        "<table><thead><tr><th>#</th><th>slide</th><th>reached</th><th>stopped here</th><th></th>"
        f"<th>median time</th></tr></thead><tbody>{rows}</tbody></table>"
    )
    questions = "".join(_question(question) for question in lesson.questions)
    exercise = _exercise(lesson.exercise) if lesson.exercise is not None else ""
    return head + _funnel(lesson) + table + questions + _drills(lesson) + exercise + "</section>"


def _drills(lesson: LessonStats) -> str:
    if not any(drill.learners for drill in lesson.drills):
        return ""
    rows = "".join(
        f"<tr><td><code>{escape(drill.id)}</code></td><td>{escape(drill.kind)}</td><td>{drill.learners}</td>"
        f"<td>{share(drill.right_first, drill.learners)}</td><td>{share(drill.solved, drill.learners)}</td></tr>"
        for drill in lesson.drills
    )
    return (
        "<h3>Drills</h3><table><tr><th>drill</th><th>kind</th><th>answered</th><th>right at once</th>"
        f"<th>solved</th></tr>{rows}</table>"
    )


def _funnel(lesson: LessonStats) -> str:
    """A bar per slide, as long as the share of the lesson's learners who reached it; in red, those who stopped."""
    top = max(lesson.started, 1)
    span = WIDTH - LABEL - 60
    rows = []
    for index, slide in enumerate(lesson.slides):
        y = index * (BAR + GAP)
        reached = span * slide.reached / top
        stopped = span * slide.stopped / top
        label = f"{slide.number}. {slide.title}"
        rows.append(
            f'<text x="{LABEL - 8}" y="{y + 15}" text-anchor="end">{escape(_clip(label, 34))}</text>'
            f'<rect class="track" x="{LABEL}" y="{y}" width="{span}" height="{BAR}" rx="3"/>'
            f'<rect class="reached" x="{LABEL}" y="{y}" width="{reached:.1f}" height="{BAR}" rx="3">'
            f"<title>{escape(label)}: {slide.reached} reached, {slide.stopped} stopped here</title></rect>"
            f'<rect class="stop" x="{LABEL + reached - stopped:.1f}" y="{y}" width="{stopped:.1f}" height="{BAR}"/>'
            f'<text class="value" x="{LABEL + span + 6}" y="{y + 15}">{share(slide.reached, lesson.started)}</text>'
        )
    height = len(lesson.slides) * (BAR + GAP)
    return (
        f'<svg class="funnel" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="Funnel of lesson {lesson.number}: learners reaching each slide">{"".join(rows)}</svg>'
    )


def _question(question: QuestionStats) -> str:
    flags = "".join(f'<span class="flag">{escape(flag)}</span>' for flag in question.flags)
    head = (
        f'<h3 id="question-{escape(question.id)}">{escape(question.text)}</h3>'
        f"<p>{share(question.right_first, question.learners)} right on the first try, of "
        f"{counted(question.learners, 'learner')}. {flags}</p>"
    )
    span = WIDTH - LABEL - 60
    total = max(question.learners, 1)
    rows = []
    for index, option in enumerate(question.options):
        y = index * (BAR + GAP)
        length = span * option.chosen / total
        kind = "right" if option.correct else "wrong"
        label = ("✓ " if option.correct else "") + option.text
        rows.append(
            f'<text x="{LABEL - 8}" y="{y + 15}" text-anchor="end">{escape(_clip(label, 34))}</text>'
            f'<rect class="track" x="{LABEL}" y="{y}" width="{span}" height="{BAR}" rx="3"/>'
            f'<rect class="option {kind}" x="{LABEL}" y="{y}" width="{length:.1f}" height="{BAR}" rx="3">'
            f"<title>{escape(option.text)}: chosen first by {option.chosen}</title></rect>"
            f'<text class="value" x="{LABEL + span + 6}" y="{y + 15}">{share(option.chosen, question.learners)}</text>'
        )
    height = len(question.options) * (BAR + GAP)
    chart = (
        f'<svg class="options" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="First answers to {escape(question.id)}, by option">{"".join(rows)}</svg>'
    )
    return head + chart


def _exercise(exercise: ExerciseStats) -> str:
    if not exercise.learners:
        return "<h3>Practice</h3><p>Nobody ran code yet.</p>"
    worst = (
        f" The check failed most often: <code>{escape(exercise.most_failed[0])}</code> "
        f"({share(exercise.most_failed[1], exercise.failed_runs)} of failed runs)."
        if exercise.most_failed
        else ""
    )
    hints = ", ".join(f"hint {n}: {share(count, exercise.learners)}" for n, count in enumerate(exercise.hints, 1))
    return (
        f"<h3>Practice</h3><p>{counted(exercise.learners, 'learner')} ran code; "
        f"{share(exercise.passed_first, exercise.learners)} passed on the first try and "
        f"{share(exercise.passed, exercise.learners)} in the end, after a median of "
        f"{counted(exercise.median_attempts, 'attempt')}.{worst} Hints opened: {escape(hints)}.</p>"
    )


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
