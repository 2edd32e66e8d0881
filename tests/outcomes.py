"""A learner's changes written the way the bot writes them: one outcome per update through Database.store
(bot.storage.outcomes), the changes as bot.changes records, a Quick Check answer decided by the quiz flow."""

from __future__ import annotations

from bot.changes import Change, Event
from bot.course.model import Question
from bot.flows import quiz
from bot.learner import SentPoll
from bot.storage.db import Database


async def stored(
    db: Database,
    user_id: int,
    *changes: Change,
    events: tuple[Event, ...] = (),
    language: str = "en",
    update_id: int | None = None,
) -> bool:
    """Write one update's ``changes`` and ``events`` in one transaction; False if a precondition dropped them."""
    return await db.store(user_id, changes, events, language=language, update_id=update_id)


async def answered(
    db: Database, user_id: int, poll: SentPoll, chosen: int, correct: bool, *, update_id: int | None = None
) -> bool:
    """Answer ``poll`` at position ``chosen`` as the quiz handler does: the flow decides the outcome from the stored
    learner (popping the question when the poll is the one awaited), store writes it; False: recorded before."""
    learner = await db.find_learner(user_id)
    assert learner is not None
    others = [i for i in range(len(poll.options)) if i != chosen]
    question = Question(
        poll.question_id,
        "Which?",
        tuple(poll.options),
        chosen if correct else others[0],
        "Because.",
        option_ids=tuple(poll.options),
    )
    outcome = quiz.answer(learner, poll, question, chosen, poll.options)
    return await stored(db, user_id, *outcome.changes, events=outcome.events, update_id=update_id)
