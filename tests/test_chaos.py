"""A crash loses nothing and strands nobody: learners take the whole course while the bot is killed with kill -9
at random moments and the Bot API fails now and then (tests/chaos.py says how; bench/chaos.py is the long form)."""

from __future__ import annotations

import shutil

import pytest

from tests.chaos import COURSE, ORPHAN_POLLS, ChaosPlan, run_chaos

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="the learners' code runs in the runner's sandbox, which needs bubblewrap"
)


async def test_learners_finish_the_course_through_kill_9_and_api_faults_and_nothing_is_lost(tmp_path):
    result = await run_chaos(ChaosPlan(learners=4, kills=6, fault_rate=0.03, seed=9), tmp_path)
    print(result.to_json())  # the figures, for whoever reads the test's output
    figures = result.figures
    assert result.problems == [], "\n\n".join(result.problems) + f"\n\nfigures: {result.to_json()}"
    assert figures.finished == figures.learners == 4
    assert figures.drills_solved == 4 * sum(len(lesson.drills) for lesson in COURSE.lessons)
    # The run shook the bot as planned, or it proves nothing.
    assert figures.kills == 6
    assert sum(figures.faults_injected.values()) > 0
    assert figures.wrong_answers > 0 and figures.retakes > 0
    # An answer to a poll sent just before a kill counts too: the Quick Check notes each poll before sending it.
    assert result.orphan_answers == [], f"{len(result.orphan_answers)} quiz answers lost: {ORPHAN_POLLS}"
