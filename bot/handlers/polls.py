"""The Quick Check's Telegram side: a poll sent (noted before, recorded after), withdrawn, the round brought back
into view, asked on, closed. The decisions are bot.flows.quiz'; the quiz handler and every way back into a round
(Continue, a lesson's button) come here, never to each other.
"""

from __future__ import annotations

import datetime as dt
import logging

from telegram import Update
from telegram.constants import PollType
from telegram.error import NetworkError, TelegramError

from bot import render
from bot.changes import ReaderAt
from bot.context import CourseContext
from bot.course.model import Lesson
from bot.flows import quiz as flow
from bot.handlers.common import carry_out, send, show, show_in_tapped, store
from bot.i18n import _
from bot.learner import ReaderView, SentPoll
from bot.shuffle import option_order
from bot.snapshot import Snapshot
from bot.states import QuizRound, quiz_round

log = logging.getLogger(__name__)

# Tries of one sendPoll that failed in the network or with a 5xx (429s are waited out by the rate limiter).
SEND_TRIES = 2
# A tap this soon after the awaited poll went out is the second of a double tap, not a poll gone missing.
DOUBLE_TAP = dt.timedelta(seconds=3)


async def ask(context: CourseContext, lesson: Lesson, question_id: str, seed: int) -> bool:
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
        context.services.faults.reached("quiz:asked")
        return True
    return False


async def ask_or_say_why_not(
    context: CourseContext, lesson: Lesson, queue: tuple[str, ...], seed: int, intro: int | None
) -> None:
    """Ask the first question of ``queue``; if its poll was not sent, say so in message ``intro`` (None: a new one)."""
    if await ask(context, lesson, queue[0], seed):
        return
    screen = render.quiz_intro(lesson, len(queue), retake=False, sent=False)
    message_id = await show(context, intro, context.learner.chat_id, screen)
    await store(context, (ReaderAt(message_id, ReaderView.QUIZ),))


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


async def resume(update: Update, context: CourseContext, lesson: Lesson, *, asked: bool = False) -> str | None:
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
        await close(update, context, lesson)
        return None
    if learner.quiz_poll_id is not None:
        await _withdraw(context, learner.quiz_poll_id)
    # Fewer than the lesson asks: part of the round is answered (or it is a retake), and the rest is "left".
    resumed = len(queue) < len(lesson.quiz)
    intro = await show_in_tapped(update, context, render.quiz_intro(lesson, len(queue), retake=False, resumed=resumed))
    await store(context, (ReaderAt(intro, ReaderView.QUIZ),))
    await ask_or_say_why_not(context, lesson, queue, learner.quiz_seed, intro)
    return None


async def carry_on(update: Update, context: CourseContext, lesson: Lesson) -> None:
    """After a replayed answer: ask the next question if none is awaited, or close a round the answer ended."""
    learner = context.learner
    if learner.quiz_poll_id is not None:
        return  # the next poll went out and was recorded before the crash
    if quiz_round(learner, lesson.id) is QuizRound.TO_ASK:
        await go_on(update, context, lesson, learner.quiz_queue)
    elif quiz_round(learner) is QuizRound.NONE:
        # The round is over, so this answer ended it: finish the lesson and show the result (again, if the
        # crash came after it was sent: better twice than never).
        await close(update, context, lesson)


async def go_on(update: Update, context: CourseContext, lesson: Lesson, remaining: tuple[str, ...]) -> None:
    """Ask the round's next question, or close the round when none is left."""
    remaining = await _questions_left(context, lesson, remaining)
    if remaining:
        # Where the learner looks: below the poll just answered, so a failure note comes as a new message.
        await ask_or_say_why_not(context, lesson, remaining, context.learner.quiz_seed, None)
    else:
        await close(update, context, lesson)


async def close(update: Update, context: CourseContext, lesson: Lesson) -> None:
    """Close a round, over the lesson as it is now: the lesson is done once every question is answered; the score,
    the recap and the way on below."""
    state = await (await Snapshot.read(context.services.db, context.learner)).lesson(lesson.id)
    await carry_out(update, context, flow.closed(context.course, lesson, state), feature="quiz")
