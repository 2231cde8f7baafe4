"""The pure transitions of a member's pending commits (:mod:`spark_kafka_group.group.pending`),
property-tested: random sequences of recorded batches, writes, listener objects, direct
writes landing and settles, against what each transition promises."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from spark_kafka_group.group.metadata import OffsetAndMetadata, TopicPartition
from spark_kafka_group.group.pending import PendingCommits
from spark_kafka_group.group.types import LISTENER, CommitObject, RecordedOffset

TPS = [TopicPartition("t", p) for p in range(3)]
GEN = 3
HELD_SINCE = dict.fromkeys(TPS, 2)

offsets_st = st.dictionaries(st.sampled_from(TPS), st.integers(0, 50), max_size=3)
committed_st = st.dictionaries(
    st.sampled_from(TPS), st.builds(OffsetAndMetadata, st.integers(0, 50)), max_size=3
)


def record(
    pending: PendingCommits,
    offsets: dict[TopicPartition, int],
    committed: dict[TopicPartition, OffsetAndMetadata],
    *,
    revoking: frozenset[TopicPartition] = frozenset(),
    member: str = "m",
    batch_generation: int = GEN,
) -> PendingCommits:
    return pending.record(
        "m",
        offsets,
        batch_generation=batch_generation,
        batch_member=member,
        release=(),
        held_since=HELD_SINCE,
        revoking=revoking,
        generation=GEN,
        committed=committed,
        newest={},
    )


@given(batches=st.lists(offsets_st, max_size=6), committed=committed_st)
def test_recorded_commits_are_the_newest_of_each_partition_and_the_object_holds_them(
    batches: list[dict[TopicPartition, int]], committed: dict[TopicPartition, OffsetAndMetadata]
) -> None:
    pending = PendingCommits()
    newest: dict[TopicPartition, int] = {}
    for batch in batches:
        pending = record(pending, batch, committed)
        newest.update(batch)
    assert {tp: r.offset for tp, r in pending.recorded.items()} == newest
    assert all(r.generation == GEN for r in pending.recorded.values())
    written, obj = pending.write("m", folded_seq=-1)
    if not newest:
        assert obj is None and written == pending
        return
    assert obj is not None and obj.seq == 1 and dict(obj.offsets) == dict(pending.recorded)
    assert obj.rewinds <= set(obj.offsets)
    # Nothing new since: no second object, and the value is unchanged.
    assert written.write("m", folded_seq=-1) == (written, None)
    assert written.seq == 1


@given(first=st.integers(10, 50), second=st.integers(0, 50))
def test_a_lower_offset_than_its_own_commit_not_folded_is_marked_as_a_rewind(
    first: int, second: int
) -> None:
    tp = TPS[0]
    pending, obj = record(PendingCommits(), {tp: first}, {}).write("m", -1)
    assert obj is not None and not obj.rewinds  # the log holds nothing: no rewind
    pending = record(pending, {tp: second}, {})
    pending, obj = pending.write("m", -1)
    if second == first:
        assert obj is None  # nothing new
        return
    assert obj is not None and (tp in obj.rewinds) == (second < first)
    if second < first:
        # The mark stays on the batches that continue the rewind until its object is folded.
        pending, obj = record(pending, {tp: second + 1}, {}).write("m", -1)
        assert obj is not None and obj.rewinds == {tp} and obj.seq == 3
        pending, obj = record(pending, {tp: second + 2}, {}).write("m", folded_seq=3)
        assert obj is not None and not obj.rewinds


@given(offsets=offsets_st, committed=committed_st)
def test_only_batches_of_the_member_or_a_replaced_incarnation_held_since_their_generation(
    offsets: dict[TopicPartition, int], committed: dict[TopicPartition, OffsetAndMetadata]
) -> None:
    assert not record(PendingCommits(), offsets, committed, member="other").recorded
    replaced = PendingCommits().replace("other")
    assert {tp: r.offset for tp, r in record(replaced, offsets, committed).recorded.items()} == (
        offsets
    )
    # A batch planned before the partitions were held (generation 1 < held since 2): fenced.
    assert not record(PendingCommits(), offsets, committed, batch_generation=1).recorded


@given(offsets=offsets_st, committed=committed_st, held=st.sets(st.sampled_from(TPS)))
def test_settle_keeps_only_held_partitions_the_log_does_not_hold_yet(
    offsets: dict[TopicPartition, int],
    committed: dict[TopicPartition, OffsetAndMetadata],
    held: set[TopicPartition],
) -> None:
    pending = record(PendingCommits(), offsets, {})
    settled = pending.settle(frozenset(held), committed, {})
    for tp, r in settled.recorded.items():
        assert tp in held and (tp not in committed or committed[tp].offset != r.offset)
    for tp in set(offsets) - set(settled.recorded):  # dropped: not held, or in the log
        assert tp not in held or (tp in committed and committed[tp].offset == offsets[tp])
    assert set(settled.rewinds) <= set(settled.recorded)


@given(offsets=offsets_st, again=offsets_st)
def test_direct_writes_wait_until_exactly_they_land(
    offsets: dict[TopicPartition, int], again: dict[TopicPartition, int]
) -> None:
    revoking = frozenset(TPS)
    pending = record(PendingCommits(), offsets, {}, revoking=revoking)
    assert {tp: r.offset for tp, r in pending.direct.items()} == offsets  # revoked: direct
    taken = dict(pending.direct)
    newer = record(pending, again, {}, revoking=revoking)  # recorded while the step appends
    landed = newer.landed(taken, frozenset())
    assert {tp: r.offset for tp, r in landed.direct.items()} == {
        tp: o for tp, o in again.items() if taken.get(tp) != RecordedOffset(o, GEN)
    }
    assert newer.lost().direct == {}
    without_objects = record(PendingCommits(objects=False), offsets, {})
    assert not without_objects.recorded and len(without_objects.direct) == len(offsets)
    assert without_objects.write("m", -1)[1] is None


@given(mine=offsets_st, listeners=offsets_st, committed=committed_st)
def test_the_listeners_object_only_moves_recorded_commits_forward(
    mine: dict[TopicPartition, int],
    listeners: dict[TopicPartition, int],
    committed: dict[TopicPartition, OffsetAndMetadata],
) -> None:
    pending = record(PendingCommits(), mine, {})
    obj = CommitObject(
        "m", 7, {tp: RecordedOffset(o, GEN) for tp, o in listeners.items()}, writer=LISTENER
    )
    taken = pending.take_listener(obj, HELD_SINCE, committed)
    assert taken.listener_taken == 7
    for tp, r in taken.recorded.items():
        before = pending.recorded.get(tp)
        assert before is None or r.offset >= before.offset
        if tp in listeners and r.offset == listeners[tp] and before != r:
            assert tp not in committed or listeners[tp] > committed[tp].offset
    over = taken.over(committed)
    assert all(over[tp].offset == r.offset for tp, r in taken.recorded.items())
