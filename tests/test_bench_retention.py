"""bench/retention.py --quick runs and prints one JSON object with every figure (no timing targets here)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

KEYS = (
    "review_us",
    "fsrs_us",
    "review_ratio",
    "plan_us",
    "sort_us",
    "plan_ratio",
    "plans_per_s",
    "card_ms",
    "plain_card_ms",
    "card_ratio",
    "sender_per_s",
    "sender_cpu_us",
)


@pytest.mark.skipif(
    not Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc").exists(),
    reason="the card's Noto fonts are not installed: apt-get install fonts-noto-core fonts-noto-cjk (.ci/run does)",
)
def test_the_retention_benchmark_prints_every_figure() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "retention.py"), "--quick"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [line] = done.stdout.strip().splitlines()
    result = json.loads(line)
    for key in KEYS:
        value = result[key]
        assert isinstance(value, int | float) and math.isfinite(value) and value > 0, (key, value)
    # The pace is decided on virtual time, so it is exact: the budget's rate, under Telegram's 30.
    assert result["sender_per_s"] == pytest.approx(28.0, rel=0.01)
