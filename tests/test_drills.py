"""The drills' rules without Telegram (bot/drills.py): taps, stale and forged ones, verdicts, equivalent orders."""

from __future__ import annotations

import pytest

from bot import drills
from bot.course.model import ChoiceDrill, ExerciseCheck, Lesson, ParsonsDrill, Question
from bot.drills import Move, Reason, Refusal, Verdict
from bot.learner import FRESH, TURNS, Answer, DrillProgress
from runner.client import CheckOutcome, RunResult

# Lines 0 and 1 are independent; 2 needs both; 3 is a distractor.
PARSONS = ParsonsDrill(
    id="make-y",
    prompt="Build `y`.",
    lines=("a = 1", "b = 2", "y = a + b"),
    distractors=("y = a - b",),
    setup="import math",
    checks=(ExerciseCheck("y-value", "y", "close", None, "`y` is {got}."),),
    explanation="Add them.",
)
LOOP = ParsonsDrill(
    id="loop",
    prompt="Loop.",
    lines=("total = 0", "for i in range(3):", "    total += i"),
    distractors=(),
    setup="",
    checks=(ExerciseCheck("total", "total", "equal", 3, "`total` is {got}."),),
    explanation="Sum.",
)
FILL = ChoiceDrill(
    id="gap",
    kind="fill",
    prompt="Fill it.",
    code="x = ___",
    choices=("1", "2", "3"),
    correct=1,
    explanation="Two.",
)


def _progress(move: Move, drill=PARSONS, progress: DrillProgress = FRESH, arg: int = 0) -> DrillProgress | Refusal:
    return drills.apply(drill, progress, move, arg, progress.stamp)


def _placed(*pieces: int) -> DrillProgress:
    progress = FRESH
    for piece in pieces:
        after = _progress(Move.PLACE, progress=progress, arg=piece)
        assert isinstance(after, DrillProgress)
        progress = after
    return progress


def test_placing_lines_builds_the_arrangement_and_counts_turns():
    progress = _placed(1, 0)
    assert progress.placed == (1, 0)
    assert progress.turn == 2
    assert drills.arrangement(PARSONS, progress.placed) == ("b = 2", "a = 1")
    assert drills.arranged_program(PARSONS, progress.placed) == "import math\nb = 2\na = 1"


def test_undo_takes_the_last_line_back_and_start_over_takes_them_all():
    progress = _placed(1, 0, 2)
    undone = _progress(Move.UNDO, progress=progress)
    assert isinstance(undone, DrillProgress) and undone.placed == (1, 0)
    reset = _progress(Move.RESET, progress=undone)
    assert isinstance(reset, DrillProgress) and reset.placed == () and reset.turn == progress.turn + 2


def test_a_tap_from_an_older_screen_is_stale_and_changes_nothing():
    progress = _placed(0)
    assert drills.apply(PARSONS, progress, Move.PLACE, 1, FRESH.stamp) is Refusal.STALE
    assert drills.answerable(PARSONS, _placed(0, 1, 2), Move.CHECK, 0, progress.stamp) is Refusal.STALE


def test_the_turn_a_button_carries_wraps_and_still_tells_stale_from_current():
    progress = DrillProgress(turn=TURNS + 5)
    assert progress.stamp == 5
    assert isinstance(drills.apply(PARSONS, progress, Move.PLACE, 0, 5), DrillProgress)
    assert drills.apply(PARSONS, progress, Move.PLACE, 0, 4) is Refusal.STALE


@pytest.mark.parametrize(
    ("move", "arg", "progress"),
    [
        (Move.PLACE, 0, _placed(0)),  # a line already placed
        (Move.PLACE, 4, FRESH),  # no such line
        (Move.PLACE, 3, _placed(0, 1, 2)),  # every place is taken
        (Move.UNDO, 0, FRESH),  # nothing to undo
        (Move.RESET, 0, FRESH),
        (Move.AGAIN, 0, FRESH),  # not solved yet
        (Move.CHOOSE, 0, FRESH),  # not a choice drill
    ],
)
def test_a_move_the_screen_never_offered_is_refused_as_invalid(move, arg, progress):
    assert drills.apply(PARSONS, progress, move, arg, progress.stamp) is Refusal.INVALID


def test_moves_on_a_choice_drill_other_than_choosing_are_invalid():
    for move in (Move.PLACE, Move.UNDO, Move.RESET):
        assert _progress(move, drill=FILL) is Refusal.INVALID
    assert drills.answerable(FILL, FRESH, Move.CHECK, 0, 0) is Refusal.INVALID
    assert drills.answerable(FILL, FRESH, Move.CHOOSE, 3, 0) is Refusal.INVALID  # no fourth choice


def test_a_check_needs_every_line_placed_and_a_changed_arrangement():
    assert drills.answerable(PARSONS, _placed(0, 1), Move.CHECK, 0, 2) is Refusal.INCOMPLETE
    complete = _placed(1, 0, 3)
    assert drills.answerable(PARSONS, complete, Move.CHECK, 0, complete.stamp) is None
    wrong = drills.answered(complete, Verdict(False, Reason.DISTRACTOR, "y = a - b"))
    assert wrong.checked and wrong.tries == 1 and wrong.placed == complete.placed
    # Checking the same arrangement again would teach nothing; a change makes it checkable again.
    assert drills.answerable(PARSONS, wrong, Move.CHECK, 0, wrong.stamp) is Refusal.INVALID
    undone = _progress(Move.UNDO, progress=wrong)
    assert isinstance(undone, DrillProgress) and not undone.checked


def test_a_right_answer_solves_the_drill_and_again_starts_a_fresh_attempt_that_stays_solved():
    complete = _placed(0, 1, 2)
    right = drills.answered(complete, Verdict(True, Reason.AUTHORS_ORDER))
    assert right.solved and right.done and right.tries == 0
    assert _progress(Move.UNDO, progress=right) is Refusal.SOLVED
    assert drills.answerable(PARSONS, right, Move.CHECK, 0, right.stamp) is Refusal.SOLVED
    again = _progress(Move.AGAIN, progress=right)
    assert isinstance(again, DrillProgress)
    assert (again.placed, again.done, again.solved, again.turn) == ((), False, True, right.turn + 1)


def test_choices_are_graded_without_the_runner_and_a_wrong_one_is_ruled_out():
    assert drills.grade_choice(FILL, 1) == Verdict(True, Reason.RIGHT_CHOICE)
    wrong = drills.grade_choice(FILL, 2)
    assert wrong == Verdict(False, Reason.WRONG_CHOICE, "3")
    after = drills.answered(FRESH, wrong, choice=2)
    assert after.ruled_out == {2} and after.tries == 1 and not after.checked
    assert drills.answerable(FILL, after, Move.CHOOSE, 2, after.stamp) is Refusal.TRIED
    assert drills.answerable(FILL, after, Move.CHOOSE, 0, after.stamp) is None


def test_the_authors_order_is_right_without_running():
    assert drills.precheck(PARSONS, (0, 1, 2)) == Verdict(True, Reason.AUTHORS_ORDER)


def test_equal_lines_are_interchangeable():
    twice = ParsonsDrill("twice", "p", ("x = 1", "x = 1", "y = x"), (), "", PARSONS.checks, "e")
    assert drills.precheck(twice, (1, 0, 2)) == Verdict(True, Reason.AUTHORS_ORDER)


def test_a_distractor_makes_the_order_wrong_without_running():
    assert drills.precheck(PARSONS, (0, 1, 3)) == Verdict(False, Reason.DISTRACTOR, "y = a - b")


def test_an_order_that_is_not_python_is_wrong_and_names_the_line():
    split = ParsonsDrill("split", "p", ("x = [1,", "     2]"), (), "", LOOP.checks, "e")
    verdict = drills.precheck(split, (1, 0))
    assert verdict is not None and verdict.reason is Reason.NOT_PYTHON and not verdict.right
    assert verdict.detail.endswith(": 2]"), verdict.detail


def test_a_block_left_empty_names_its_opener_not_the_line_after_it_and_no_setup_line_number():
    # The opener placed before a line that is not indented: Python reports the line after it, counting the setup.
    lines = ("x = 1", "with open('f') as f:", "    y = 2", "z = 3")
    block = ParsonsDrill("block", "p", lines, (), "import os\nimport io", LOOP.checks, "e")
    verdict = drills.precheck(block, (0, 1, 3, 2))
    assert verdict == Verdict(False, Reason.EMPTY_BLOCK, "with open('f') as f:")


def test_an_indented_line_under_no_opener_names_the_opener_it_belongs_under_even_one_placed_below_it():
    # Python blames the indented line; the line to move is its opener, placed after it (issue 20).
    lines = ("x = 1", "with open('f') as f:", "    y = 2", "z = 3")
    block = ParsonsDrill("block", "p", lines, (), "import os\nimport io", LOOP.checks, "e")
    opener_last = drills.precheck(block, (0, 3, 2, 1))
    assert opener_last == Verdict(False, Reason.STRAY_INDENT, "y = 2", opener="with open('f') as f:")
    last = drills.precheck(LOOP, (0, 2, 1))  # the opener last: nothing follows it
    assert last == Verdict(False, Reason.STRAY_INDENT, "total += i", opener=LOOP.lines[1].strip())


def test_another_order_that_compiles_must_be_run():
    assert drills.precheck(PARSONS, (1, 0, 2)) is None
    assert drills.precheck(PARSONS, (2, 0, 1)) is None  # compiles; running it raises NameError


def _result(status: str = "ok", *, stderr: str = "", checks=(), passed: bool = False) -> RunResult:
    return RunResult(
        status=status,
        stdout="",
        stderr=stderr,
        exit_code=0 if status == "ok" else 1,
        signal=None,
        duration_ms=1.0,
        truncated=False,
        checks=tuple(checks),
        passed=passed,
    )


def test_a_run_that_passes_every_check_is_an_equivalent_order():
    passing = _result(checks=[CheckOutcome("y-value", True, "checks.passed", {})], passed=True)
    assert drills.run_verdict(PARSONS, passing) == Verdict(True, Reason.SAME_RESULTS)


def test_a_run_that_raises_shows_the_error_line():
    trace = "Traceback (most recent call last):\n  File \"<snippet>\", line 2\nNameError: name 'a' is not defined\n"
    verdict = drills.run_verdict(PARSONS, _result("error", stderr=trace, passed=False))
    assert verdict == Verdict(False, Reason.RAISES, "NameError: name 'a' is not defined")


def test_a_run_that_gives_other_values_shows_the_checks_own_message():
    failing = _result(checks=[CheckOutcome("y-value", False, "checks.mismatch", {"got": "-1"})], passed=False)
    verdict = drills.run_verdict(PARSONS, failing)
    assert verdict == Verdict(False, Reason.CHECKS, failed=("`y` is `-1`.",))


def test_a_parsons_drill_is_graded_as_an_exercise_whose_solution_is_the_authors_order():
    exercise = PARSONS.exercise
    assert exercise.solution == "import math\na = 1\nb = 2\ny = a + b"
    assert exercise.checks == PARSONS.checks


def test_each_learner_sees_the_lines_in_their_own_order_never_the_authors():
    orders = {tuple(drills.piece_order(PARSONS, user, "lesson")) for user in range(200)}
    assert all(sorted(order) == [0, 1, 2, 3] for order in orders)
    assert all(order[:3] != (0, 1, 2) for order in orders)
    assert len(orders) > 5
    assert drills.piece_order(PARSONS, 7, "lesson") == drills.piece_order(PARSONS, 7, "lesson")


def test_an_attempt_stored_before_the_lesson_changed_starts_over_but_stays_solved():
    fits = DrillProgress(placed=(2, 0), turn=7, solved=True)
    assert drills.fitted(PARSONS, fits) is fits
    shorter = ParsonsDrill("make-y", "p", ("a = 1", "y = a"), (), "", PARSONS.checks, "e")
    for stored in (DrillProgress(placed=(0, 3), turn=7, solved=True), DrillProgress(placed=(0, 1, 0), turn=7)):
        assert drills.fitted(shorter, stored) == DrillProgress(turn=8, solved=stored.solved)
    tried = DrillProgress(ruled_out=frozenset({0, 2}), turn=3, tries=2)
    assert drills.fitted(FILL, tried) is tried
    assert drills.fitted(FILL, DrillProgress(ruled_out=frozenset({5}), turn=3)) == DrillProgress(turn=4)
    # The right choice changed to one the learner had ruled out: the attempt starts over.
    assert drills.fitted(FILL, DrillProgress(ruled_out=frozenset({1}), turn=3)).ruled_out == frozenset()


def test_choices_are_shuffled_per_learner():
    orders = {tuple(drills.choice_order(FILL, user, "lesson")) for user in range(100)}
    assert all(sorted(order) == [0, 1, 2] for order in orders)
    assert len({order[0] for order in orders}) == 3  # the right choice is not always in the same place


LESSON = Lesson(
    id="lesson",
    number=1,
    title="t",
    summary="s",
    slides=(),
    quiz=(Question("q1", "?", ("a", "b"), 0, "e"),),
    recap="r",
    drills=(PARSONS, FILL),
)


def test_a_lesson_is_finished_when_every_question_is_answered_and_every_drill_solved():
    answered = {("lesson", "q1"): Answer("lesson", "q1", 1, False)}
    assert not drills.lesson_finished(LESSON, {}, {"make-y", "gap"})
    assert not drills.lesson_finished(LESSON, answered, {"make-y"})
    assert drills.lesson_finished(LESSON, answered, {"make-y", "gap"})
