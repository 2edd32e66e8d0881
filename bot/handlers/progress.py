"""/progress: lessons done and the Quick Check score."""

from __future__ import annotations

from telegram import InlineKeyboardMarkup, Update
from telegram.ext import BaseHandler, CommandHandler, filters

from bot import commands, render, retention_render
from bot.context import CourseContext
from bot.handlers.common import for_learner, reply
from bot.handlers.habits import current_streak
from bot.navigation import course_score
from bot.retention import review
from bot.retention.review import ReviewCard
from bot.safehtml import escape, join
from bot.storage.retention import RetentionStore


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
    await reply(update, context, await with_review(context, screen))


async def with_review(context: CourseContext, screen: render.Screen) -> render.Screen:
    """Add the review's cards (due, learned) and the streak to /progress, with the way into the review."""
    now = context.services.db.clock()
    rows = await RetentionStore(context.services.db).cards(context.learner.user_id)
    summary = review.summary([ReviewCard.from_columns(row) for row in rows], now)
    lines = retention_render.review_lines(summary, await current_streak(context))
    buttons = screen.buttons.inline_keyboard if screen.buttons is not None else ()
    rows_out = [retention_render.review_button(summary.due), *map(list, buttons)]
    return render.Screen(
        join([screen.text, escape("\n".join(lines))]), InlineKeyboardMarkup([row for row in rows_out if row])
    )


def handlers() -> list[BaseHandler[Update, CourseContext, None]]:
    """Return this feature's handlers."""
    return [CommandHandler(commands.PROGRESS.name, progress, filters=filters.ChatType.PRIVATE)]
