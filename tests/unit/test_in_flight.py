"""Batches in flight and the commit filter (:mod:`spark_kafka_group.member.in_flight`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from spark_kafka_group.group.metadata import OffsetAndMetadata, TopicPartition
from spark_kafka_group.member.in_flight import BatchesInFlight, PlannedBatch, offsets_to_write

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


def test_in_order_writes_every_change_backwards_included() -> None:
    offsets = {A: 5, B: 7}
    assert offsets_to_write(offsets, committed(), in_order=True) == offsets
    assert offsets_to_write(offsets, committed(p0=5, p1=7), in_order=True) == {}
    assert offsets_to_write(offsets, committed(p0=9, p1=3), in_order=True) == offsets


def test_a_late_commit_only_moves_forward() -> None:
    offsets = {A: 5, B: 7}
    assert offsets_to_write(offsets, committed(), in_order=False) == offsets
    assert offsets_to_write(offsets, committed(p0=9, p1=3), in_order=False) == {B: 7}
    assert offsets_to_write(offsets, committed(p0=5, p1=7), in_order=False) == {}


def test_a_late_commit_of_a_batch_reset_below_the_committed_offset_moves_it_back() -> None:
    # The batch started partition 0 at 2, below the committed 9 (a reset by policy): its end
    # is written; partition 1 continued from the previous batch (no start): forward only.
    got = offsets_to_write({A: 5, B: 1}, committed(p0=9, p1=3), in_order=False, starts={A: 2, B: 3})
    assert got == {A: 5}
    # Started at (not below) the committed offset: an ordinary late commit.
    assert offsets_to_write({A: 5}, committed(p0=9), in_order=False, starts={A: 9}) == {}
    # Even a reset batch is not written when it changes nothing.
    assert offsets_to_write({A: 9}, committed(p0=9), in_order=False, starts={A: 2}) == {}


offsets_st = st.dictionaries(st.sampled_from([A, B]), st.integers(0, 50))


@given(offsets=offsets_st, current=offsets_st, starts=offsets_st, in_order=st.booleans())
def test_what_is_written_changes_the_committed_offset(
    offsets: dict, current: dict, starts: dict, in_order: bool
) -> None:
    group = {TopicPartition(*tp): OffsetAndMetadata(o) for tp, o in current.items()}
    written = offsets_to_write(offsets, group, in_order=in_order, starts=starts)
    assert written.items() <= offsets.items()
    for tp, offset in written.items():
        assert current.get(tp) != offset
        if not in_order and tp in current and offset < current[tp]:
            assert starts[tp] < current[tp]  # backwards only for a batch reset below it
    if in_order:
        assert written == {tp: o for tp, o in offsets.items() if current.get(tp) != o}
