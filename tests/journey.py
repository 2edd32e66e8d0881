"""A learner's moves, written once and shared by the end-to-end tests and the benchmark."""

from __future__ import annotations

import re

from bot.content.model import Lesson

POSITION = re.compile(r"(\d+) / (\d+)\s*$")


def buttons(message: dict) -> list[dict]:
    """Return every inline button of a message, row by row."""
    markup = message.get("reply_markup") or {}
    return [b for row in markup.get("inline_keyboard", []) for b in row]


def button_texts(message: dict) -> list[str]:
    return [b["text"] for b in buttons(message)]


def position(message: dict) -> tuple[int, int]:
    """Return the 'n / N' a slide message shows."""
    # In a right-to-left language 'n / N' is wrapped in Unicode isolates.
    match = POSITION.search(message["text"].replace("\u2066", "").replace("\u2069", ""))
    assert match, f"no 'n / N' in {message['text']!r}"
    return int(match.group(1)), int(match.group(2))


def correct_option(poll_message: dict) -> int:
    """Return the index of the correct option of a quiz poll message."""
    return poll_message["poll"]["correct_option_ids"][0]


async def tap_and_wait_edit(learner, message: dict, label: str) -> dict:
    """Tap a button of ``message`` and return the message once the bot has edited it."""
    # tap() injects without yielding, so the edit cannot land before wait_edit listens.
    await learner.tap(message, label)
    return await learner.wait_edit(message["message_id"])


async def tap_and_wait_message(learner, message: dict, label: str, predicate=None) -> dict:
    """Tap a button of ``message`` and return the next new message the bot sends."""
    since = learner.cursor()
    await learner.tap(message, label)
    return await learner.wait_message(predicate, since=since)


async def send_and_wait(learner, text: str, predicate=None, timeout: float = 5.0) -> dict:
    """Send ``text`` and return the bot's next new message."""
    since = learner.cursor()
    await learner.send(text)
    return await learner.wait_message(predicate, since=since, timeout=timeout)


async def read_slides(learner, message: dict, lesson: Lesson) -> dict:
    """Turn every slide from the one shown to the last; return the message on the last slide."""
    n, total = position(message)
    assert total == len(lesson.slides)
    while n < total:
        message = await tap_and_wait_edit(learner, message, "Next")
        assert position(message) == (n + 1, total)
        n += 1
    return message


async def answer_quiz(learner, last_slide: dict, lesson: Lesson, *, wrong: set[int] = frozenset()) -> dict:
    """Start the Quick Check from the last slide and answer every poll; return the result message.

    Questions whose 0-based index is in ``wrong`` get a wrong answer.
    """
    poll = await tap_and_wait_message(learner, last_slide, "Quick Check", lambda m: "poll" in m)
    for index in range(len(lesson.quiz)):
        assert poll["poll"]["question"] == lesson.quiz[index].question
        correct = correct_option(poll)
        choice = (correct + 1) % len(poll["poll"]["options"]) if index in wrong else correct
        since = learner.cursor()
        await learner.answer_poll(poll, choice)
        # The next poll, or at the end the result with its buttons; notices may come between.
        last = index == len(lesson.quiz) - 1
        poll = await learner.wait_message(
            (lambda m: "reply_markup" in m) if last else (lambda m: "poll" in m), since=since
        )
    return poll
