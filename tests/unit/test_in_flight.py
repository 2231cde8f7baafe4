"""Batches in flight (:mod:`spark_kafka_group.member.in_flight`)."""

from __future__ import annotations

from spark_kafka_group.group.metadata import OffsetAndMetadata, TopicPartition
from spark_kafka_group.member.in_flight import BatchesInFlight, PlannedBatch

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


def committed(**by_partition: int) -> dict[TopicPartition, OffsetAndMetadata]:
    """``committed(p0=5)``: offset 5 committed for partition 0 of topic ``t``."""
    return {
        TopicPartition("t", int(name[1:])): OffsetAndMetadata(offset)
        for name, offset in by_partition.items()
    }


def test_a_partition_no_batch_read_is_finished() -> None:
    assert BatchesInFlight().finished(A, committed())


def test_the_last_batch_is_finished_once_a_commit_is_exactly_at_its_end() -> None:
    in_flight = BatchesInFlight().begin(PlannedBatch({A: 10, B: 7}, 3, "m"))
    assert not in_flight.finished(A, committed())
    assert not in_flight.finished(A, committed(p0=9))
    assert in_flight.finished(A, committed(p0=10))
    assert in_flight.uncommitted(committed(p0=10)) == {B: 7}
    assert in_flight.uncommitted(committed(p0=10, p1=7)) == {}


def test_a_higher_commit_is_not_the_last_batchs_after_a_reset_by_policy() -> None:
    # The batch restarted the partition below an older commit (failOnDataLoss=false): that
    # older, higher commit does not finish it.
    in_flight = BatchesInFlight().begin(PlannedBatch({A: 10}, 3, "m"))
    assert not in_flight.finished(A, committed(p0=500))
    assert in_flight.uncommitted(committed(p0=500)) == {A: 10}


def test_a_later_batch_moves_the_end_and_becomes_the_last() -> None:
    first = PlannedBatch({A: 10, B: 7}, 3, "m")
    second = PlannedBatch({A: 20}, 4, "m")
    in_flight = BatchesInFlight().begin(first).begin(second)
    assert in_flight.ends == {A: 20, B: 7}
    assert in_flight.last == second
    assert in_flight.reads_last(A) and not in_flight.reads_last(B)
    assert not in_flight.finished(A, committed(p0=10))
    assert in_flight.finished(B, committed(p1=7))


def test_retain_forgets_partitions_no_longer_held_but_not_the_last_batch() -> None:
    batch = PlannedBatch({A: 10, B: 7}, 3, "m")
    in_flight = BatchesInFlight().begin(batch).retain([A])
    assert in_flight.ends == {A: 10}
    assert in_flight.finished(B, committed())  # no longer the member's to wait for
    assert in_flight.last == batch


def test_nothing_reads_the_last_batch_before_the_first() -> None:
    assert not BatchesInFlight().reads_last(A)
