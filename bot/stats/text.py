"""The stats report as plain text, for a terminal: one block per lesson."""

from __future__ import annotations

from bot.stats.report import ExerciseStats, LessonStats, QuestionStats, Report


def share(part: int, whole: int) -> str:
    """Return ``part`` of ``whole`` as a whole percentage, or '-' when there is no whole."""
    return f"{part / whole:.0%}" if whole else "-"


def counted(n: int | None, noun: str, nouns: str | None = None) -> str:
    """Return ``n`` with its noun in the singular or the plural: '1 learner', '2 learners'.

    The report is for operators and in English only (not through gettext), so English's rule is all it needs.
    """
    return f"{'-' if n is None else n} {noun if n == 1 else (nouns or noun + 's')}"


def seconds(value: float | None) -> str:
    """Return a duration the way the report shows it: '42 s', '3.5 min', or '-'."""
    if value is None:
        return "-"
    return f"{value:.0f} s" if value < 100 else f"{value / 60:.1f} min"


def describe_filters(report: Report) -> str:
    """Return the line saying which events the report counts."""
    f = report.filters
    parts = [
        f"lessons {', '.join(f.lessons)}" if f.lessons else "every lesson",
        f"since {f.since}" if f.since else "all time",
        f"learners reading in {f.language}" if f.language else "every language",
    ]
    return "; ".join(parts)


def render(report: Report) -> str:
    """Return the whole report as text."""
    lines = [f"{report.course_title}: where learners struggle ({describe_filters(report)})"]
    if report.missing_indexes:
        lines.append(
            f"note: the database lacks the report's indexes ({', '.join(report.missing_indexes)}): it reads slowly"
        )
    for lesson in report.lessons:
        lines += ["", *_lesson(lesson)]
    return "\n".join(lines) + "\n"


def _lesson(lesson: LessonStats) -> list[str]:
    lines = [
        f"Lesson {lesson.number}: {lesson.title} ({lesson.id})",
        f"  {lesson.started} started, {lesson.finished} finished ({share(lesson.finished, lesson.started)})",
        "  slide                              reached  stopped here  median time",
    ]
    biggest = max((s.stopped for s in lesson.slides), default=0)
    for slide in lesson.slides:
        mark = "  <- most stop here" if biggest and slide.stopped == biggest else ""
        lines.append(
            f"  {slide.number:>2} {slide.id[:30]:<30} {slide.reached:>8} {slide.stopped:>8} "
            f"{share(slide.stopped, slide.reached):>4} {seconds(slide.median_seconds):>9}{mark}"
        )
    lines.append(f"     {'the Quick Check':<30} {'':>8} {lesson.stopped_at_quiz:>8}")
    for question in lesson.questions:
        lines += _question(question)
    if any(drill.learners for drill in lesson.drills):
        lines.append("  drills (learners who answered; right on the first answer; solved):")
        lines += [
            f"    {drill.id} ({drill.kind}): {drill.learners}; {share(drill.right_first, drill.learners)}; "
            f"{share(drill.solved, drill.learners)}"
            for drill in lesson.drills
        ]
    if lesson.exercise is not None:
        lines += _exercise(lesson.exercise)
    return lines


def _question(question: QuestionStats) -> list[str]:
    lines = [
        f"  question {question.id}: {share(question.right_first, question.learners)} right on the first try "
        f"({counted(question.learners, 'learner')})"
    ]
    for option in question.options:
        lines.append(
            f"    {'✓' if option.correct else ' '} {share(option.chosen, question.learners):>4}  {option.text}"
        )
    lines += [f"    ! {flag}" for flag in question.flags]
    return lines


def _exercise(exercise: ExerciseStats) -> list[str]:
    if not exercise.learners:
        return ["  practice: nobody ran code yet"]
    worst = (
        f"; most failed check: {exercise.most_failed[0]} ({share(exercise.most_failed[1], exercise.failed_runs)} "
        "of failed runs)"
        if exercise.most_failed
        else ""
    )
    hints = ", ".join(f"{n}: {share(count, exercise.learners)}" for n, count in enumerate(exercise.hints, start=1))
    return [
        f"  practice: {counted(exercise.learners, 'learner')} ran code; "
        f"{share(exercise.passed_first, exercise.learners)} passed on the first try, "
        f"{share(exercise.passed, exercise.learners)} in the end; median "
        f"{counted(exercise.median_attempts, 'attempt')}{worst}",
        f"    hints opened (share of learners): {hints}",
    ]
