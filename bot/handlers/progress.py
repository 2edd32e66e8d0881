"""/progress: lessons done and the Quick Check score."""

from __future__ import annotations

from telegram import InlineKeyboardMarkup, Update

from bot import commands, render, retention_render
from bot.context import CourseContext
from bot.handlers import comeback
from bot.handlers.common import reply
from bot.handlers.router import Router
from bot.navigation import course_score
from bot.retention import review
from bot.retention.review import ReviewCard
from bot.safehtml import escape, join
from bot.storage.retention import RetentionStore

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
    await reply(update, context, await _with_review(context, screen))


async def _with_review(context: CourseContext, screen: render.Screen) -> render.Screen:
    """Add the review's cards (due, learned) and the streak to /progress, with the way into the review."""
    now = context.services.db.clock()
    rows = await RetentionStore(context.services.db).cards(context.learner.user_id)
    summary = review.summary([ReviewCard.from_columns(row) for row in rows], now)
    lines = retention_render.review_lines(summary, await comeback.current_streak(context))
    kept = [list(row) for row in screen.buttons.inline_keyboard] if screen.buttons is not None else []
    rows_out = [retention_render.review_button(summary.due), *kept]
    return render.Screen(
        join([screen.text, escape("\n".join(lines))]), InlineKeyboardMarkup([row for row in rows_out if row])
    )
