"""The Quick Check: native quiz polls, one per question, answers recorded as poll_answer updates."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from telegram import Update
from telegram.constants import PollType
from telegram.ext import BaseHandler, CallbackQueryHandler, PollAnswerHandler

from bot import render
from bot.callbacks import RetakeMissed, StartQuiz, matches
from bot.content.model import Lesson
from bot.context import CourseContext
from bot.handlers.common import button, for_learner, lesson_gone, send, show_in_tapped, tapped_message
from bot.handlers.drills import finish_if_done
from bot.i18n import _
from bot.learner import NOT_STARTED, ReaderView, SentPoll
from bot.navigation import lesson_score, missed, unanswered
from bot.states import LESSON, LessonStep, QuizRound, quiz_round, stage

log = logging.getLogger(__name__)

# Picks the questions of a round, or returns why there is nothing to ask.
QuestionPicker = Callable[[CourseContext, Lesson], Coroutine[Any, Any, list[str] | str]]


async def _ask(context: CourseContext, lesson: Lesson, question_id: str) -> None:
    """Send the poll for one question and record it as the one awaited."""
    learner = context.learner
    question = lesson.question(question_id)
    if question is None:
        raise ValueError(f"lesson {lesson.id!r} has no question {question_id!r}")
    if question.fallback:
        await send(context, learner.chat_id, render.Screen(render.fallback_notice()))
    spec = render.poll(question)
    message = await context.bot.send_poll(
        learner.chat_id,
        spec.question,
        list(spec.options),
        is_anonymous=False,  # answers must arrive as poll_answer updates carrying the learner
        type=PollType.QUIZ,
        # PTB types option ids as Literal[0..11]; lint keeps every poll to 10 options, so the index is one of them.
        correct_option_ids=[spec.correct],  # type: ignore[list-item]
        explanation=spec.explanation,
    )
    if message.poll is None:
        raise ValueError(f"Telegram sent back no poll for question {question_id!r}")
    await context.services.db.poll_sent(
        SentPoll(message.poll.id, learner.user_id, lesson.id, question_id), message.message_id
    )


async def _begin(
    update: Update, context: CourseContext, lesson: Lesson, question_ids: list[str], *, retake: bool
) -> None:
    db = context.services.db
    await db.start_quiz(context.learner.user_id, lesson.id, question_ids)
    message_id = await show_in_tapped(update, context, render.quiz_intro(lesson, len(question_ids), retake=retake))
    await db.set_reader_message(context.learner.user_id, message_id, ReaderView.QUIZ)
    await _ask(context, lesson, question_ids[0])


async def resume_quiz(update: Update, context: CourseContext, lesson: Lesson) -> str | None:
    """Bring a Quick Check under way back into view, asking the awaited question again."""
    learner = context.learner
    tapped = tapped_message(update)
    if tapped is not None and tapped.message_id == learner.reader_message_id and learner.reader_view is ReaderView.QUIZ:
        # The tap came from the message that already shows the Quick Check: a double tap.
        return _("The Quick Check is under way: answer the poll below.")
    message_id = await show_in_tapped(update, context, render.quiz_intro(lesson, len(learner.quiz_queue), retake=False))
    await context.services.db.set_reader_message(learner.user_id, message_id, ReaderView.QUIZ)
    await _ask(context, lesson, learner.quiz_queue[0])
    return None


async def _start_round(
    update: Update, context: CourseContext, lesson_id: str, pick: QuestionPicker, *, retake: bool
) -> str | None:
    """Start a round of ``pick``'s questions, or resume the round under way; return a toast, if any."""
    lesson = context.course.lesson(lesson_id)
    if lesson is None:
        return lesson_gone()
    if quiz_round(context.learner, lesson.id) is QuizRound.AWAITING:
        return await resume_quiz(update, context, lesson)
    questions = await pick(context, lesson)
    if isinstance(questions, str):
        return questions  # why there is nothing to ask
    await _begin(update, context, lesson, questions, retake=retake)
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
    """Start a lesson's Quick Check once its slides are read."""
    return await _start_round(update, context, data.lesson, _whole_quiz, retake=False)


@button(RetakeMissed)
async def retake_missed(update: Update, context: CourseContext, data: RetakeMissed) -> str | None:
    """Ask again only the questions whose latest answer was wrong."""
    return await _start_round(update, context, data.lesson, _missed_questions, retake=True)


@for_learner
async def poll_answer(update: Update, context: CourseContext) -> None:
    """Record a quiz answer, then ask the next question or close the lesson."""
    answer = update.poll_answer
    if answer is None or not answer.option_ids:
        return  # a retracted vote; quizzes cannot be re-voted, so there is nothing to record
    db = context.services.db
    sent = await db.sent_poll(answer.poll_id)
    if sent is None or sent.user_id != context.learner.user_id:
        log.info("poll answer for unknown poll %s from user %s", answer.poll_id, context.learner.user_id)
        return
    lesson = context.course.lesson(sent.lesson_id)
    question = lesson.question(sent.question_id) if lesson else None
    if lesson is None or question is None:
        return  # the course changed since this poll was sent; the answer has nothing to count for
    chosen = answer.option_ids[0]
    remaining = await db.record_answer(sent, chosen, chosen == question.correct)
    if remaining is None:
        return  # an answer to an earlier poll, or one already recorded
    if remaining:
        await _ask(context, lesson, remaining[0])
        return
    await finish_if_done(context, lesson)
    answers = await db.latest_answers(context.learner.user_id)
    screen = render.quiz_result(context.course, lesson, lesson_score(lesson, answers), len(missed(lesson, answers)))
    message = await send(context, context.learner.chat_id, screen)
    await db.set_reader_message(context.learner.user_id, message.message_id, ReaderView.RESULT)


def handlers() -> list[BaseHandler[Update, CourseContext, None]]:
    """Return this feature's handlers."""
    return [
        CallbackQueryHandler(start_quiz, pattern=matches(StartQuiz)),
        CallbackQueryHandler(retake_missed, pattern=matches(RetakeMissed)),
        PollAnswerHandler(poll_answer),
    ]
