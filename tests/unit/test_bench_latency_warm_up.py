"""The latency benchmark measures a reader once it has caught up, not while it drains its
start."""

from __future__ import annotations

import pytest

from benchmarks.end_to_end import CATCH_UP_LIMIT_S, Latencies


def _batch(latencies: Latencies, now_s: float, oldest_age_s: float, n: int = 10) -> None:
    """A batch arriving at ``now_s`` whose records are ``oldest_age_s`` down to 0 s old."""
    oldest_ms = (now_s - oldest_age_s) * 1000.0
    step = oldest_age_s * 1000.0 / max(1, n - 1)
    latencies.add([int(oldest_ms + i * step) for i in range(n)], now_s)


def test_a_reader_still_draining_its_start_is_not_measured_after_the_warm_up() -> None:
    lat = Latencies("r", warmup_s=5.0)
    now = 1000.0
    # Batches 0.2 s apart whose oldest records are 1.2 s old: the start still being drained.
    for _ in range(40):
        now += 0.2
        _batch(lat, now, 1.2)
    assert now - 1000.0 > 5.0
    assert not lat.measuring()
    assert lat.values == []
    # Steady: each batch's oldest record arrived about two intervals ago.
    for _ in range(3):
        now += 0.2
        _batch(lat, now, 0.4)
    assert lat.measuring() and lat.caught_up
    assert lat.measuring_since == now
    now += 0.2
    _batch(lat, now, 0.4, n=2)
    assert sorted(lat.values) == pytest.approx([0.0, 400.0], abs=1.0)


def test_a_caught_up_reader_waits_out_the_warm_up_still() -> None:
    lat = Latencies("r", warmup_s=5.0)
    now = 0.0
    for _ in range(10):
        now += 0.2
        _batch(lat, now, 0.3)
    assert not lat.measuring(), "2 s into a 5 s warm-up"
    for _ in range(20):
        now += 0.2
        _batch(lat, now, 0.3)
    assert lat.measuring() and lat.caught_up
    assert lat.measuring_since is not None and lat.first_batch_s is not None
    assert 5.0 <= lat.measuring_since - lat.first_batch_s < 5.3


def test_a_reader_that_never_catches_up_is_measured_at_the_limit_and_says_so() -> None:
    lat = Latencies("r", warmup_s=5.0)
    now = 0.0
    while now < CATCH_UP_LIMIT_S + 1:
        now += 0.5
        _batch(lat, now, 3.0)
    assert lat.measuring() and not lat.caught_up
    assert "NOT caught up" in lat.warm_up_shown()


def test_one_fresh_batch_among_stale_ones_does_not_start_the_measurement() -> None:
    lat = Latencies("r", warmup_s=0.0)
    now = 0.0
    for age in (0.3, 2.0, 0.3, 0.3, 2.0, 0.3):
        now += 0.2
        _batch(lat, now, age)
    assert not lat.measuring()
    now += 0.2
    _batch(lat, now, 0.3)
    assert not lat.measuring(), "two fresh batches in a row"
    now += 0.2
    _batch(lat, now, 0.3)
    assert lat.measuring()
