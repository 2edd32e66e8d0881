"""bench/bot.py --quick runs end to end and prints one JSON object with sane figures (no timing targets here)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

from tests.conftest import ROOT

KEYS = ("updates_per_s", "p50_ms", "p99_ms", "framework_updates_per_s", "overhead_ratio")


def test_quick_benchmark_prints_every_figure():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bot.py"), "--quick"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, done.stdout[-2000:]
    result = json.loads(lines[0])

    for key in KEYS:
        value = result[key]
        assert isinstance(value, (int, float)) and not isinstance(value, bool), (key, value)
        assert math.isfinite(value) and value > 0, (key, value)
    assert result["p50_ms"] <= result["p99_ms"]
    assert result["framework_p50_ms"] <= result["framework_p99_ms"]
    assert math.isclose(
        result["overhead_ratio"], result["framework_updates_per_s"] / result["updates_per_s"], rel_tol=0.01
    )
    # The targets are reported, not asserted: they are for the full run on the benchmark machine.
    for key in ("overhead_ratio_ok", "p99_ok", "targets_met", "standin_bottleneck"):
        assert isinstance(result[key], bool), key
    assert result["errors"] == 0, result["details"]
    assert result["quick"] is True
    for bot in ("coursebot", "framework"):
        details = result["details"][bot]
        assert details["exit_code"] == 0, details
        assert details["saturation"]["taps_in_window"] > 0
        assert details["realistic"]["taps_in_window"] > 0


def test_the_drills_benchmark_runs_every_parsons_drill_against_a_trivial_job():
    # Each benchmark must keep running as the code under it changes: this one broke once when check
    # expressions became a safe tree (its trivial check was an 'x == 1' comparison).
    done = subprocess.run(
        [sys.executable, "-m", "bench.drills", "--repeat", "1"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["trivial_ms"] > 0
    assert set(result["drills"]) == {
        "requires-grad/track-first",
        "backward/loss-to-grads",
        "grad/step-order",
        "no-grad/hand-update",
    }
    assert all(figures["ratio"] > 0 for figures in result["drills"].values())
