"""Batch planning arithmetic: read limits and input-partition splitting (property tests)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.options import SourceOptions, parse_options
from spark_kafka_group.source.input_partition import input_partitions
from spark_kafka_group.source.planning import (
    SHARED_TASK_RECORDS,
    OffsetRange,
    limit_end_offsets,
    pack_ranges,
    split_ranges,
)

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


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 3000)), min_size=1, max_size=6),
    st.one_of(st.none(), st.integers(1, 20)),
    st.one_of(st.none(), st.integers(1, 700)),
)
def test_split_covers_each_range_exactly(
    spans: list[tuple[int, int]], min_partitions: int | None, max_records: int | None
) -> None:
    ranges = [OffsetRange("t", i, start, start + size) for i, (start, size) in enumerate(spans)]
    parts = split_ranges(
        ranges, min_partitions=min_partitions, max_records_per_partition=max_records
    )
    for r in ranges:
        mine = sorted((p for p in parts if p.partition == r.partition), key=lambda p: p.from_offset)
        covered = [o for p in mine for o in range(p.from_offset, p.until_offset)]
        assert covered == list(range(r.from_offset, r.until_offset))
        assert all(p.size > 0 for p in mine)
        if max_records:
            assert all(p.size <= max_records for p in mine)
    if min_partitions:
        assert len(parts) >= min(min_partitions, sum(r.size for r in ranges))


def test_min_partitions_splits_the_big_range() -> None:
    parts = split_ranges(
        [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 0, 10)],
        min_partitions=4,
        max_records_per_partition=None,
    )
    assert len(parts) >= 4
    assert [p.size for p in parts if p.partition == 1] == [10]


@given(
    st.lists(st.integers(1, 3000), min_size=0, max_size=12),
    st.integers(1, 5000),
    st.integers(1, 5),
)
def test_pack_keeps_every_range_once_in_order_and_bounds_shared_tasks(
    sizes: list[int], max_records: int, max_ranges: int
) -> None:
    ranges = [OffsetRange("t", i, 100, 100 + size) for i, size in enumerate(sizes)]
    tasks = pack_ranges(ranges, max_records=max_records, max_ranges=max_ranges)
    assert [r for task in tasks for r in task] == ranges
    for task in tasks:
        assert 1 <= len(task) <= max_ranges
        if len(task) > 1:
            assert sum(r.size for r in task) <= max_records


def test_small_ranges_share_one_task_and_a_backlog_keeps_one_task_per_range() -> None:
    small = [OffsetRange("t", p, 0, 250) for p in range(6)]
    assert pack_ranges(small) == [small[:4], small[4:]]
    big = [OffsetRange("t", p, 0, SHARED_TASK_RECORDS) for p in range(4)]
    assert pack_ranges(big) == [[r] for r in big]


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


def test_input_partitions_pack_small_ranges_unless_min_partitions_asks_for_tasks() -> None:
    ranges = [OffsetRange("t", p, 0, 250) for p in range(4)]
    packed = input_partitions(_options(), ranges)
    assert [[(s.partition, s.from_offset, s.until_offset) for s in p.specs] for p in packed] == [
        [(p, 0, 250) for p in range(4)]
    ]
    assert len(input_partitions(_options(minPartitions="4"), ranges)) == 4
    capped = input_partitions(_options(maxRecordsPerPartition="500"), ranges)
    assert [len(p.specs) for p in capped] == [2, 2]
