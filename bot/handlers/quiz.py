"""The Quick Check: native quiz polls, one per question, answers recorded as poll_answer updates.

Options are shown in an order drawn for each round (bot.shuffle), and answers are kept by option id.
Nobody is stranded: while a round is under way, "Quick Check ▶", Continue, the lesson's button and the
intro's "Send the question again" all bring the awaited poll back (the old one is deleted), and a poll
Telegram would not take leaves a message saying so, with that button under it. The decisions are
bot.flows.quiz'; sending polls is bot.handlers.polls'.
"""

from __future__ import annotations

import logging

from telegram import Update
from telegram.ext import PollAnswerHandler

from bot.callbacks import ResendPoll, RetakeMissed, StartQuiz
from bot.context import CourseContext
from bot.course.model import Lesson
from bot.flows import quiz as flow
from bot.flows.outcome import Outcome, lesson_gone
from bot.handlers import comeback, polls
from bot.handlers.common import carry_out, for_learner
from bot.handlers.router import Router
from bot.i18n import _
from bot.shuffle import new_seed
from bot.snapshot import Snapshot
from bot.states import QuizRound, quiz_round

log = logging.getLogger(__name__)

router = Router("quiz")


async def _start_round(
    update: Update, context: CourseContext, lesson: Lesson, questions: list[str] | str, *, retake: bool
) -> str | None:
    """Start a round of ``questions`` (or say why there is none) and ask its first question."""
    if isinstance(questions, str):
        return questions  # why there is nothing to ask
    seed = new_seed()
    outcome = flow.begin(lesson, questions, seed, retake=retake)
    # Not kept: a replay after a crash before the poll went out runs again, finds the round under way and resumes
    # it, poll included; the stored intro alone would leave the poll unasked.
    (intro,) = (await carry_out(update, context, outcome, feature="quiz", kept=False)).shown
    await polls.ask_or_say_why_not(context, lesson, tuple(questions), seed, intro)
    return None


@router.button(StartQuiz)
async def start_quiz(update: Update, context: CourseContext, data: StartQuiz) -> str | None:
    """Start a lesson's Quick Check once its slides are read (or bring back the round under way)."""
    lesson = context.course.lesson(data.lesson)
    if lesson is None:
        return lesson_gone()
    if quiz_round(context.learner, lesson.id) is not QuizRound.NONE:
        return await polls.resume(update, context, lesson)
    questions = flow.whole_quiz(lesson, await context.snapshot.progress(lesson.id))
    return await _start_round(update, context, lesson, questions, retake=False)


@router.button(RetakeMissed)
async def retake_missed(update: Update, context: CourseContext, data: RetakeMissed) -> str | None:
    """Ask again only the questions whose latest answer was wrong."""
    lesson = context.course.lesson(data.lesson)
    if lesson is None:
        return lesson_gone()
    if quiz_round(context.learner, lesson.id) is not QuizRound.NONE:
        return await polls.resume(update, context, lesson)
    questions = flow.missed_questions(lesson, await context.snapshot.lesson(lesson.id))
    return await _start_round(update, context, lesson, questions, retake=True)


@router.button(ResendPoll)
async def resend_poll(update: Update, context: CourseContext, data: ResendPoll) -> str | None:
    """Send the awaited poll again, from the intro of the round under way."""
    lesson = context.course.lesson(data.lesson)
    if lesson is None:
        return lesson_gone()
    if quiz_round(context.learner, lesson.id) is QuizRound.NONE:
        return _("This Quick Check is over: its result is further down the chat.")
    return await polls.resume(update, context, lesson, asked=True)


@for_learner
async def poll_answer(update: Update, context: CourseContext) -> None:
    """Record a quiz answer by the option's id, then ask the next question or close the round."""
    answer = update.poll_answer
    if answer is None or not answer.option_ids:
        return  # a retracted vote; quizzes cannot be re-voted, so there is nothing to record
    if await comeback.answer_review_poll(update, context):
        return  # a review card's poll, not a lesson's
    db, learner = context.services.db, context.learner
    found = await db.answered_poll(answer.poll_id)
    if found is None and await db.adopt_poll(answer.poll_id, learner.user_id) is not None:
        # Adopting it may have made it the awaited poll: the learner is read again, as it is now.
        context.snapshot = await Snapshot.read(db, learner)
        learner = context.learner
        found = await db.answered_poll(answer.poll_id)
    if found is None or found.poll.user_id != learner.user_id:
        log.info("poll answer for unknown poll %s from user %s", answer.poll_id, learner.user_id)
        return
    sent, answered, superseded = found
    lesson = context.course.lesson(sent.lesson_id)
    if lesson is None:
        return  # the lesson left the course since this poll was sent; the answer has nothing to count for
    question = lesson.question(sent.question_id)
    if question is None:
        # The question left the lesson since its poll was sent: the round goes on without it.
        if learner.quiz_poll_id == sent.poll_id:
            left = await db.drop_questions(learner.user_id, [sent.question_id])
            await polls.go_on(update, context, lesson, left)
        return
    if answered:
        # Recorded before: Telegram lets nobody answer a quiz twice and the inbox drops redeliveries, so this is
        # the update replayed after the bot died while handling it. Do what the crash may have cut short.
        await polls.carry_on(update, context, lesson)
        return
    if superseded and learner.quiz_poll_id != sent.poll_id:
        # One question, one answer: this poll's question was answered through another poll since it went out (the
        # same question sent twice, by an update handled again after a replica died between sending it and
        # recording it; or a poll of an earlier round left in the chat). The answer given counts; this one does not.
        log.info("poll %s of user %s asks %r, answered since: not recorded", sent.poll_id, sent.user_id, question.id)
        return
    shown = sent.options or question.option_ids  # a poll sent before ids showed the file's order
    chosen = answer.option_ids[0]
    if not 0 <= chosen < len(shown):
        log.warning("poll %s of user %s answered with option %d of %d", sent.poll_id, sent.user_id, chosen, len(shown))
        return
    recorded = flow.answer(learner, sent, question, chosen, shown)
    remaining = flow.remaining(recorded)
    outcome: Outcome = recorded
    if remaining == ():
        # The round's last answer: it closes the round in the same transaction (the result shown first).
        state = flow.with_answer(
            await context.snapshot.lesson(lesson.id), sent, shown[chosen], question.correct_id == shown[chosen]
        )
        outcome = recorded.then(flow.closed(context.course, lesson, state))
    if not (await carry_out(update, context, outcome, feature="quiz")).stored:
        log.info("answer to poll %s of user %s was recorded meanwhile", sent.poll_id, sent.user_id)
        return
    if remaining:  # None: an answer to an earlier poll, which moves nothing
        await polls.go_on(update, context, lesson, remaining)


router.add(PollAnswerHandler(poll_answer))
