"""bench_fetch_ranges runs end to end at its smallest cases, so that it cannot rot. Its figures
are printed, never asserted; the test asserts that it ran, read every record (the benchmark
checks the counts) and printed its ``key=value`` line."""

from __future__ import annotations

import math

import pytest

from benchmarks import bench_fetch_ranges

pytestmark = pytest.mark.broker


def test_bench_fetch_ranges_runs_and_prints_its_key_value_line(
    bootstrap_servers: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--bootstrap-servers", bootstrap_servers, "--cases", "trigger,kept", "--rounds", "1"]
    assert bench_fetch_ranges.main(argv) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    figures = dict(pair.split("=", 1) for pair in last.split())
    for key in (
        "trigger_together_p50_s",
        "trigger_one_p50_s",
        "ratio_trigger_p50",
        "kept_fetch_p50_s",
        "kept_assigned_p50_s",
        "kept_kept_p50_s",
        "ratio_kept_p50",
    ):
        assert not math.isnan(float(figures[key])), f"{key} missing or nan: {last}"
