"""The learner's state machines (bot.states) against the real database: every step the machines allow lands
where they say, and a step they do not allow changes nothing (or is refused before it reaches storage). Each step is
written as the bot writes it: its changes (bot.changes) through Database.store."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest

from bot.changes import (
    AttemptGraded,
    Change,
    HintsShown,
    LessonCompleted,
    PracticeLeft,
    PracticeStarted,
    QuizStarted,
    ReaderAt,
    SlideShown,
)
from bot.learner import NOT_STARTED, Learner, ReaderView, SentPoll
from bot.navigation import can_show
from bot.states import (
    LESSON,
    PRACTICE,
    QUIZ_ROUND,
    LessonStep,
    Machine,
    Practice,
    PracticeStep,
    QuizRound,
    QuizStep,
    Stage,
    practice_state,
    quiz_round,
    stage,
)
from bot.storage.db import Database
from tests.outcomes import answered, stored
from tests.test_navigation import make_lesson

USER, CHAT = 1001, 2001
LESSON_ID = "grad"
LAST_SLIDE = 4
ANOTHER_LESSON = "backward"


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await Database.open(tmp_path / "coursebot.sqlite3")
    await database.learner(USER, CHAT, "en")
    yield database
    await database.close()


Step = Callable[[Database], Awaitable[object]]
S = TypeVar("S")
E = TypeVar("E")


async def _steps(db: Database, *steps: Step) -> None:
    for step in steps:
        await step(db)


def _show(slide: int) -> Step:
    shown = SlideShown(LESSON_ID, f"s{slide}", f"s{slide}", last=slide == LAST_SLIDE)
    return lambda db: stored(db, USER, shown, ReaderAt(10 + slide, ReaderView.SLIDE))


def _change(*changes: Change) -> Step:
    return lambda db: stored(db, USER, *changes)


# The lesson machine. How to reach each stage, and how the handlers take each step.

REACH_STAGE: dict[Stage, list[Step]] = {
    Stage.NOT_STARTED: [],
    Stage.READING: [_show(0), _show(1)],
    Stage.QUIZ: [_show(0), _show(LAST_SLIDE)],
    Stage.DONE: [_show(0), _show(LAST_SLIDE), _change(LessonCompleted(LESSON_ID))],
}
LESSON_STEPS: dict[LessonStep, Step] = {
    LessonStep.TURN: _show(0),
    LessonStep.READ_LAST: _show(LAST_SLIDE),
    LessonStep.START_QUIZ: _change(QuizStarted(LESSON_ID, ("q-one", "q-two"), 7)),
    LessonStep.COMPLETE: _change(LessonCompleted(LESSON_ID)),
    LessonStep.RESET: lambda db: db.reset(USER),
}


async def _stage(db: Database) -> Stage:
    return stage((await db.progress(USER)).get(LESSON_ID, NOT_STARTED))


@pytest.mark.parametrize(("state", "step"), list(itertools.product(Stage, LessonStep)), ids=str)
async def test_each_lesson_step_lands_where_the_machine_says(db, state, step):
    await _steps(db, *REACH_STAGE[state])
    assert await _stage(db) is state
    if not LESSON.allows(state, step) and (state, step) == (Stage.NOT_STARTED, LessonStep.READ_LAST):
        # Storage would take it; the handler never asks, because a tap may not skip unread slides.
        lesson = make_lesson(LESSON_ID, 1, slides=LAST_SLIDE + 1)
        assert not can_show(lesson, NOT_STARTED, lesson.last_slide)
        return
    await LESSON_STEPS[step](db)
    assert await _stage(db) is _expected(LESSON, state, step)


# The Quick Check round.


class Round:
    """A learner's Quick Check round, driven through the database as the quiz handlers drive it."""

    def __init__(self, db: Database):
        self.db = db
        self.sent: list[SentPoll] = []

    async def start(self, questions: int) -> None:
        assert await stored(self.db, USER, QuizStarted(LESSON_ID, tuple(f"q-{n}" for n in range(questions)), 7))

    async def send(self) -> None:
        learner = await self.db.find_learner(USER)
        assert learner is not None
        poll = SentPoll(f"poll-{len(self.sent)}", USER, LESSON_ID, (learner.quiz_queue or ("q-0",))[0], ("a", "b"))
        await self.db.poll_sent(poll, message_id=None)
        self.sent.append(poll)

    async def answer(self) -> None:
        """Answer the poll sent last: the awaited one, or a stale one when none is awaited."""
        if not self.sent:
            await self.send()
        await answered(self.db, USER, self.sent[-1], 0, True)

    async def drop(self, every: bool) -> None:
        """Take questions off the round as if they left the lesson: all of them, or all but one."""
        learner = await self.db.find_learner(USER)
        assert learner is not None
        await self.db.drop_questions(USER, list(learner.quiz_queue if every else learner.quiz_queue[1:]))

    async def state(self) -> QuizRound:
        learner = await self.db.find_learner(USER)
        assert learner is not None
        return quiz_round(learner, LESSON_ID)


async def _reach_round(round_: Round, state: QuizRound, step: QuizStep) -> None:
    # A round awaiting its last answer has one question left; any other has three to ask.
    questions = 1 if step is QuizStep.ANSWER_LAST else 3
    if state is QuizRound.TO_ASK:
        await round_.start(questions + 1)
        await round_.send()
        await round_.answer()  # one answered, the rest still to ask, and a stale poll to answer
    elif state is QuizRound.AWAITING:
        await round_.start(questions)
        await round_.send()


async def _take_quiz_step(round_: Round, step: QuizStep) -> None:
    if step is QuizStep.START:
        await round_.start(3)
    elif step is QuizStep.SEND:
        await round_.send()
    elif step in (QuizStep.ANSWER, QuizStep.ANSWER_LAST):
        await round_.answer()
    elif step in (QuizStep.DROP, QuizStep.DROP_LAST):
        await round_.drop(every=step is QuizStep.DROP_LAST)
    else:
        await round_.db.reset(USER)


@pytest.mark.parametrize(("state", "step"), list(itertools.product(QuizRound, QuizStep)), ids=str)
async def test_each_quiz_step_lands_where_the_machine_says(db, state, step):
    round_ = Round(db)
    await _reach_round(round_, state, step)
    assert await round_.state() is state
    await _take_quiz_step(round_, step)
    assert await round_.state() is _expected(QUIZ_ROUND, state, step)


def _expected(machine: Machine[S, E], state: S, step: E) -> S:
    """Return where ``step`` leads from ``state``; a step the machine does not allow leaves the state as it was."""
    return machine.after(state, step) if machine.allows(state, step) else state


# Practice.

PRACTICE_STEPS: dict[PracticeStep, list[Step]] = {
    PracticeStep.START: [_change(PracticeStarted(LESSON_ID))],
    PracticeStep.HINT: [_change(HintsShown(1))],
    PracticeStep.ANSWER: [],  # the message goes to the runner; nothing is stored yet
    PracticeStep.FAIL: [_change(AttemptGraded(LESSON_ID, passed=False))],
    PracticeStep.PASS: [_change(AttemptGraded(LESSON_ID, passed=True), PracticeLeft())],
    PracticeStep.LEAVE: [_change(PracticeLeft())],
    PracticeStep.RESET: [lambda db: db.reset(USER)],
}


async def _practice(db: Database) -> Practice:
    learner = await db.find_learner(USER)
    assert learner is not None
    return practice_state(learner, LESSON_ID)


@pytest.mark.parametrize(("state", "step"), list(itertools.product(Practice, PracticeStep)), ids=str)
async def test_each_practice_step_lands_where_the_machine_says(db, state, step):
    if state is Practice.ON:
        assert await stored(db, USER, PracticeStarted(LESSON_ID))
    assert await _practice(db) is state
    await _steps(db, *PRACTICE_STEPS[step])
    assert await _practice(db) is _expected(PRACTICE, state, step)


def test_practising_one_lesson_is_not_practising_another():
    learner = _learner(practice_lesson_id=LESSON_ID)
    assert practice_state(learner, LESSON_ID) is Practice.ON
    assert practice_state(learner, ANOTHER_LESSON) is Practice.OFF
    assert practice_state(learner) is Practice.ON


def test_a_round_in_one_lesson_is_no_round_in_another():
    learner = _learner(quiz_lesson_id=LESSON_ID, quiz_queue=("q-0",), quiz_poll_id="poll-0")
    assert quiz_round(learner, LESSON_ID) is QuizRound.AWAITING
    assert quiz_round(learner, ANOTHER_LESSON) is QuizRound.NONE


def test_a_step_the_machine_does_not_allow_is_refused_by_name():
    with pytest.raises(ValueError, match="practice: HINT is not allowed in OFF"):
        PRACTICE.after(Practice.OFF, PracticeStep.HINT)


def test_every_state_is_reached_by_some_step_and_every_step_is_allowed_somewhere():
    machines: list[Machine[Any, Any]] = [LESSON, QUIZ_ROUND, PRACTICE]
    for machine in machines:
        states = {state for state, _ in machine.transitions} | set(machine.transitions.values())
        steps = {step for _, step in machine.transitions}
        state_type = type(next(iter(states)))
        step_type = type(next(iter(steps)))
        assert states == set(state_type), machine.name
        assert steps == set(step_type), machine.name


def _learner(**fields: Any) -> Learner:
    base = Learner(
        user_id=USER,
        chat_id=CHAT,
        language=None,
        telegram_language="en",
        lesson_id=None,
        reader_message_id=None,
        reader_view=None,
        quiz_lesson_id=None,
        quiz_queue=(),
        quiz_poll_id=None,
    )
    return replace(base, **fields)
