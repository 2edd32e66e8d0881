"""/progress: lessons done and the Quick Check score."""

from __future__ import annotations

from telegram import Update
from telegram.ext import BaseHandler, CommandHandler, filters

from bot import commands, render
from bot.context import CourseContext
from bot.handlers.common import for_learner, reply
from bot.navigation import course_score


@for_learner
async def progress(update: Update, context: CourseContext) -> None:
    """Show lessons done, the score and each lesson's state."""
    db = context.services.db
    user_id = context.learner.user_id
    answers = await db.latest_answers(user_id)
    correct, total = course_score(context.course, answers)
    passed = await db.exercises_passed(user_id)
    solved = await db.drills_solved(user_id)
    screen = render.progress_report(
        context.course,
        await db.progress(user_id),
        correct,
        total,
        len(answers),
        exercises_passed=sum(1 for lesson in context.course.lessons if lesson.id in passed),
        drills_solved=sum(
            1 for lesson in context.course.lessons for drill in lesson.drills if drill.id in solved.get(lesson.id, ())
        ),
    )
    await reply(update, context, screen)


def handlers() -> list[BaseHandler[Update, CourseContext, None]]:
    """Return this feature's handlers."""
    return [CommandHandler(commands.PROGRESS.name, progress, filters=filters.ChatType.PRIVATE)]
