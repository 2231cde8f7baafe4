"""Start positions: new partitions, failOnDataLoss=false, timestamps, trigger minimums."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_kafka_group.errors import NoOffsetForPartitionError, OffsetOutOfRangeError
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.options import EARLIEST, OffsetLimit
from spark_kafka_group.source.planning import TriggerMinimum
from spark_kafka_group.source.positions import (
    LogBounds,
    PartitionsAtStart,
    check_in_range,
    initial_positions,
    known_at_start,
)
from spark_kafka_group.source.timestamps import answer_holds, first_offset_at_or_after

A0, A1, NEW = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
BOUNDS = LogBounds(earliest={A0: 5, A1: 0, NEW: 2}, latest={A0: 50, A1: 40, NEW: 30})


def positions(starting: OffsetLimit, *, discovered=frozenset(), committed=None, resolve=None):
    return initial_positions(
        [A0, A1, NEW],
        committed=committed or {},
        starting=starting,
        bounds=BOUNDS,
        group_id="g",
        discovered=discovered,
        at_timestamps=resolve,
    )


def test_partitions_discovered_after_start_begin_at_earliest_whatever_starting_offsets() -> None:
    at_start = PartitionsAtStart()
    at_start.record([A0, A1])
    at_start.record([A0, A1, NEW])  # only the first record counts
    discovered = at_start.discovered([A0, A1, NEW])
    assert discovered == {NEW}
    for starting in (OffsetLimit(mode="latest"), OffsetLimit(mode="none")):
        got = positions(starting, discovered=discovered, committed={A0: 7, A1: 3})
        assert got == {A0: 7, A1: 3, NEW: 2}
    # Known at start and never committed: startingOffsets applies.
    assert positions(OffsetLimit(mode="latest"), discovered=discovered) == {A0: 50, A1: 40, NEW: 2}
    with pytest.raises(NoOffsetForPartitionError, match="a-0, a-1"):
        positions(OffsetLimit(mode="none"), discovered=discovered)


def test_fail_on_data_loss_false_continues_at_the_nearest_existing_offset(caplog) -> None:
    given_positions = {A0: 2, A1: 45, NEW: 10}
    with caplog.at_level(logging.WARNING):
        checked = check_in_range(
            given_positions, bounds=BOUNDS, fail_on_data_loss=False, source="committed offset"
        )
    # Below the log start: the log start; past the end (topic recreated): the earliest.
    assert checked == {A0: 5, A1: 0, NEW: 10}
    assert "(3 offset(s) skipped)" in caplog.text
    assert "offsets 2..4 (3) were deleted" in caplog.text
    assert "5 offset(s) past the end" in caplog.text
    with pytest.raises(OffsetOutOfRangeError, match="a-0 is 2, out of range"):
        check_in_range(given_positions, bounds=BOUNDS, fail_on_data_loss=True, source="x")


def test_timestamp_starts_and_the_no_match_strategy() -> None:
    asked = {}

    def resolve(timestamps):
        asked.update(timestamps)
        return {A0: 12, A1: None, NEW: 3}

    by_ts = OffsetLimit(mode="earliest", by_timestamp={A0: 1000, A1: 2000})
    with pytest.raises(NoOffsetForPartitionError, match="a-1 has a timestamp at or after 2000"):
        positions(by_ts, resolve=resolve)
    latest = OffsetLimit(mode="earliest", by_timestamp={A0: 1000, A1: 2000}, no_match_latest=True)
    assert positions(latest, resolve=resolve) == {A0: 12, A1: 40, NEW: 2}
    assert asked == {A0: 1000, A1: 2000}
    every = OffsetLimit(
        mode="json", per_partition={A0: EARLIEST}, timestamp_ms=7, by_timestamp={A0: 1}
    )
    asked.clear()
    with pytest.raises(NoOffsetForPartitionError, match="a-1"):
        positions(every, resolve=resolve, discovered={NEW})
    assert asked == {
        A0: 7,
        A1: 7,
    }  # startingTimestamp wins; a new partition still starts at earliest


# -- the binary search over record timestamps ---------------------------------------------


def records_from(timestamps: list[int], gaps: set[int]):
    """An in-memory partition: offset -> timestamp, without the offsets in ``gaps``."""
    log = {o: ts for o, ts in enumerate(timestamps) if o not in gaps}
    reads = []

    def record_at(offset: int):
        reads.append(offset)
        later = [o for o in log if o >= offset]
        return (min(later), log[min(later)]) if later else None

    return log, record_at, reads


@given(
    steps=st.lists(st.integers(0, 3), max_size=200),
    gaps=st.sets(st.integers(0, 199), max_size=40),
    target=st.integers(-1, 400),
    low=st.integers(0, 20),
)
def test_binary_search_finds_the_first_record_at_or_after_the_timestamp(
    steps, gaps, target, low
) -> None:
    timestamps = [sum(steps[: i + 1]) for i in range(len(steps))]  # non-decreasing
    log, record_at, reads = records_from(timestamps, gaps)
    high = len(timestamps)
    low = min(low, high)
    expected = next((o for o in sorted(log) if o >= low and log[o] >= target), None)
    found = first_offset_at_or_after(record_at, low=low, high=high, timestamp_ms=target)
    assert found == expected
    assert len(reads) <= 2 * max(1, high - low).bit_length() + 2
    assert answer_holds(expected, record_at, low=low, high=high, timestamp_ms=target)


def test_a_broker_answer_that_contradicts_the_records_is_detected() -> None:
    _, record_at, _ = records_from([10, 20, 30, 40], set())
    kwargs = {"low": 0, "high": 4}
    assert answer_holds(2, record_at, timestamp_ms=25, **kwargs)
    assert answer_holds(None, record_at, timestamp_ms=41, **kwargs)
    assert not answer_holds(0, record_at, timestamp_ms=41, **kwargs)  # 0 for anything
    assert not answer_holds(0, record_at, timestamp_ms=25, **kwargs)  # record 0 is before
    assert not answer_holds(3, record_at, timestamp_ms=25, **kwargs)  # record 2 already is
    assert not answer_holds(None, record_at, timestamp_ms=35, **kwargs)  # record 3 is after


# -- minOffsetsPerTrigger / maxTriggerDelay -------------------------------------------------


def test_trigger_minimum_waits_for_records_unless_the_delay_passed() -> None:
    minimum = TriggerMinimum(min_records=100, max_delay_ms=5_000)
    assert not minimum.hold(3, now_ms=1_000_000)  # the first trigger never waits (as Spark)
    assert minimum.hold(99, now_ms=1_001_000)
    assert not minimum.hold(100, now_ms=1_002_000)  # enough records: a batch, clock restarts
    assert minimum.hold(50, now_ms=1_006_999)
    assert not minimum.hold(50, now_ms=1_007_000)  # 5 s since the last batch
    assert minimum.hold(0, now_ms=1_007_001)


def test_partitions_the_group_did_not_know_are_discovered_at_start() -> None:
    a0, a1, b0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
    current = [a0, a1, b0]
    # A group that never assigned: startingOffsets applies to every partition there now.
    assert known_at_start(current, None, pattern=True) == {a0, a1, b0}
    # Its last assignment knew a with one partition: a-1 and (under a pattern) topic b were
    # created while its members were stopped.
    assert known_at_start(current, {"a": 1}, pattern=True) == {a0}
    # A topic a subscribe list names anew is a new subscription, not a discovery.
    assert known_at_start(current, {"a": 1}, pattern=False) == {a0, b0}


def test_partitions_of_a_deleted_topic_are_skipped_only_without_fail_on_data_loss(
    caplog,
) -> None:
    from spark_kafka_group.errors import TopicNotFoundError
    from spark_kafka_group.source.positions import skip_vanished

    kept, gone = TopicPartition("kept", 0), TopicPartition("gone", 1)
    error = TopicNotFoundError("topic 'gone' does not exist")
    existing = {"kept": 1, "gone": 1}  # partition 1 of 'gone' is no more
    with pytest.raises(TopicNotFoundError, match="'gone'"):
        skip_vanished([kept, gone], existing=existing, fail_on_data_loss=True, error=error)
    with caplog.at_level(logging.WARNING):
        assert skip_vanished(
            [kept, gone], existing=existing, fail_on_data_loss=False, error=error
        ) == [kept]
    assert "gone-1" in caplog.text and "failOnDataLoss=false" in caplog.text
    # Nothing is missing after all (the error was about something else): it stands.
    with pytest.raises(TopicNotFoundError):
        skip_vanished([kept], existing=existing, fail_on_data_loss=False, error=error)


def test_a_batch_partition_whose_topic_is_gone_fails_or_warns_once(caplog) -> None:
    from spark_kafka_group.errors import TopicNotFoundError
    from spark_kafka_group.source.positions import DeletedTopics

    moved, gone = TopicPartition("kept", 0), TopicPartition("deleted", 0)
    existing = {"kept": 1}  # 'kept' still exists: its partition moved to another member
    DeletedTopics().check([moved], existing=existing, fail_on_data_loss=True)
    with pytest.raises(TopicNotFoundError, match=r"deleted-0 no longer exist.*'deleted'"):
        DeletedTopics().check([moved, gone], existing=existing, fail_on_data_loss=True)
    lenient = DeletedTopics()
    with caplog.at_level(logging.WARNING):
        lenient.check([moved, gone], existing=existing, fail_on_data_loss=False)
        lenient.check([gone], existing=existing, fail_on_data_loss=False)
    assert caplog.text.count("deleted-0") == 1 and "failOnDataLoss=false" in caplog.text
