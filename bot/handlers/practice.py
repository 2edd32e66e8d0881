"""Running code from the chat: /run, fenced code blocks, and graded practice exercises."""

from __future__ import annotations

import logging

from telegram import Update
from telegram.constants import ChatAction
from telegram.ext import CallbackQueryHandler, CommandHandler, MessageHandler, filters

from bot import practice, render
from bot.callbacks import LeavePractice, ShowHint, StartPractice, matches
from bot.context import CourseContext
from bot.course import Lesson
from bot.handlers.common import button, for_learner, lesson_gone, send, show
from bot.i18n import _
from runner.errors import RunnerBusy, RunnerError
from runner.limits import Limits

log = logging.getLogger(__name__)


@button(StartPractice)
async def start_practice(update: Update, context: CourseContext, data: StartPractice) -> str | None:
    """Open the exercise: from now on, a message is taken as an answer."""
    lesson = context.course.lesson(data.lesson)
    if lesson is None or lesson.exercise is None:
        return lesson_gone()
    await context.services.db.start_practice(context.learner.user_id, lesson.id)
    await send(context, context.learner.chat_id, render.practice_intro(context.course, lesson))
    return None


def _current_exercise(context: CourseContext, lesson_id: str) -> Lesson | None:
    lesson = context.course.lesson(lesson_id)
    if lesson is None or lesson.exercise is None or context.learner.practice_lesson_id != lesson.id:
        return None
    return lesson


@button(ShowHint)
async def show_hint(update: Update, context: CourseContext, data: ShowHint) -> str | None:
    """Show the next hint, up to the exercise's last."""
    lesson = _current_exercise(context, data.lesson)
    if lesson is None:
        return _("Open the practice first: it comes after the lesson's Quick Check.")
    shown = await context.services.db.show_hint(context.learner.user_id, len(lesson.exercise.hints))
    if shown == context.learner.hints_shown:
        return _("That was the last hint.")
    await send(context, context.learner.chat_id, render.hint(lesson, context.course, shown))
    return None


@button(LeavePractice)
async def leave_practice(update: Update, context: CourseContext, data: LeavePractice) -> str | None:
    """Stop taking messages as answers."""
    await context.services.db.stop_practice(context.learner.user_id)
    query = update.callback_query
    await show(
        context,
        query.message,
        query.message.chat.id,
        render.notice(_("You left the practice. Send /lessons to go on, or /run with code to try things out.")),
    )
    return None


@for_learner
async def run_command(update: Update, context: CourseContext) -> None:
    """Run the code after /run, ungraded."""
    text = update.effective_message.text or ""
    after_command = text.split(maxsplit=1)[1] if len(text.split(maxsplit=1)) > 1 else ""
    code = practice.fenced_code(text) or after_command
    if not code.strip():
        await send(
            context,
            context.learner.chat_id,
            render.notice(_("Put your code after /run, for example: /run print(2 + 2)")),
        )
        return
    await _start_run(context, code, None)


@for_learner
async def code_message(update: Update, context: CourseContext) -> None:
    """Take a message as code: an answer to the exercise under way, or a fenced block to run."""
    text = update.effective_message.text or ""
    learner = context.learner
    lesson = context.course.lesson(learner.practice_lesson_id) if learner.practice_lesson_id else None
    if lesson is not None and lesson.exercise is not None:
        await _start_run(context, practice.fenced_code(text) or text, lesson)
        return
    code = practice.fenced_code(text)
    if code is None:
        await send(
            context,
            learner.chat_id,
            render.notice(
                _("I work with buttons and commands. Tap a button under a lesson, or send /lessons to open the course.")
            ),
        )
        return
    await _start_run(context, code, None)


async def _start_run(context: CourseContext, code: str, lesson: Lesson | None) -> None:
    services = context.services
    learner = context.learner
    if services.runner is None:
        await send(context, learner.chat_id, render.notice(_("Running code is switched off on this bot.")))
        return
    if learner.user_id in services.running:
        await send(
            context,
            learner.chat_id,
            render.notice(_("Your previous code is still running. Wait for its result, then send again.")),
        )
        return
    services.running.add(learner.user_id)
    # The run goes on in the background, so this learner's next update is read (and told to wait).
    context.application.create_task(_run(context, learner, code, lesson), update=None)


async def _run(context: CourseContext, learner, code: str, lesson: Lesson | None) -> None:
    services = context.services
    language = learner.language or services.i18n.negotiate(learner.telegram_language)
    try:
        with services.i18n.use(language):
            await context.bot.send_chat_action(learner.chat_id, ChatAction.TYPING)
            checks = practice.runner_checks(lesson.exercise) if lesson is not None else None
            try:
                result = await services.runner.run(code, checks=checks)
            except RunnerBusy:
                await send(
                    context,
                    learner.chat_id,
                    render.notice(_("Many learners are running code right now. Try again in a few seconds.")),
                )
                return
            except RunnerError:
                log.exception("the runner failed for user %s", learner.user_id)
                await send(
                    context,
                    learner.chat_id,
                    render.notice(_("Running code is unavailable right now. Please try again later.")),
                )
                return
            output = practice.output_block(result)
            status = practice.status_line(result, Limits.from_dict(services.runner.info.get("limits")))
            if lesson is None:
                await send(context, learner.chat_id, render.run_output(output, status))
                return
            await services.db.record_attempt(learner.user_id, lesson.id, result.passed)
            if result.passed:
                await services.db.stop_practice(learner.user_id)
            course = services.content.course(language)
            lesson = course.lesson(lesson.id)
            lines = ([status] if status and result.status != "ok" else []) + practice.check_feedback(
                lesson.exercise, result
            )
            current = await services.db.find_learner(learner.user_id)
            await send(
                context,
                learner.chat_id,
                render.practice_verdict(
                    course,
                    lesson,
                    output,
                    practice.markup_lines(lines),
                    passed=result.passed,
                    hints_shown=current.hints_shown if current else 0,
                ),
            )
    finally:
        services.running.discard(learner.user_id)


def handlers() -> list:
    """Return this feature's handlers; code_message must come before the fallback for text."""
    private = filters.ChatType.PRIVATE
    return [
        CallbackQueryHandler(start_practice, pattern=matches(StartPractice)),
        CallbackQueryHandler(show_hint, pattern=matches(ShowHint)),
        CallbackQueryHandler(leave_practice, pattern=matches(LeavePractice)),
        CommandHandler("run", run_command, filters=private),
        MessageHandler(private & filters.UpdateType.MESSAGE & filters.TEXT & ~filters.COMMAND, code_message),
    ]
