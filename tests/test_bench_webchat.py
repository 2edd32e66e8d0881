"""bench/webchat.py runs end to end and reports both paths (a handful of taps; the numbers are not judged here)."""

from __future__ import annotations

from bench import webchat


async def test_the_webchat_benchmark_reports_the_page_and_the_direct_path():
    result = await webchat.main(taps=5)
    assert result["taps"] == 5
    assert 0 < result["direct_p50_ms"] <= result["direct_p99_ms"]
    assert 0 < result["webchat_p50_ms"] <= result["webchat_p99_ms"]
    assert result["overhead_ratio"] > 0
