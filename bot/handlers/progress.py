"""/progress: lessons done and the Quick Check score."""

from __future__ import annotations

from telegram import Update

from bot import commands, render
from bot.context import CourseContext
from bot.handlers.common import reply
from bot.handlers.router import Router
from bot.navigation import course_score

router = Router("progress")


@router.command(commands.PROGRESS)
async def progress(update: Update, context: CourseContext) -> None:
    """Show lessons done, the score and each lesson's state."""
    snapshot = context.snapshot
    answers = await snapshot.all_answers()
    correct, total = course_score(context.course, answers)
    passed = await context.services.db.exercises_passed(context.learner.user_id)
    solved = await snapshot.all_solved()
    screen = render.progress_report(
        context.course,
        await snapshot.all_progress(),
        correct,
        total,
        len(answers),
        exercises_passed=sum(1 for lesson in context.course.lessons if lesson.id in passed),
        drills_solved=sum(
            1 for lesson in context.course.lessons for drill in lesson.drills if drill.id in solved.get(lesson.id, ())
        ),
    )
    await reply(update, context, screen)
