"""Running code from the chat: /run, fenced code blocks, and graded practice exercises."""

from __future__ import annotations

import logging
import time

from telegram import Update
from telegram.constants import ChatAction
from telegram.ext import BaseHandler, CallbackQueryHandler, CommandHandler, MessageHandler, filters

from bot import commands, feedback, render
from bot.callbacks import LeavePractice, ShowHint, StartPractice, matches
from bot.context import CourseContext
from bot.course import runner_checks
from bot.course.model import Exercise, Lesson
from bot.handlers.common import button, for_learner, lesson_gone, record, reply, retire_keyboard, send
from bot.i18n import _
from bot.learner import EventKind, Learner
from bot.states import PRACTICE, Practice, PracticeStep, practice_state
from runner.client import JobLost, Runner, RunnerBusy, RunnerError, RunResult, Status

log = logging.getLogger(__name__)


async def send_practice_screen(context: CourseContext, chat_id: int, screen: render.Screen) -> None:
    """Send a practice screen, taking the buttons off the one before it: only the newest offers Hint and Leave."""
    services, user_id = context.services, context.learner.user_id
    previous = services.practice_keyboards.pop(user_id, None)
    if previous is not None:
        await retire_keyboard(context, chat_id, previous)
    sent = await send(context, chat_id, screen)
    if screen.buttons is not None:
        services.practice_keyboards[user_id] = sent.message_id


@button(StartPractice)
async def start_practice(update: Update, context: CourseContext, data: StartPractice) -> str | None:
    """Open the exercise: from now on, a message is taken as an answer."""
    lesson = context.course.lesson(data.lesson)
    if lesson is None or lesson.exercise is None:
        return lesson_gone()
    await context.services.db.start_practice(context.learner.user_id, lesson.id)
    await send_practice_screen(context, context.learner.chat_id, render.practice_intro(context.course, lesson))
    return None


def _exercise_under_way(context: CourseContext, lesson_id: str | None, step: PracticeStep) -> Lesson | None:
    """Return the lesson whose exercise the learner practises, if ``step`` may be taken in it now."""
    lesson = context.course.lesson(lesson_id) if lesson_id else None
    if lesson is None or lesson.exercise is None:
        return None
    return lesson if PRACTICE.allows(practice_state(context.learner, lesson.id), step) else None


@button(ShowHint)
async def show_hint(update: Update, context: CourseContext, data: ShowHint) -> str | None:
    """Show the next hint, up to the exercise's last."""
    lesson = _exercise_under_way(context, data.lesson, PracticeStep.HINT)
    if lesson is None or lesson.exercise is None:
        # An old Hint button: say why it does nothing now, and never "open the practice" to one who passed it.
        if data.lesson in await context.services.db.exercises_passed(context.learner.user_id):
            return _("You passed this practice already: no hints needed. ✅")
        return _("This practice is closed now. Open it again from /lessons to see its hints.")
    shown = await context.services.db.show_hint(context.learner.user_id, len(lesson.exercise.hints))
    if shown == context.learner.hints_shown:
        return _("That was the last hint.")
    screen = render.hint(lesson, context.course, shown, data.mistake)
    await send_practice_screen(context, context.learner.chat_id, screen)
    await record(context, EventKind.HINT, lesson.id, item_id=str(shown))
    return None


async def _leave(context: CourseContext) -> str | None:
    """Leave the exercise under way, if any: messages are no longer answers; return the lesson left."""
    left = context.learner.practice_lesson_id
    if left is None:
        return None
    await context.services.db.stop_practice(context.learner.user_id)
    await record(context, EventKind.LEAVE, left)
    return left


async def leave_other_practice(context: CourseContext, lesson_id: str) -> None:
    """Leave the practice of another lesson when the learner opens ``lesson_id``: going elsewhere is leaving."""
    if practice_state(context.learner) is Practice.ON and context.learner.practice_lesson_id != lesson_id:
        await _leave(context)


@button(LeavePractice)
async def leave_practice(update: Update, context: CourseContext, data: LeavePractice) -> str | None:
    """Stop taking messages as answers, and say so below, where the learner looks, with the ways on."""
    left = await _leave(context)
    if left is None:
        return _("You are not in a practice right now.")
    # A new message, not an edit: the tapped message (a hint, a verdict, the task) keeps what it says.
    screen = render.practice_left(context.course, context.course.lesson(left))
    await send_practice_screen(context, context.learner.chat_id, screen)
    return None


@for_learner
async def run_command(update: Update, context: CourseContext) -> None:
    """Run the code after /run, ungraded."""
    text = (update.effective_message.text if update.effective_message else None) or ""
    after_command = text.split(maxsplit=1)[1] if len(text.split(maxsplit=1)) > 1 else ""
    code = feedback.fenced_code(text) or after_command
    if not code.strip():
        await reply(update, context, render.notice(_("Put your code after /run, for example: /run print(2 + 2)")))
        return
    await _start_run(update, context, code, None)


@for_learner
async def code_message(update: Update, context: CourseContext) -> None:
    """Take a message as code: an answer to the exercise under way, or a fenced block to run."""
    text = (update.effective_message.text if update.effective_message else None) or ""
    lesson = _exercise_under_way(context, context.learner.practice_lesson_id, PracticeStep.ANSWER)
    if lesson is not None and feedback.reads_as_prose(text):
        # A question to the bot, not an answer: not run, not counted; Hint and Leave are the ways on.
        screen = render.prose_in_practice(context.course, lesson, context.learner.hints_shown)
        await send_practice_screen(context, context.learner.chat_id, screen)
        return
    if lesson is not None:
        await _start_run(update, context, feedback.fenced_code(text) or text, lesson)
        return
    code = feedback.fenced_code(text)
    if code is None and feedback.looks_like_code(text):
        await reply(update, context, render.code_outside_practice())
        return
    if code is None:
        await reply(
            update,
            context,
            render.notice(
                _("I work with buttons and commands. Tap a button under a lesson, or send /lessons to open the course.")
            ),
        )
        return
    await _start_run(update, context, code, None)


async def _start_run(update: Update, context: CourseContext, code: str, lesson: Lesson | None) -> None:
    services = context.services
    learner = context.learner
    if services.runner is None:
        await send(context, learner.chat_id, render.notice(_("Running code is switched off on this bot.")))
        return
    if learner.user_id in services.running:
        services.metrics.rejections.labels("running").inc()
        await send(
            context,
            learner.chat_id,
            render.notice(_("Your previous code is still running. Wait for its result, then send again.")),
        )
        return
    services.running.add(learner.user_id)
    # The run goes on in the background, so this learner's next update is read (and told to wait). The task
    # carries its update: it runs in the update's language, and a failure in it reaches the error handler,
    # which tells the learner.
    context.application.create_task(_run(context, services.runner, learner, code, lesson), update=update)


async def _run(context: CourseContext, runner: Runner, learner: Learner, code: str, lesson: Lesson | None) -> None:
    services = context.services
    try:
        await context.bot.send_chat_action(learner.chat_id, ChatAction.TYPING)
        exercise = lesson.exercise if lesson is not None else None
        started = time.monotonic()
        try:
            result = await runner.run(code, checks=runner_checks.exercise_checks(exercise) if exercise else None)
        except RunnerBusy:
            services.metrics.rejections.labels("busy").inc()
            await send(
                context,
                learner.chat_id,
                render.notice(_("Many learners are running code right now. Try again in a few seconds.")),
            )
            return
        except JobLost as exc:
            # The runner restarted (or died) with this job: nothing ran to an end, and sending it again is safe.
            services.metrics.jobs.labels("failed").inc()
            log.warning("user %s's code has no result: %s", learner.user_id, exc)
            await send(
                context,
                learner.chat_id,
                render.notice(
                    _(
                        "The code runner restarted while your code was running, so there is no result. "
                        "Please send it again."
                    )
                ),
            )
            return
        except RunnerError:
            services.metrics.jobs.labels("failed").inc()
            log.exception("the runner failed for user %s", learner.user_id)
            await send(
                context,
                learner.chat_id,
                render.notice(_("Running code is unavailable right now. Please try again later.")),
            )
            return
        services.metrics.jobs.labels(result.status).inc()
        services.metrics.job_seconds.observe(time.monotonic() - started)
        status = feedback.status_line(result, runner.info.limits)
        if lesson is None or exercise is None or not await _still_practising(context, learner, lesson):
            advice = feedback.run_advice(result)
            await send(context, learner.chat_id, render.run_output(feedback.output_block(result), status, advice))
            return
        await _verdict(context, learner, lesson, exercise, result, status)
    finally:
        services.running.discard(learner.user_id)


async def _still_practising(context: CourseContext, learner: Learner, lesson: Lesson) -> bool:
    """Return whether the learner is still on ``lesson``'s exercise: one left while the code ran gives no verdict."""
    current = await context.services.db.find_learner(learner.user_id)
    return current is not None and practice_state(current, lesson.id) is Practice.ON


async def _verdict(
    context: CourseContext,
    learner: Learner,
    lesson: Lesson,
    exercise: Exercise,
    result: RunResult,
    status: str | None,
) -> None:
    db = context.services.db
    await db.record_attempt(learner.user_id, lesson.id, result.passed)
    verdict, failed_check = feedback.run_event(result)
    await record(context, EventKind.RUN, lesson.id, item_id="exercise", verdict=verdict, failed_check=failed_check)
    if result.passed:
        await db.stop_practice(learner.user_id)
    found = feedback.diagnosis(exercise, result)
    checks = feedback.check_feedback(exercise, result, diagnosed=bool(found))
    lines = ([status] if status and result.status is not Status.OK else []) + checks
    likely = list(found.values())
    # The Hint button shows first the hint about the mistake this run shows (the first that has one).
    mistake = next((made for made in found if any(made == m for m, _n in exercise.hints_for)), None)
    current = await db.find_learner(learner.user_id)
    hints_shown = current.hints_shown if current else 0
    # Whatever the run printed or failed on, the verdict fits in one message: the output gives way.
    screen = render.fitting(
        lambda room: render.verdict_screen(
            context.course, lesson, result, lines, likely, hints_shown=hints_shown, output_room=room, mistake=mistake
        ),
        feedback.OUTPUT_MAX,
    )
    await send_practice_screen(context, learner.chat_id, screen)


def handlers() -> list[BaseHandler[Update, CourseContext, None]]:
    """Return this feature's handlers; code_message must come before the fallback for text."""
    private = filters.ChatType.PRIVATE
    return [
        CallbackQueryHandler(start_practice, pattern=matches(StartPractice)),
        CallbackQueryHandler(show_hint, pattern=matches(ShowHint)),
        CallbackQueryHandler(leave_practice, pattern=matches(LeavePractice)),
        CommandHandler(commands.RUN.name, run_command, filters=private),
        MessageHandler(private & filters.UpdateType.MESSAGE & filters.TEXT & ~filters.COMMAND, code_message),
    ]
