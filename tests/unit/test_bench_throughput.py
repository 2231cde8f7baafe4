"""bench_throughput's steady-state rate: the join is start-up, not throughput."""

from __future__ import annotations

import pytest

from benchmarks.bench_throughput import _source_rate


def _progress(rows: int, latest_offset_ms: int, trigger_ms: int) -> dict:
    return {
        "numInputRows": rows,
        "durationMs": {
            "latestOffset": latest_offset_ms,
            "addBatch": trigger_ms - latest_offset_ms,
            "triggerExecution": trigger_ms,
        },
    }


def test_the_first_triggers_latest_offset_is_start_up() -> None:
    # The AvailableNow run: one batch, latestOffset 3.3 s of a 5.2 s trigger.
    rate = _source_rate([_progress(1_900_000, 3300, 5200)])
    assert rate["startup_s"] == pytest.approx(3.3)
    assert rate["seconds"] == pytest.approx(1.9)
    assert rate["rps"] == pytest.approx(1_000_000)
    assert "latestOffset=0" in rate["phases"]


def test_later_batches_count_whole() -> None:
    rate = _source_rate(
        [_progress(1000, 3000, 3500), _progress(2000, 100, 1100), _progress(0, 50, 60)]
    )
    assert rate["startup_s"] == pytest.approx(3.0)
    assert rate["seconds"] == pytest.approx(0.5 + 1.1)
    assert rate["rows"] == 3000
    assert rate["batches"] == 2


def test_an_empty_first_trigger_is_start_up_alone() -> None:
    # The join's trigger planned nothing: every data batch counts whole.
    rate = _source_rate([_progress(0, 3000, 3100), _progress(500, 100, 500)])
    assert rate["startup_s"] == pytest.approx(3.0)
    assert rate["seconds"] == pytest.approx(0.5)
