"""A range of a task's fetch takes exactly its records from the runs ``consume()`` returns."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from spark_kafka_group.fetcher.ranges import FetchRange, task_max_rows
from spark_kafka_group.fetcher.spec import FetchSpec


@st.composite
def runs_over_a_log(draw: st.DrawFn) -> tuple[int, int, list[list[int]]]:
    """A range ``[start, until)`` and the runs of one partition's offsets a fetch delivers from
    ``start`` on: increasing, with gaps (compaction, transaction markers), cut anywhere, and
    possibly going past ``until`` (records fetched beyond the range)."""
    start = draw(st.integers(0, 50))
    until = start + draw(st.integers(1, 60))
    gaps = draw(st.lists(st.integers(1, 4), min_size=1, max_size=120))
    offsets, at = [], start
    for gap in gaps:
        offsets.append(at)
        at += gap
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(offsets) - 1)), max_size=10)))
    bounds = [0, *cuts, len(offsets)]
    runs = [offsets[a:b] for a, b in pairwise(bounds) if b > a]
    return start, until, runs


@given(runs_over_a_log())
def test_a_range_takes_exactly_its_offsets(case: tuple[int, int, list[list[int]]]) -> None:
    start, until, runs = case
    rng = FetchRange(FetchSpec("t", 0, start, until, "b:9092"), now=0.0)
    taken: list[int] = []
    for run in runs:
        lo, hi = rng.take(run, now=1.0)
        assert 0 <= lo <= hi <= len(run)
        taken.extend(run[lo:hi])
    delivered = [o for run in runs for o in run]
    assert taken == [o for o in delivered if start <= o < until]
    # Done once a record at or past the range's last offset has arrived, and only then.
    assert rng.done == any(o >= until - 1 for o in delivered)
    if rng.done:
        assert rng.next_offset == until
    elif taken:
        assert rng.next_offset == taken[-1] + 1


def test_a_done_range_takes_nothing_more() -> None:
    rng = FetchRange(FetchSpec("t", 0, 0, 3, "b:9092"), now=0.0)
    assert rng.take([0, 1, 2, 3], now=1.0) == (0, 3)
    assert rng.done and rng.take([4, 5], now=2.0) == (0, 0)


def test_records_below_the_position_are_skipped() -> None:
    rng = FetchRange(FetchSpec("t", 0, 10, 20, "b:9092"), now=0.0)
    assert rng.take([8, 9, 10, 11], now=1.0) == (2, 4)
    assert rng.next_offset == 12 and not rng.done


def test_a_task_of_many_small_ranges_asks_for_batches_of_its_whole_size() -> None:
    # 256 ranges of 2,343 records: a batch holds records of several partitions, up to
    # max_batch_rows, not one range's worth.
    specs = [FetchSpec("t", p, 0, 2_343, "b:9092") for p in range(256)]
    assert task_max_rows(specs) == 20_000
    assert task_max_rows(specs[:3]) == 3 * 2_343
    assert task_max_rows([FetchSpec("t", 0, 10, 11, "b:9092")]) == 1
    assert task_max_rows([FetchSpec("t", 0, 0, 10**9, "b:9092", max_batch_rows=5_000)]) == 5_000
    assert task_max_rows([FetchSpec("t", 0, 0, 10**9, "b:9092", max_batch_rows=10**8)]) == 10**6
