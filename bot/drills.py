"""Drills without Telegram: one learner's attempt at a drill, what each tap does to it, and the verdicts.

A learner's attempt is a ``DrillProgress``; each tap names a ``Move`` that ``apply`` turns into the next
progress, or refuses. Choices are graded here. A Parsons arrangement is graded here when it is the
author's order, holds a line that belongs nowhere, or is not Python; any other order is run (by the
handler, through the runner) and ``run_verdict`` reads the result: it is right when it gives what the
author's order gives, i.e. an EQUIVALENT order passes (two independent lines swapped, say).

    attempt:  fresh -place-> placing (-place, -undo, -reset) -check wrong-> checked -place/undo/reset-> placing
              placing -check right-> done -again-> fresh          (choices: fresh -choose wrong-> fresh, -right-> done)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum

from bot import feedback
from bot.callbacks import Move as Move  # a drill's moves travel in callback data, declared there
from bot.course.model import ChoiceDrill, Drill, Lesson, ParsonsDrill, program
from bot.learner import Answer, DrillProgress
from bot.navigation import unanswered
from bot.shuffle import shuffled
from runner.client import RunResult, Status

# Buttons carry the attempt's turn modulo this, so callback data stays short; a stale tap is one turn behind.
TURNS = 1000


def fitted(drill: Drill, progress: DrillProgress) -> DrillProgress:
    """Return a stored attempt as it fits the drill today: the lesson may have changed since (a reload).

    An arrangement or a set of tried choices that no longer fits starts over, one turn on (so the buttons
    drawn for it are stale); whether the drill was ever solved is kept.
    """
    if isinstance(drill, ParsonsDrill):
        placed = progress.placed
        if (
            len(placed) <= len(drill.lines)
            and len(set(placed)) == len(placed)
            and all(0 <= i < len(drill.pieces) for i in placed)
        ):
            return progress
    elif all(0 <= i < len(drill.choices) and i != drill.correct for i in progress.ruled_out):
        return progress
    return replace(progress, placed=(), ruled_out=frozenset(), done=False, checked=False, turn=progress.turn + 1)


class Refusal(Enum):
    """Why a tap changes nothing."""

    STALE = "stale"  # from a screen older than the attempt
    SOLVED = "solved"  # the attempt is answered already
    TRIED = "tried"  # a choice already ruled out
    INCOMPLETE = "incomplete"  # a check before every line is placed
    INVALID = "invalid"  # nothing this drill's screen offers (a forged tap)


def apply(drill: Drill, progress: DrillProgress, move: Move, arg: int, stamp: int) -> DrillProgress | Refusal:
    """Return the progress after a tap that changes the arrangement (place, undo, reset, again), or why not.

    CHECK and CHOOSE are answers: ``answerable`` says whether one may be given, ``answered`` records it.
    """
    if stamp != progress.stamp:
        return Refusal.STALE
    if move is Move.AGAIN:
        return (
            DrillProgress(turn=progress.turn + 1, tries=progress.tries, solved=progress.solved)
            if progress.done
            else Refusal.INVALID
        )
    if progress.done:
        return Refusal.SOLVED
    if not isinstance(drill, ParsonsDrill) or move in (Move.CHECK, Move.CHOOSE):
        return Refusal.INVALID
    placed = progress.placed
    if move is Move.PLACE:
        if not 0 <= arg < len(drill.pieces) or arg in placed or len(placed) >= len(drill.lines):
            return Refusal.INVALID
        placed = (*placed, arg)
    elif move is Move.UNDO and placed:
        placed = placed[:-1]
    elif move is Move.RESET and placed:
        placed = ()
    else:
        return Refusal.INVALID
    return replace(progress, placed=placed, turn=progress.turn + 1, checked=False)


def answerable(drill: Drill, progress: DrillProgress, move: Move, arg: int, stamp: int) -> Refusal | None:
    """Return why a CHECK or CHOOSE tap may not be graded now, or None when it may."""
    if stamp != progress.stamp:
        return Refusal.STALE
    if progress.done:
        return Refusal.SOLVED
    if move is Move.CHECK and isinstance(drill, ParsonsDrill):
        if progress.checked:
            return Refusal.INVALID  # the same arrangement again: nothing new to learn from it
        return None if len(progress.placed) == len(drill.lines) else Refusal.INCOMPLETE
    if move is Move.CHOOSE and isinstance(drill, ChoiceDrill) and 0 <= arg < len(drill.choices):
        return Refusal.TRIED if arg in progress.ruled_out else None
    return Refusal.INVALID


class Reason(Enum):
    """Why an answer is right or wrong: the screen explains each in its own words."""

    AUTHORS_ORDER = "authors_order"  # exactly the author's lines in the author's order
    SAME_RESULTS = "same_results"  # another order, which gives what the author's gives
    RIGHT_CHOICE = "right_choice"
    WRONG_CHOICE = "wrong_choice"
    DISTRACTOR = "distractor"  # a line that belongs nowhere is in (detail: that line)
    NOT_PYTHON = "not_python"  # the order does not compile (detail: where and why)
    EMPTY_BLOCK = "empty_block"  # a block's opener with no indented line right below it (detail: the opener)
    STRAY_INDENT = "stray_indent"  # an indented line under no opener (detail: that line; opener: where it belongs)
    RAISES = "raises"  # the order stops with an error when run (detail: the error)
    CHECKS = "checks"  # the order runs but gives other results (failed: each failed check's message)
    UNCHECKED = "unchecked"  # not the author's order, and no runner to try it
    UNAVAILABLE = "unavailable"  # the runner failed: not an answer at all


@dataclass(frozen=True)
class Verdict:
    """An answer graded: right or not, why, and what the learner should read about it."""

    right: bool
    reason: Reason
    detail: str = ""
    failed: tuple[str, ...] = ()  # lesson markup
    opener: str = ""  # STRAY_INDENT: the line that opens the block the stray line belongs to


def answered(progress: DrillProgress, verdict: Verdict, choice: int | None = None) -> DrillProgress:
    """Return the progress after a graded answer."""
    if verdict.right:
        return replace(progress, turn=progress.turn + 1, solved=True, done=True, checked=False)
    ruled_out = progress.ruled_out | {choice} if choice is not None else progress.ruled_out
    return replace(
        progress, turn=progress.turn + 1, tries=progress.tries + 1, ruled_out=ruled_out, checked=choice is None
    )


def grade_choice(drill: ChoiceDrill, choice: int) -> Verdict:
    """Grade a choice: no runner needed."""
    if choice == drill.correct:
        return Verdict(True, Reason.RIGHT_CHOICE)
    return Verdict(False, Reason.WRONG_CHOICE, drill.choices[choice])


def arrangement(drill: ParsonsDrill, placed: tuple[int, ...]) -> tuple[str, ...]:
    """Return the lines of an arrangement, in the order placed."""
    return tuple(drill.pieces[i] for i in placed)


def arranged_program(drill: ParsonsDrill, placed: tuple[int, ...]) -> str:
    """Return the code an arrangement runs as: the hidden setup, then its lines."""
    return program(drill.setup, arrangement(drill, placed))


def precheck(drill: ParsonsDrill, placed: tuple[int, ...]) -> Verdict | None:
    """Grade an arrangement without running it where that is certain; None means: run it to know."""
    lines = arrangement(drill, placed)
    # Compared as text: two equal lines are interchangeable.
    if lines == drill.lines:
        return Verdict(True, Reason.AUTHORS_ORDER)
    extra = next((i for i in placed if i >= len(drill.lines)), None)
    if extra is not None:
        return Verdict(False, Reason.DISTRACTOR, drill.pieces[extra].strip())
    try:
        compile(arranged_program(drill, placed), "<drill>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        setup_lines = len(drill.setup.split("\n")) if drill.setup else 0
        return _syntax_verdict(exc, lines, setup_lines)
    return None


# Python reports a block left empty at the line after its opener, and numbers lines from the hidden setup.
_EMPTY_BLOCK = re.compile(r"^(?P<msg>expected an indented block after .+?) on line (?P<line>\d+)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _syntax_verdict(exc: SyntaxError, lines: tuple[str, ...], setup_lines: int) -> Verdict:
    """Say what Python refuses in an arrangement, naming the line to move (not always the one Python names).

    An empty block is its opener's fault; an indented line under no opener belongs under the opener it needs,
    which may be placed below it, so that opener is named too. Anything else keeps Python's words and line.
    """
    message, line = exc.msg, (exc.lineno or 0) - setup_lines
    if (empty := _EMPTY_BLOCK.match(message)) is not None:
        message, line = empty.group("msg"), int(empty.group("line")) - setup_lines
        if 1 <= line <= len(lines):
            return Verdict(False, Reason.EMPTY_BLOCK, lines[line - 1].strip())
    where = lines[line - 1] if 1 <= line <= len(lines) else ""
    if message == "unexpected indent" and where:
        # The opener it belongs under: the nearest shallower line that opens a block, wherever it was placed.
        openers = [c for c in lines if c.rstrip().endswith(":") and _indent(c) < _indent(where)]
        if openers:
            opener = max(openers, key=_indent)
            return Verdict(False, Reason.STRAY_INDENT, where.strip(), opener=opener.strip())
    return Verdict(False, Reason.NOT_PYTHON, f"{message}: {where.strip()}" if where else message)


def run_verdict(drill: ParsonsDrill, result: RunResult) -> Verdict:
    """Grade an arrangement from its graded run: right when every check gives what the author's order gives."""
    if result.status is not Status.OK:
        lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
        return Verdict(False, Reason.RAISES, lines[-1].strip() if lines else result.status)
    if result.passed:
        return Verdict(True, Reason.SAME_RESULTS)
    return Verdict(False, Reason.CHECKS, failed=tuple(feedback.check_feedback(drill.exercise, result)))


UNCHECKED = Verdict(False, Reason.UNCHECKED)
# Not an answer: the runner could not try the order, so nothing is recorded and the learner may check again.
UNAVAILABLE = Verdict(False, Reason.UNAVAILABLE)


def piece_order(drill: ParsonsDrill, user_id: int, lesson_id: str) -> list[int]:
    """Return the order a learner's buttons list a Parsons drill's pieces in: never the author's order."""
    # Fixed per learner and drill: the same buttons in the same places on every screen.
    order = shuffled(len(drill.pieces), f"{user_id}:{lesson_id}:{drill.id}")
    if order[: len(drill.lines)] == list(range(len(drill.lines))):
        order = order[1:] + order[:1]
    return order


def choice_order(drill: ChoiceDrill, user_id: int, lesson_id: str) -> list[int]:
    """Return the order a learner's buttons list a drill's choices in (the right one is first in the file)."""
    return shuffled(len(drill.choices), f"{user_id}:{lesson_id}:{drill.id}")


def lesson_finished(lesson: Lesson, answers: Mapping[tuple[str, str], Answer], solved: set[str]) -> bool:
    """Return whether a lesson whose slides are read is done: every question answered, every drill solved."""
    return not unanswered(lesson, dict(answers)) and all(drill.id in solved for drill in lesson.drills)
