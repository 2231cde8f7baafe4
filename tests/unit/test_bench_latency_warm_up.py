"""The latency benchmark measures a reader once it has caught up, not while it drains its
start."""

from __future__ import annotations

import pytest

from benchmarks.end_to_end import CATCH_UP_LIMIT_S, Latencies, LatencyRun, pooled


def _batches(
    latencies: Latencies, now_s: float, ages_s: list[float], every_s: float = 0.2, n: int = 10
) -> float:
    """Batches ``every_s`` apart from ``now_s`` on, the k-th one's records ``ages_s[k]`` down
    to 0 s old when it arrives; the arrival time of the last."""
    for age in ages_s:
        now_s += every_s
        oldest_ms = (now_s - age) * 1000.0
        step = age * 1000.0 / max(1, n - 1)
        latencies.add([int(oldest_ms + i * step) for i in range(n)], now_s)
    return now_s


def test_a_reader_still_draining_its_start_is_not_measured_after_the_warm_up() -> None:
    lat = Latencies("r", warmup_s=5.0)
    # Batches 0.2 s apart whose oldest records are 1.2 s old: the start still being drained.
    now = _batches(lat, 1000.0, [1.2] * 40)
    assert now - 1000.0 > 5.0
    assert not lat.measuring()
    assert lat.values == []
    # Steady: each batch's oldest record arrived about two intervals ago.
    now = _batches(lat, now, [0.4] * 3)
    assert lat.measuring() and lat.caught_up
    assert lat.measuring_since == now
    _batches(lat, now, [0.4], n=2)
    assert sorted(lat.values) == pytest.approx([0.0, 400.0], abs=1.0)


def test_a_caught_up_reader_waits_out_the_warm_up_still() -> None:
    lat = Latencies("r", warmup_s=5.0)
    now = _batches(lat, 0.0, [0.3] * 10)
    assert not lat.measuring(), "2 s into a 5 s warm-up"
    _batches(lat, now, [0.3] * 20)
    assert lat.measuring() and lat.caught_up
    assert lat.measuring_since is not None and lat.first_batch_s is not None
    assert 5.0 <= lat.measuring_since - lat.first_batch_s < 5.3


def test_a_reader_that_never_catches_up_is_measured_at_the_limit_and_says_so() -> None:
    lat = Latencies("r", warmup_s=5.0)
    _batches(lat, 0.0, [3.0] * int(CATCH_UP_LIMIT_S / 0.5 + 2), every_s=0.5)
    assert lat.measuring() and not lat.caught_up
    assert "NOT caught up" in lat.warm_up_shown()


def test_one_fresh_batch_among_stale_ones_does_not_start_the_measurement() -> None:
    lat = Latencies("r", warmup_s=0.0)
    now = _batches(lat, 0.0, [0.3, 2.0, 0.3, 0.3, 2.0, 0.3])
    assert not lat.measuring()
    now = _batches(lat, now, [0.3])
    assert not lat.measuring(), "two fresh batches in a row"
    _batches(lat, now, [0.3])
    assert lat.measuring()


def test_rounds_pool_every_record_and_batch_of_each_reader() -> None:
    def one_round(values: list[float], batches: int) -> LatencyRun:
        lat = Latencies("kafka-group", warmup_s=5.0)
        lat.values.extend(values)
        progress = [{"durationMs": {"addBatch": 100.0 * (i + 1)}} for i in range(batches)]
        return LatencyRun({"kafka-group": lat}, {"kafka-group": progress}, seconds=10.0)

    run = pooled([one_round([300.0, 100.0], 2), one_round([200.0, 400.0, 500.0], 3)])
    lat = run.readers["kafka-group"]
    assert sorted(lat.values) == [100.0, 200.0, 300.0, 400.0, 500.0]
    assert lat.percentile(50) == 300.0
    assert len(lat.rounds) == 2
    assert run.batches_per_s("kafka-group") == 5 / 20.0
    assert run.phases("kafka-group") == "addBatch=180"  # (100 + 200 + 100 + 200 + 300) / 5
