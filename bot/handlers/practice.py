"""Running code from the chat: /run, fenced code blocks, and graded practice exercises (decided by
bot.flows.practice)."""

from __future__ import annotations

import logging
import time

from telegram import Update
from telegram.constants import ChatAction
from telegram.ext import MessageHandler, filters

from bot import commands, feedback, render
from bot.callbacks import LeavePractice, ShowHint, StartPractice
from bot.context import CourseContext
from bot.course import runner_checks
from bot.course.model import Exercise, Lesson
from bot.flows import practice as flow
from bot.flows.outcome import lesson_gone
from bot.handlers.common import carry_out, for_learner, reply, send
from bot.handlers.router import Router
from bot.i18n import _
from bot.learner import Learner
from bot.states import Practice, PracticeStep, practice_state
from runner.client import JobLost, Runner, RunnerBusy, RunnerError, RunResult

log = logging.getLogger(__name__)

router = Router("practice")


@router.button(StartPractice)
async def start_practice(update: Update, context: CourseContext, data: StartPractice) -> str | None:
    """Open the exercise: from now on, a message is taken as an answer."""
    lesson = context.course.lesson(data.lesson)
    if lesson is None or lesson.exercise is None:
        return lesson_gone()
    await carry_out(update, context, flow.start(context.course, lesson), feature="practice")
    return None


@router.button(ShowHint)
async def show_hint(update: Update, context: CourseContext, data: ShowHint) -> str | None:
    """Show the next hint, up to the exercise's last."""
    passed = data.lesson in await context.services.db.exercises_passed(context.learner.user_id)
    outcome = flow.hint(context.course, context.learner, data.lesson, data.mistake, passed=passed)
    await carry_out(update, context, outcome, feature="practice")
    return outcome.toast


@router.button(LeavePractice)
async def leave_practice(update: Update, context: CourseContext, data: LeavePractice) -> str | None:
    """Stop taking messages as answers, and say so below, where the learner looks, with the ways on."""
    outcome = flow.leave(context.course, context.learner)
    await carry_out(update, context, outcome, feature="practice")
    return outcome.toast


@router.command(commands.RUN)
async def run_command(update: Update, context: CourseContext) -> None:
    """Run the code after /run, ungraded."""
    text = (update.effective_message.text if update.effective_message else None) or ""
    after_command = text.split(maxsplit=1)[1] if len(text.split(maxsplit=1)) > 1 else ""
    code = feedback.fenced_code(text) or after_command
    if not code.strip():
        await reply(update, context, render.notice(_("Put your code after /run, for example: /run print(2 + 2)")))
        return
    await _start_run(update, context, code, None)


async def code_message(update: Update, context: CourseContext) -> None:
    """Take a message as code: an answer to the exercise under way, or a fenced block to run."""
    text = (update.effective_message.text if update.effective_message else None) or ""
    lesson = flow.under_way(context.course, context.learner, context.learner.practice_lesson_id, PracticeStep.ANSWER)
    if lesson is not None and feedback.reads_as_prose(text):
        # A question to the bot, not an answer: not run, not counted; Hint and Leave are the ways on.
        await carry_out(update, context, flow.prose(context.course, context.learner, lesson), feature="practice")
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
        if lesson is None or exercise is None:
            advice = feedback.run_advice(result)
            await send(context, learner.chat_id, render.run_output(feedback.output_block(result), status, advice))
            return
        await _verdict(context, learner, lesson, exercise, result, status)
    finally:
        services.running.discard(learner.user_id)


async def _verdict(
    context: CourseContext, learner: Learner, lesson: Lesson, exercise: Exercise, result: RunResult, status: str | None
) -> None:
    """Grade the run over the learner as they are now (one read): one left while the code ran gets the output only."""
    faults = context.services.faults
    faults.reached("run:ran")
    current = await context.services.db.find_learner(learner.user_id)
    if current is None or practice_state(current, lesson.id) is not Practice.ON:
        await send(context, learner.chat_id, render.run_output(feedback.output_block(result), status))
        return
    outcome = flow.verdict(context.course, current, lesson, exercise, result, status)
    # Stored with the verdict's replies, then sent: a replay after a crash sends the verdict, and never grades again
    # over a learner the pass already took out of practice (bot.handlers.outbox).
    await carry_out(None, context, outcome, feature="run")


router.add(
    MessageHandler(
        filters.ChatType.PRIVATE & filters.UpdateType.MESSAGE & filters.TEXT & ~filters.COMMAND,
        for_learner(code_message),
    )
)
