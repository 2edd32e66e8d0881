"""bench/stats.py --quick runs end to end and prints one JSON object with sane figures (no timing targets here)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

from tests.conftest import ROOT


def test_quick_stats_benchmark_prints_every_figure():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "stats.py"), "--quick"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, done.stdout[-2000:]
    result = json.loads(lines[0])
    assert result["learners"] == 2000 and result["quick"] is True
    assert 10 < result["events_per_learner"] < 100
    assert result["db_bytes_per_learner"] > result["report_index_bytes_per_learner"] > 0
    for key in ("report_s", "full_scan_s", "lesson_report_s", "filtered_report_s"):
        assert 0 < result[key] < 60, (key, result[key])
    # Both times are rounded to milliseconds in the JSON, the ratio is of the unrounded ones.
    assert math.isclose(result["report_over_scan"], result["report_s"] / result["full_scan_s"], rel_tol=0.1)
    # The target is reported, not asserted: it is for 100,000 learners on a quiet machine.
    assert isinstance(result["target_met"], bool) and isinstance(result["contended"], bool)
