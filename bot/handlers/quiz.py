"""The Quick Check: native quiz polls, one per question, answers recorded as poll_answer updates.

Options are shown in an order drawn for each round (bot.shuffle), and answers are kept by option id.
Nobody is stranded: while a round is under way, "Quick Check ▶", Continue, the lesson's button and the
intro's "Send the question again" all bring the awaited poll back (the old one is deleted), and a poll
Telegram would not take leaves a message saying so, with that button under it.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from telegram import Update
from telegram.constants import PollType
from telegram.error import NetworkError, TelegramError
from telegram.ext import BaseHandler, CallbackQueryHandler, PollAnswerHandler

from bot import render
from bot.callbacks import ResendPoll, RetakeMissed, StartQuiz, matches
from bot.context import CourseContext
from bot.course.model import Lesson
from bot.handlers.common import button, for_learner, lesson_gone, record, send, show, show_in_tapped
from bot.handlers.drills import finish_if_done
from bot.i18n import _
from bot.learner import NOT_STARTED, EventKind, ReaderView, SentPoll
from bot.navigation import lesson_score, missed, unanswered
from bot.shuffle import new_seed, option_order
from bot.states import LESSON, LessonStep, QuizRound, quiz_round, stage

log = logging.getLogger(__name__)

# Picks the questions of a round, or returns why there is nothing to ask.
QuestionPicker = Callable[[CourseContext, Lesson], Coroutine[Any, Any, list[str] | str]]

# Tries of one sendPoll that failed in the network or with a 5xx (429s are waited out by the rate limiter).
SEND_TRIES = 2
# A tap this soon after the awaited poll went out is the second of a double tap, not a poll gone missing.
DOUBLE_TAP = dt.timedelta(seconds=3)


async def _ask(context: CourseContext, lesson: Lesson, question_id: str, seed: int) -> bool:
    """Send one question's poll, options in the round's order, as the one awaited; False if it was not sent."""
    learner = context.learner
    question = lesson.question(question_id)
    if question is None:
        raise ValueError(f"lesson {lesson.id!r} has no question {question_id!r}")
    if question.fallback:
        await send(context, learner.chat_id, render.Screen(render.fallback_notice()))
    spec = render.poll(question, option_order(question, seed))
    db = context.services.db
    sending = await db.poll_sending(learner.user_id, lesson.id, question_id, spec.option_ids)
    for attempt in range(1, SEND_TRIES + 1):
        try:
            message = await context.bot.send_poll(
                learner.chat_id,
                spec.question,
                list(spec.options),
                is_anonymous=False,  # answers must arrive as poll_answer updates carrying the learner
                type=PollType.QUIZ,
                # PTB types option ids as Literal[0..11]; lint keeps every poll to 10 options, so the index is one.
                correct_option_ids=[spec.correct],  # type: ignore[list-item]
                explanation=spec.explanation,
            )
        except NetworkError as exc:
            log.warning("question %r for user %s not sent (try %d): %s", question_id, learner.user_id, attempt, exc)
            continue
        except TelegramError as exc:
            log.warning("Telegram refused question %r for user %s: %s", question_id, learner.user_id, exc)
            await db.poll_refused(sending)
            return False
        if message.poll is None:
            raise ValueError(f"Telegram sent back no poll for question {question_id!r}")
        sent = SentPoll(message.poll.id, learner.user_id, lesson.id, question_id, spec.option_ids)
        await db.poll_sent(sent, message.message_id, sending)
        return True
    return False


async def _ask_or_say_why_not(
    context: CourseContext, lesson: Lesson, queue: tuple[str, ...], seed: int, intro: int | None
) -> None:
    """Ask the first question of ``queue``; if its poll was not sent, say so in message ``intro`` (None: a new one)."""
    if await _ask(context, lesson, queue[0], seed):
        return
    screen = render.quiz_intro(lesson, len(queue), retake=False, sent=False)
    message_id = await show(context, intro, context.learner.chat_id, screen)
    await context.services.db.set_reader_message(context.learner.user_id, message_id, ReaderView.QUIZ)


async def _questions_left(context: CourseContext, lesson: Lesson, queue: tuple[str, ...]) -> tuple[str, ...]:
    """Return the round's questions still in the lesson, taking the others off the round (the lesson changed)."""
    gone = [q for q in queue if lesson.question(q) is None]
    if not gone:
        return queue
    log.info("questions %s left lesson %r during a round of user %s", gone, lesson.id, context.learner.user_id)
    return await context.services.db.drop_questions(context.learner.user_id, gone)


async def _withdraw(context: CourseContext, poll_id: str) -> None:
    """Delete the message of a poll about to be sent again, so one poll per question is left to answer."""
    message_id = await context.services.db.poll_message(poll_id)
    if message_id is None:
        return
    try:
        await context.bot.delete_message(context.learner.chat_id, message_id)
    except TelegramError as exc:
        # Gone already, or too old to delete: the new poll is the one that counts either way.
        log.info("poll message %s of user %s not deleted: %s", message_id, context.learner.user_id, exc)


async def _begin(
    update: Update, context: CourseContext, lesson: Lesson, question_ids: list[str], *, retake: bool
) -> None:
    db = context.services.db
    seed = new_seed()
    await db.start_quiz(context.learner.user_id, lesson.id, question_ids, seed)
    intro = await show_in_tapped(update, context, render.quiz_intro(lesson, len(question_ids), retake=retake))
    await db.set_reader_message(context.learner.user_id, intro, ReaderView.QUIZ)
    await _ask_or_say_why_not(context, lesson, tuple(question_ids), seed, intro)


async def resume_quiz(update: Update, context: CourseContext, lesson: Lesson, *, asked: bool = False) -> str | None:
    """Bring the round under way back into view: its intro in the tapped message, the awaited poll sent again.

    ``asked``: the learner asked for the poll again in so many words; otherwise a tap that comes right after
    the poll went out is taken as a double tap and sends nothing.
    """
    learner = context.learner
    if not asked and learner.quiz_poll_id is not None:
        age = await context.services.db.poll_age(learner.quiz_poll_id)
        if age is not None and age < DOUBLE_TAP:
            return _("The Quick Check is under way: answer the poll below.")
    queue = await _questions_left(context, lesson, learner.quiz_queue)
    if not queue:
        await _finish(context, lesson)
        return None
    if learner.quiz_poll_id is not None:
        await _withdraw(context, learner.quiz_poll_id)
    # Fewer than the lesson asks: part of the round is answered (or it is a retake), and the rest is "left".
    resumed = len(queue) < len(lesson.quiz)
    intro = await show_in_tapped(update, context, render.quiz_intro(lesson, len(queue), retake=False, resumed=resumed))
    await context.services.db.set_reader_message(learner.user_id, intro, ReaderView.QUIZ)
    await _ask_or_say_why_not(context, lesson, queue, learner.quiz_seed, intro)
    return None


async def _start_round(
    update: Update, context: CourseContext, lesson_id: str, pick: QuestionPicker, *, retake: bool
) -> str | None:
    """Start a round of ``pick``'s questions, or resume the round under way; return a toast, if any."""
    lesson = context.course.lesson(lesson_id)
    if lesson is None:
        return lesson_gone()
    if quiz_round(context.learner, lesson.id) is not QuizRound.NONE:
        return await resume_quiz(update, context, lesson)
    questions = await pick(context, lesson)
    if isinstance(questions, str):
        return questions  # why there is nothing to ask
    await _begin(update, context, lesson, questions, retake=retake)
    if retake:
        await record(context, EventKind.RETAKE, lesson.id)
    return None


async def _whole_quiz(context: CourseContext, lesson: Lesson) -> list[str] | str:
    progress = (await context.services.db.progress(context.learner.user_id)).get(lesson.id, NOT_STARTED)
    if not LESSON.allows(stage(progress), LessonStep.START_QUIZ):
        return _("Read the slides first: the Quick Check comes after the last one.")
    return [q.id for q in lesson.quiz]


async def _missed_questions(context: CourseContext, lesson: Lesson) -> list[str] | str:
    answers = await context.services.db.latest_answers(context.learner.user_id)
    again = missed(lesson, answers) + unanswered(lesson, answers)
    return again or _("Nothing to retake: your latest answers are all correct.")


@button(StartQuiz)
async def start_quiz(update: Update, context: CourseContext, data: StartQuiz) -> str | None:
    """Start a lesson's Quick Check once its slides are read (or bring back the round under way)."""
    return await _start_round(update, context, data.lesson, _whole_quiz, retake=False)


@button(RetakeMissed)
async def retake_missed(update: Update, context: CourseContext, data: RetakeMissed) -> str | None:
    """Ask again only the questions whose latest answer was wrong."""
    return await _start_round(update, context, data.lesson, _missed_questions, retake=True)


@button(ResendPoll)
async def resend_poll(update: Update, context: CourseContext, data: ResendPoll) -> str | None:
    """Send the awaited poll again, from the intro of the round under way."""
    lesson = context.course.lesson(data.lesson)
    if lesson is None:
        return lesson_gone()
    if quiz_round(context.learner, lesson.id) is QuizRound.NONE:
        return _("This Quick Check is over: its result is further down the chat.")
    return await resume_quiz(update, context, lesson, asked=True)


@for_learner
async def poll_answer(update: Update, context: CourseContext) -> None:
    """Record a quiz answer by the option's id, then ask the next question or close the round."""
    answer = update.poll_answer
    if answer is None or not answer.option_ids:
        return  # a retracted vote; quizzes cannot be re-voted, so there is nothing to record
    db = context.services.db
    sent = await db.sent_poll(answer.poll_id) or await db.adopt_poll(answer.poll_id, context.learner.user_id)
    if sent is None or sent.user_id != context.learner.user_id:
        log.info("poll answer for unknown poll %s from user %s", answer.poll_id, context.learner.user_id)
        return
    lesson = context.course.lesson(sent.lesson_id)
    if lesson is None:
        return  # the lesson left the course since this poll was sent; the answer has nothing to count for
    question = lesson.question(sent.question_id)
    if question is None:
        # The question left the lesson since its poll was sent: the round goes on without it.
        if context.learner.quiz_poll_id == sent.poll_id:
            await _go_on(context, lesson, await db.drop_questions(context.learner.user_id, [sent.question_id]))
        return
    shown = sent.options or question.option_ids  # a poll sent before ids showed the file's order
    chosen = answer.option_ids[0]
    if not 0 <= chosen < len(shown):
        log.warning("poll %s of user %s answered with option %d of %d", sent.poll_id, sent.user_id, chosen, len(shown))
        return
    right = shown[chosen] == question.correct_id
    recorded = await db.record_answer(sent, chosen, shown[chosen], right)
    if recorded is None:
        # Recorded before: Telegram lets nobody answer a quiz twice and the inbox drops redeliveries, so this is
        # the update replayed after the bot died while handling it. Do what the crash may have cut short.
        await _carry_on(context, lesson)
        return
    verdict = "right" if right else "wrong"
    await record(context, EventKind.ANSWER, lesson.id, item_id=question.id, option_id=shown[chosen], verdict=verdict)
    if recorded.remaining is not None:  # None: an answer to an earlier poll, which moves nothing
        await _go_on(context, lesson, recorded.remaining)


async def _carry_on(context: CourseContext, lesson: Lesson) -> None:
    """After a replayed answer: ask the next question if none is awaited, or close a round the answer ended."""
    learner = context.learner
    if learner.quiz_poll_id is not None:
        return  # the next poll went out and was recorded before the crash
    if quiz_round(learner, lesson.id) is QuizRound.TO_ASK:
        await _go_on(context, lesson, learner.quiz_queue)
    elif quiz_round(learner) is QuizRound.NONE:
        # The round is over, so this answer ended it: finish the lesson and show the result (again, if the
        # crash came after it was sent: better twice than never).
        await _finish(context, lesson)


async def _go_on(context: CourseContext, lesson: Lesson, remaining: tuple[str, ...]) -> None:
    """Ask the round's next question, or close the round when none is left."""
    remaining = await _questions_left(context, lesson, remaining)
    if remaining:
        # Where the learner looks: below the poll just answered, so a failure note comes as a new message.
        await _ask_or_say_why_not(context, lesson, remaining, context.learner.quiz_seed, None)
    else:
        await _finish(context, lesson)


async def _finish(context: CourseContext, lesson: Lesson) -> None:
    """Close a round: the lesson is done once every question is answered; show the score, the recap, the way on."""
    db = context.services.db
    user_id = context.learner.user_id
    await finish_if_done(context, lesson)
    answers = await db.latest_answers(user_id)
    screen = render.quiz_result(context.course, lesson, lesson_score(lesson, answers), len(missed(lesson, answers)))
    message = await send(context, context.learner.chat_id, screen)
    await db.set_reader_message(user_id, message.message_id, ReaderView.RESULT)


def handlers() -> list[BaseHandler[Update, CourseContext, None]]:
    """Return this feature's handlers."""
    return [
        CallbackQueryHandler(start_quiz, pattern=matches(StartQuiz)),
        CallbackQueryHandler(retake_missed, pattern=matches(RetakeMissed)),
        CallbackQueryHandler(resend_poll, pattern=matches(ResendPoll)),
        PollAnswerHandler(poll_answer),
    ]
