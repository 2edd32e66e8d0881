"""The learner's three state machines, stated once: a lesson, a Quick Check round, and practice.

Each machine names its states and the steps allowed from each, and where each step leads. The state
itself is not stored as such: it is read off the records storage keeps (``lesson_progress`` and the
``learners`` row), and storage/db.py performs each step in one transaction. Handlers ask here which
state a learner is in and whether a step is allowed; tests/test_states.py drives the real database
through every allowed step and checks that it lands where the machine says.

    lesson:     NOT_STARTED -turn-> READING -read last-> QUIZ -complete-> DONE     (reset: back to NOT_STARTED)
    quiz round: NONE -start-> TO_ASK -send-> AWAITING -answer-> TO_ASK ... -answer last-> NONE
    practice:   OFF -start-> ON (-hint, -fail: stay ON) -pass or leave-> OFF

What each state holds, and what keeps it sound when things go wrong:

- Places are ids. A lesson's place is the id of the slide on screen and of the furthest slide reached;
  bot.navigation finds them in the lessons as served now, so an inserted or moved slide moves nobody.
  When a slide is removed, Database.adopt_course (at start and after a reload) moves the learners on it
  to the next slide that remains; a button naming it lands there too. A lesson removed leaves its
  progress unread; the menu and Continue follow the course as it is.
- A round is its lesson, its queue of question ids, the poll awaited and a seed: the order of every
  question's options in this round (bot.shuffle), so a poll sent again looks the same and a retake is
  shuffled anew. Answers are recorded by option id.
- Nobody is stranded in a round. TO_ASK is also where a round is left when a poll could not be sent:
  SEND is allowed from TO_ASK and from AWAITING (the poll sent again, the old one deleted), and every
  way into the lesson (Quick Check ▶, Continue, the lesson's button, the intro's "Send the question
  again") takes that step. Questions that left the lesson are DROPped from the round.
- Practice is the exercise whose messages are answers. Leaving is LEAVE: the Leave button, or opening
  another lesson; a run that comes back after the learner left gets no verdict (its output only).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

from bot.learner import Learner, LessonProgress

S = TypeVar("S", bound=Enum)
E = TypeVar("E", bound=Enum)


@dataclass(frozen=True)
class Machine(Generic[S, E]):
    """A state machine: for each state, the steps allowed from it and the state each one leads to."""

    name: str
    transitions: Mapping[tuple[S, E], S]

    def allows(self, state: S, step: E) -> bool:
        """Return whether ``step`` may be taken from ``state``."""
        return (state, step) in self.transitions

    def after(self, state: S, step: E) -> S:
        """Return the state ``step`` leads to from ``state``; raise ValueError if it is not allowed."""
        try:
            return self.transitions[(state, step)]
        except KeyError:
            raise ValueError(f"{self.name}: {step.name} is not allowed in {state.name}") from None


def _from_every(states: type[S], step: E, target: S) -> dict[tuple[S, E], S]:
    return {(state, step): target for state in states}


# A lesson, for one learner.


class Stage(Enum):
    """How far a learner got in one lesson."""

    NOT_STARTED = "not_started"
    READING = "reading"  # somewhere in the slides
    QUIZ = "quiz"  # every slide read, the Quick Check not fully answered
    DONE = "done"  # slides read and every question answered


class LessonStep(Enum):
    """What happens to a lesson."""

    TURN = "turn"  # a slide before the last is shown (only one seen already, or the very next: see can_show)
    READ_LAST = "read_last"  # the last slide is shown
    START_QUIZ = "start_quiz"  # a Quick Check round begins
    COMPLETE = "complete"  # the last unanswered question is answered
    RESET = "reset"


LESSON: Machine[Stage, LessonStep] = Machine(
    "lesson",
    {
        (Stage.NOT_STARTED, LessonStep.TURN): Stage.READING,
        (Stage.READING, LessonStep.TURN): Stage.READING,
        (Stage.READING, LessonStep.READ_LAST): Stage.QUIZ,
        # Once read, a lesson stays read: its slides can be turned and its Quick Check taken again.
        (Stage.QUIZ, LessonStep.TURN): Stage.QUIZ,
        (Stage.QUIZ, LessonStep.READ_LAST): Stage.QUIZ,
        (Stage.QUIZ, LessonStep.START_QUIZ): Stage.QUIZ,
        (Stage.QUIZ, LessonStep.COMPLETE): Stage.DONE,
        (Stage.DONE, LessonStep.TURN): Stage.DONE,
        (Stage.DONE, LessonStep.READ_LAST): Stage.DONE,
        (Stage.DONE, LessonStep.START_QUIZ): Stage.DONE,
        **_from_every(Stage, LessonStep.RESET, Stage.NOT_STARTED),
    },
)


def stage(progress: LessonProgress) -> Stage:
    """Return the stage a lesson's progress is at."""
    if progress.completed:
        return Stage.DONE
    if not progress.started:
        return Stage.NOT_STARTED
    return Stage.QUIZ if progress.slides_read else Stage.READING


# A Quick Check round, for one learner: at most one at a time, in one lesson.


class QuizRound(Enum):
    """Where a learner's Quick Check round is."""

    NONE = "none"
    TO_ASK = "to_ask"  # questions queued, none asked yet (or the last poll could not be sent)
    AWAITING = "awaiting"  # a poll is out, waiting for its answer


class QuizStep(Enum):
    """What happens to a Quick Check round."""

    START = "start"  # queue a lesson's questions, replacing any round under way
    SEND = "send"  # send the first queued question's poll (again, when the round is brought back into view)
    ANSWER = "answer"  # the awaited poll is answered and questions remain
    ANSWER_LAST = "answer_last"  # the awaited poll is answered and none remain
    DROP = "drop"  # questions that left the lesson are taken off the round, and the poll awaited with them
    DROP_LAST = "drop_last"  # ... and none remain
    RESET = "reset"


QUIZ_ROUND: Machine[QuizRound, QuizStep] = Machine(
    "quiz round",
    {
        **_from_every(QuizRound, QuizStep.START, QuizRound.TO_ASK),
        (QuizRound.TO_ASK, QuizStep.SEND): QuizRound.AWAITING,
        (QuizRound.AWAITING, QuizStep.SEND): QuizRound.AWAITING,
        (QuizRound.AWAITING, QuizStep.ANSWER): QuizRound.TO_ASK,
        (QuizRound.AWAITING, QuizStep.ANSWER_LAST): QuizRound.NONE,
        (QuizRound.TO_ASK, QuizStep.DROP): QuizRound.TO_ASK,
        (QuizRound.AWAITING, QuizStep.DROP): QuizRound.TO_ASK,
        (QuizRound.TO_ASK, QuizStep.DROP_LAST): QuizRound.NONE,
        (QuizRound.AWAITING, QuizStep.DROP_LAST): QuizRound.NONE,
        **_from_every(QuizRound, QuizStep.RESET, QuizRound.NONE),
    },
)


def quiz_round(learner: Learner, lesson_id: str | None = None) -> QuizRound:
    """Return where the learner's round is (in ``lesson_id``, if given: a round in another lesson is NONE)."""
    if learner.quiz_lesson_id is None or not learner.quiz_queue:
        return QuizRound.NONE
    if lesson_id is not None and learner.quiz_lesson_id != lesson_id:
        return QuizRound.NONE
    return QuizRound.AWAITING if learner.quiz_poll_id is not None else QuizRound.TO_ASK


# Practice, for one learner: at most one exercise at a time.


class Practice(Enum):
    """Whether the learner's messages answer an exercise."""

    OFF = "off"
    ON = "on"


class PracticeStep(Enum):
    """What happens in practice."""

    START = "start"  # open an exercise, no hints shown
    HINT = "hint"  # show one more hint
    ANSWER = "answer"  # a message is run as an answer
    FAIL = "fail"  # an answer failed a check
    PASS = "pass"  # an answer passed every check
    LEAVE = "leave"  # the Leave button, or another lesson opened
    RESET = "reset"


PRACTICE: Machine[Practice, PracticeStep] = Machine(
    "practice",
    {
        **_from_every(Practice, PracticeStep.START, Practice.ON),
        (Practice.ON, PracticeStep.HINT): Practice.ON,
        (Practice.ON, PracticeStep.ANSWER): Practice.ON,
        (Practice.ON, PracticeStep.FAIL): Practice.ON,
        (Practice.ON, PracticeStep.PASS): Practice.OFF,
        **_from_every(Practice, PracticeStep.LEAVE, Practice.OFF),
        **_from_every(Practice, PracticeStep.RESET, Practice.OFF),
    },
)


def practice_state(learner: Learner, lesson_id: str | None = None) -> Practice:
    """Return whether the learner practises (the exercise of ``lesson_id``, if given)."""
    if learner.practice_lesson_id is None:
        return Practice.OFF
    if lesson_id is not None and learner.practice_lesson_id != lesson_id:
        return Practice.OFF
    return Practice.ON
