"""Batch planning arithmetic: read limits and tasks balanced by records (property tests)."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given
from hypothesis import strategies as st

from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.options import SourceOptions, parse_options
from spark_kafka_group.options.specs import cpus_of_this_process
from spark_kafka_group.source.input_partition import input_partitions
from spark_kafka_group.source.planning import (
    MAX_TASK_RECORDS,
    MIN_TASK_RECORDS,
    OffsetRange,
    limit_end_offsets,
    plan_tasks,
    records_within_bytes,
    task_count,
)
from spark_kafka_group.source.record_sizes import RecordSizes

backlogs = st.dictionaries(
    st.builds(TopicPartition, st.sampled_from(["a", "b"]), st.integers(0, 7)),
    st.tuples(st.integers(0, 10_000), st.integers(0, 10_000)),
    min_size=1,
    max_size=8,
)


@given(backlogs, st.one_of(st.none(), st.integers(1, 5_000)))
def test_limit_never_exceeded_and_nothing_skipped(
    positions: dict[TopicPartition, tuple[int, int]], limit: int | None
) -> None:
    starts = {tp: start for tp, (start, _) in positions.items()}
    latest = {tp: start + size for tp, (start, size) in positions.items()}
    ends = limit_end_offsets(starts, latest, limit)
    taken = sum(ends[tp] - starts[tp] for tp in starts)
    backlog = sum(latest[tp] - starts[tp] for tp in starts)
    assert all(starts[tp] <= ends[tp] <= latest[tp] for tp in starts)
    assert taken == (backlog if limit is None else min(limit, backlog))


def test_limit_is_split_in_proportion_to_backlog() -> None:
    ends = limit_end_offsets(
        {TopicPartition("t", 0): 0, TopicPartition("t", 1): 0},
        {TopicPartition("t", 0): 900, TopicPartition("t", 1): 100},
        100,
    )
    assert ends == {("t", 0): 90, ("t", 1): 10}


def test_latest_behind_position_never_moves_backwards() -> None:
    assert limit_end_offsets({TopicPartition("t", 0): 50}, {TopicPartition("t", 0): 10}, None) == {
        TopicPartition("t", 0): 50
    }


sizes = st.floats(1, 100_000, allow_nan=False)


@given(backlogs, st.dictionaries(st.builds(TopicPartition, st.just("a"), st.integers(0, 7)), sizes),
       st.integers(1, 10**8))  # fmt: skip
def test_a_byte_limit_takes_at_most_its_bytes_and_never_nothing(
    positions: dict[TopicPartition, tuple[int, int]],
    bytes_per_record: dict[TopicPartition, float],
    max_bytes: int,
) -> None:
    """Split as limit_end_offsets splits, the records a byte limit allows take ``max_bytes``
    (by the figures; a partition without one at the others' mean), give or take the one
    record the split rounds per partition and the one record the count rounds down, and at
    least one record."""
    starts = {tp: start for tp, (start, _) in positions.items()}
    latest = {tp: start + size for tp, (start, size) in positions.items()}
    backlog = {tp: latest[tp] - starts[tp] for tp in starts}
    within = records_within_bytes(backlog, bytes_per_record, max_bytes)
    total = sum(backlog.values())
    known = [bytes_per_record[tp] for tp in backlog if tp in bytes_per_record]
    if not known or total == 0:
        assert within == total
        return
    assert 1 <= within <= total
    mean = sum(known) / len(known)
    ends = limit_end_offsets(starts, latest, within)
    taken = {tp: ends[tp] - starts[tp] for tp in starts}
    cost = sum(n * bytes_per_record.get(tp, mean) for tp, n in taken.items())
    largest = max(bytes_per_record.get(tp, mean) for tp in starts)
    rounding = len(starts) * largest + 1e-6
    if within > 1:
        assert cost <= max_bytes + rounding
    if within < total:
        average = sum(n * bytes_per_record.get(tp, mean) for tp, n in backlog.items()) / total
        assert cost >= max_bytes - average - rounding


def test_a_byte_limit_weighs_each_partition_by_its_record_size() -> None:
    big, small = TopicPartition("t", 0), TopicPartition("t", 1)
    # 1,000 records of 1,000 bytes and 1,000 of 10: 1,010,000 bytes in all.
    backlog = {big: 1000, small: 1000}
    sizes = {big: 1000.0, small: 10.0}
    assert records_within_bytes(backlog, sizes, 2_000_000) == 2000
    assert records_within_bytes(backlog, sizes, 101_000) == 200  # a tenth of each
    assert records_within_bytes(backlog, sizes, 1) == 1  # never nothing
    assert records_within_bytes(backlog, {}, 1) == 2000  # no figure: no byte limit
    assert records_within_bytes(backlog, {big: 1000.0}, 101_000) == 101  # small at the mean


def test_record_sizes_are_sampled_when_unknown_or_stale() -> None:
    asked: list[dict[TopicPartition, tuple[int, int]]] = []

    def sample(ranges: Mapping[TopicPartition, tuple[int, int]]) -> dict[TopicPartition, float]:
        asked.append(dict(ranges))
        return {tp: 100.0 + tp.partition for tp in ranges}

    a, b, c = (TopicPartition("t", p) for p in range(3))
    sizes = RecordSizes(sample=sample, ttl_ms=60_000)
    # c has no backlog: nothing to sample there, no figure.
    assert sizes.of({a: (0, 10), b: (5, 9), c: (7, 7)}, now_ms=0) == {a: 100.0, b: 101.0}
    assert asked == [{a: (0, 10), b: (5, 9)}]
    assert sizes.of({a: (10, 20), b: (9, 12)}, now_ms=59_999) == {a: 100.0, b: 101.0}
    assert len(asked) == 1  # fresh figures
    sizes.of({a: (20, 30), b: (12, 12)}, now_ms=60_000)
    assert asked[1] == {a: (20, 30)}  # a again at its position now; b has no backlog


range_lists = st.lists(
    st.tuples(st.integers(0, 1000), st.integers(0, 3000)), min_size=0, max_size=12
).map(
    lambda spans: [
        OffsetRange("t", p, start, start + size) for p, (start, size) in enumerate(spans)
    ]
)


@given(
    range_lists,
    st.integers(1, 16),
    st.one_of(st.none(), st.integers(1, 40)),
    st.one_of(st.none(), st.integers(1, 700)),
    st.integers(1, 5_000),
)
def test_every_offset_is_read_once_in_order_by_balanced_tasks(
    ranges: list[OffsetRange],
    parallelism: int,
    min_partitions: int | None,
    max_records: int | None,
    min_task_records: int,
) -> None:
    tasks = plan_tasks(
        ranges,
        parallelism=parallelism,
        min_partitions=min_partitions,
        max_records_per_partition=max_records,
        min_task_records=min_task_records,
    )
    total = sum(r.size for r in ranges)
    # Read in task order, the pieces give every offset of every range exactly once, in order.
    read = [
        (p.partition, o)
        for task in tasks
        for p in task
        for o in range(p.from_offset, p.until_offset)
    ]
    assert read == [(r.partition, o) for r in ranges for o in range(r.from_offset, r.until_offset)]
    assert all(p.size > 0 for task in tasks for p in task)
    sizes = [sum(p.size for p in task) for task in tasks]
    assert all(sizes) and (not sizes or max(sizes) - min(sizes) <= 1)
    if max_records:
        assert all(size <= max_records for size in sizes)
    # As many tasks as cores while each reads enough; minPartitions raises the count.
    enough = min(parallelism, -(-total // min_task_records))
    expected = max(enough, min_partitions or 0, -(-total // (max_records or total or 1)), 1)
    assert len(tasks) == (min(expected, total) if total else 0)


def test_sixty_four_partitions_run_as_many_tasks_as_eight() -> None:
    for partitions in (8, 64, 512):
        ranges = [OffsetRange("t", p, 0, 512_000 // partitions) for p in range(partitions)]
        tasks = plan_tasks(
            ranges, parallelism=2, min_partitions=None, max_records_per_partition=None
        )
        assert [sum(p.size for p in task) for task in tasks] == [256_000, 256_000]


def test_a_small_batch_runs_one_task_and_a_huge_one_spreads() -> None:
    small = [OffsetRange("t", p, 0, 250) for p in range(64)]
    assert (
        len(plan_tasks(small, parallelism=8, min_partitions=None, max_records_per_partition=None))
        == 1
    )
    huge = [OffsetRange("t", 0, 0, 10 * MAX_TASK_RECORDS)]
    tasks = plan_tasks(huge, parallelism=2, min_partitions=None, max_records_per_partition=None)
    assert len(tasks) == 10


def test_min_partitions_splits_the_big_range() -> None:
    tasks = plan_tasks(
        [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 0, 10)],
        parallelism=1,
        min_partitions=4,
        max_records_per_partition=None,
    )
    assert [[(p.partition, p.from_offset, p.until_offset) for p in task] for task in tasks] == [
        [(0, 0, 252)],
        [(0, 252, 505)],
        [(0, 505, 757)],
        [(0, 757, 1000), (1, 0, 10)],
    ]


def test_task_count_bounds() -> None:
    def count(records: int, min_partitions: int | None = None, cap: int | None = None) -> int:
        return task_count(
            records, parallelism=4, min_partitions=min_partitions, max_records_per_partition=cap
        )

    assert count(0) == 0
    assert count(MIN_TASK_RECORDS) == 1
    assert count(4 * MIN_TASK_RECORDS) == 4
    assert count(MAX_TASK_RECORDS) == 4
    assert count(8 * MAX_TASK_RECORDS) == 8
    assert count(3, min_partitions=10) == 3
    assert count(1000, cap=100) == 10


def _options(**extra: str) -> SourceOptions:
    return parse_options(
        {
            "kafka.bootstrap.servers": "localhost:9092",
            "subscribe": "t",
            "groupId": "g",
            "groupStore": "/tmp/groups",
            **extra,
        }
    )


def test_input_partitions_follow_parallelism_min_partitions_and_max_records() -> None:
    ranges = [OffsetRange("t", p, 0, 25_000) for p in range(4)]
    two = input_partitions(_options(parallelism="2"), ranges)
    assert [[(s.partition, s.from_offset, s.until_offset) for s in p.specs] for p in two] == [
        [(0, 0, 25_000), (1, 0, 25_000)],
        [(2, 0, 25_000), (3, 0, 25_000)],
    ]
    assert len(input_partitions(_options(parallelism="2", minPartitions="8"), ranges)) == 8
    capped = input_partitions(_options(parallelism="2", maxRecordsPerPartition="10000"), ranges)
    assert len(capped) == 10


def test_parallelism_defaults_to_the_cpus_of_the_driver_process() -> None:
    assert _options().parallelism == cpus_of_this_process() >= 1
