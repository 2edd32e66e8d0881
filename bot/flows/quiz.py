"""The Quick Check's decisions as a flow: which questions a round asks, what an answer records, how a round closes.

Sending and withdrawing polls is Telegram's side (bot.handlers.polls); what to ask and what to store is decided here.
"""

from __future__ import annotations

from dataclasses import replace

from bot import render
from bot.changes import AnswerRecorded, Event, QuizStarted
from bot.course.model import Course, Lesson, Question
from bot.flows import lessons
from bot.flows.outcome import Outcome, Show, Where
from bot.i18n import _
from bot.learner import Answer, EventKind, Learner, LessonProgress, LessonState, ReaderView, SentPoll
from bot.navigation import lesson_score, missed, unanswered
from bot.states import LESSON, LessonStep, stage


def whole_quiz(lesson: Lesson, saved: LessonProgress) -> list[str] | str:
    """Return every question of the lesson, or why the Quick Check may not start yet."""
    if not LESSON.allows(stage(saved), LessonStep.START_QUIZ):
        return _("Read the slides first: the Quick Check comes after the last one.")
    return [q.id for q in lesson.quiz]


def missed_questions(lesson: Lesson, state: LessonState) -> list[str] | str:
    """Return the questions whose latest answer is wrong or missing, or why there is nothing to retake."""
    again = missed(lesson, state.answers) + unanswered(lesson, state.answers)
    return again or _("Nothing to retake: your latest answers are all correct.")


def begin(lesson: Lesson, question_ids: list[str], seed: int, *, retake: bool) -> Outcome:
    """Start a round of ``question_ids`` shuffled by ``seed``: its intro in the tapped message (a retake is an event);
    Telegram's side asks the first question."""
    intro = render.quiz_intro(lesson, len(question_ids), retake=retake)
    return Outcome(
        screens=(Show(intro, reader=ReaderView.QUIZ),),
        changes=(QuizStarted(lesson.id, tuple(question_ids), seed),),
        events=(Event(EventKind.RETAKE, lesson.id),) if retake else (),
    )


def answer(learner: Learner, poll: SentPoll, question: Question, chosen: int, shown: tuple[str, ...]) -> Outcome:
    """Record an answer by the option's id (its event with it); answering the awaited poll pops its question."""
    option_id = shown[chosen]
    right = option_id == question.correct_id
    remaining = (
        tuple(q for q in learner.quiz_queue if q != question.id) if learner.quiz_poll_id == poll.poll_id else None
    )
    verdict = "right" if right else "wrong"
    return Outcome(
        changes=(AnswerRecorded(poll, chosen, option_id, right, remaining),),
        events=(Event(EventKind.ANSWER, poll.lesson_id, item_id=question.id, option_id=option_id, verdict=verdict),),
    )


def with_answer(state: LessonState, poll: SentPoll, option_id: str, correct: bool) -> LessonState:
    """Return ``state`` with an answer just given as the question's latest."""
    latest = Answer(poll.lesson_id, poll.question_id, option_id, correct)
    return replace(state, answers={**state.answers, (poll.lesson_id, poll.question_id): latest})


def closed(course: Course, lesson: Lesson, state: LessonState) -> Outcome:
    """Close a round: the lesson is done once every question is answered; show the score, the recap, the way on
    (a new message, below the last poll)."""
    score = lesson_score(lesson, state.answers)
    screen = render.quiz_result(course, lesson, score, len(missed(lesson, state.answers)))
    return Outcome(
        screens=(Show(screen, Where.NEW, reader=ReaderView.RESULT),), changes=lessons.finish_if_done(lesson, state)
    )


def remaining(outcome: Outcome) -> tuple[str, ...] | None:
    """Return the questions an answer's outcome leaves in the round (None: it answered an earlier poll)."""
    for change in outcome.changes:
        if isinstance(change, AnswerRecorded):
            return change.remaining
    return None
