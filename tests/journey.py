"""A learner's moves, written once and shared by the end-to-end tests and the benchmark."""

from __future__ import annotations

import re

from bot.course.model import Lesson

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


def is_reminder_offer(message: dict) -> bool:
    """Whether ``message`` is the one offer of daily reminders, sent once after the first finished lesson."""
    return any(b.get("callback_data", "") == "rm:yes" for b in buttons(message))


def _not_the_offer(predicate):
    """Wrap ``predicate`` so that what follows a finished lesson (the reminders' offer after the first, the
    completion card after the last) is never taken for the reply awaited (tests about them wait for them by name)."""
    return lambda m: not is_reminder_offer(m) and "photo" not in m and (predicate is None or predicate(m))


async def tap_and_wait_edit(learner, message: dict, label: str) -> dict:
    """Tap a button of ``message`` and return the message once the bot has edited it."""
    # tap() injects without yielding, so the edit cannot land before wait_edit listens.
    await learner.tap(message, label)
    return await learner.wait_edit(message["message_id"])


async def tap_and_wait_message(learner, message: dict, label: str, predicate=None) -> dict:
    """Tap a button of ``message`` and return the next new message the bot sends."""
    since = learner.cursor()
    await learner.tap(message, label)
    return await learner.wait_message(_not_the_offer(predicate), since=since)


async def send_and_wait(learner, text: str, predicate=None, timeout: float = 5.0) -> dict:
    """Send ``text`` and return the bot's next new message."""
    since = learner.cursor()
    await learner.send(text)
    return await learner.wait_message(_not_the_offer(predicate), since=since, timeout=timeout)


async def open_practice(learner, lesson_id: str, predicate=None, timeout: float = 5.0) -> dict:
    """Open a lesson's practice from /lessons (its button carries StartPractice) and return the bot's next message."""
    menu = await send_and_wait(learner, "/lessons")
    since = learner.cursor()
    await learner.tap(menu, callback_data=f"p:{lesson_id}")
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


def data_button(message: dict, start: str) -> dict:
    """Return the first button of ``message`` whose callback data starts with ``start`` (all such do the same)."""
    found = [b for b in buttons(message) if b.get("callback_data", "").startswith(start)]
    assert found and len({b["callback_data"] for b in found}) == 1, (
        f"{len(found)} buttons with data {start!r}: {[b.get('callback_data') for b in buttons(message)]}"
    )
    return found[0]


def drill_move(lesson: Lesson, drill_id: str, move: str, arg: int | None = None) -> str:
    """Return the start of the callback data of a move on a drill (a button on its screen carries the rest)."""
    return f"dm:{lesson.id}:{drill_id}:{move}:" + (f"{arg}:" if arg is not None else "")


async def tap_data_and_wait_edit(learner, message: dict, start: str) -> dict:
    """Tap the button whose data starts with ``start`` (as a learner taps it: by its text) and wait for the edit."""
    return await tap_and_wait_edit(learner, message, data_button(message, start)["text"])


async def solve_drill(learner, message: dict, lesson: Lesson, drill, order: list[int] | None = None) -> dict:
    """Solve the drill shown in ``message``: lines tapped in ``order`` (default: the author's), or the right choice."""
    if drill.kind == "parsons":
        for piece in order if order is not None else range(len(drill.lines)):
            message = await tap_data_and_wait_edit(learner, message, drill_move(lesson, drill.id, "p", piece))
        return await tap_data_and_wait_edit(learner, message, drill_move(lesson, drill.id, "k"))
    return await tap_data_and_wait_edit(learner, message, drill_move(lesson, drill.id, "c", drill.correct))


async def solve_drills(learner, message: dict, lesson: Lesson) -> dict:
    """Open the drills from a button of ``message``, solve each in turn; return the drill message as last shown."""
    since = learner.cursor()
    await learner.tap(message, data_button(message, f"dl:{lesson.id}")["text"])
    screen = await learner.wait_message(since=since)
    for index, drill in enumerate(lesson.drills):
        screen = await solve_drill(learner, screen, lesson, drill)
        if index + 1 < len(lesson.drills):
            screen = await tap_data_and_wait_edit(learner, screen, f"dv:{lesson.id}:{lesson.drills[index + 1].id}")
    return screen
