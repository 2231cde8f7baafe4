"""The offsets rules of the protocol core (:mod:`spark_kafka_group.group.offsets`): the fence,
forward or back by source, and the handlers every writer of committed offsets goes through."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from spark_kafka_group.group import GroupConfig, GroupCoordinator, JoinRequest, RecordKind
from spark_kafka_group.group.metadata import OffsetAndMetadata, TopicPartition
from spark_kafka_group.group.offsets import (
    Source,
    commit_batch,
    fence,
    fold_commit_objects,
    listener_commit,
    listener_offsets_to_take,
    offsets_to_write,
    reset,
    rewinds,
)
from spark_kafka_group.group.types import LISTENER, CommitObject, RecordedOffset
from spark_kafka_group.store.commit_objects import key_of

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


def committed(**by_partition: int) -> dict[TopicPartition, OffsetAndMetadata]:
    """``committed(p0=5)``: offset 5 committed for partition 0 of topic ``t``."""
    return {
        TopicPartition("t", int(name[1:])): OffsetAndMetadata(offset)
        for name, offset in by_partition.items()
    }


def test_the_members_own_commits_write_every_change_backwards_included() -> None:
    offsets = {A: 5, B: 7}
    assert offsets_to_write(offsets, committed(), source=Source.MEMBER) == offsets
    assert offsets_to_write(offsets, committed(p0=5, p1=7), source=Source.MEMBER) == {}
    assert offsets_to_write(offsets, committed(p0=9, p1=3), source=Source.MEMBER) == offsets


def test_the_members_older_commit_never_undoes_its_listeners_commit_of_a_newer_batch() -> None:
    # The member's commit of the batch ending at 5 is written after its listener committed
    # the next batch (ending at 9, its newest): it would move the offset back.
    got = offsets_to_write({A: 5}, committed(p0=9), source=Source.MEMBER, newest={A: 9})
    assert got == {}
    # Its newest batch ends at 3 (it was reset below 9 by policy): 5 is news.
    got = offsets_to_write({A: 5}, committed(p0=9), source=Source.MEMBER, newest={A: 3})
    assert got == {A: 5}


def test_a_late_commit_only_moves_forward() -> None:
    offsets = {A: 5, B: 7}
    for source in (Source.LISTENER, Source.FOLD):
        assert offsets_to_write(offsets, committed(), source=source) == offsets
        assert offsets_to_write(offsets, committed(p0=9, p1=3), source=source) == {B: 7}
        assert offsets_to_write(offsets, committed(p0=5, p1=7), source=source) == {}


def test_a_listener_commit_of_a_batch_reset_below_the_committed_offset_moves_it_back() -> None:
    # The batch started partition 0 at 2, below the committed 9 (a reset by policy): its end
    # is written; partition 1 continued from the previous batch (no start): forward only.
    got = offsets_to_write(
        {A: 5, B: 1}, committed(p0=9, p1=3), source=Source.LISTENER, starts={A: 2, B: 3}
    )
    assert got == {A: 5}
    # Started at (not below) the committed offset: an ordinary late commit.
    late = offsets_to_write({A: 5}, committed(p0=9), source=Source.LISTENER, starts={A: 9})
    assert late == {}
    # Even a reset batch is not written when it changes nothing.
    same = offsets_to_write({A: 9}, committed(p0=9), source=Source.LISTENER, starts={A: 2})
    assert same == {}
    # A fold never moves back, whatever the batch started at: its writer wrote that directly.
    assert offsets_to_write({A: 5}, committed(p0=9), source=Source.FOLD, starts={A: 2}) == {}


def test_an_operator_reset_sets_every_offset_it_names() -> None:
    assert offsets_to_write({A: 1, B: 7}, committed(p0=9, p1=7), source=Source.ADMIN) == {
        A: 1,
        B: 7,
    }


offsets_st = st.dictionaries(st.sampled_from([A, B]), st.integers(0, 50))


@given(
    offsets=offsets_st,
    current=offsets_st,
    starts=offsets_st,
    source=st.sampled_from([Source.MEMBER, Source.LISTENER, Source.FOLD]),
)
def test_what_is_written_changes_the_committed_offset(
    offsets: dict, current: dict, starts: dict, source: Source
) -> None:
    group = {TopicPartition(*tp): OffsetAndMetadata(o) for tp, o in current.items()}
    written = offsets_to_write(offsets, group, source=source, starts=starts)
    assert written.items() <= offsets.items()
    for tp, offset in written.items():
        assert current.get(tp) != offset
        if source is not Source.MEMBER and tp in current and offset < current[tp]:
            # backwards only for the listener's batch reset below it
            assert source is Source.LISTENER and starts[tp] < current[tp]
    if source is Source.MEMBER:
        assert written == {tp: o for tp, o in offsets.items() if current.get(tp) != o}
    assert rewinds(written, group) == {
        tp: o for tp, o in written.items() if tp in current and o < current[tp]
    }


def test_the_fence_keeps_only_partitions_held_since_the_batchs_generation() -> None:
    held_since = {A: 2, B: 4}
    assert fence(held_since, {A: 10, B: 20}, 3) == {A: 10}  # B came (back) in generation 4
    assert fence(held_since, {A: 10, B: 20}, 4) == {A: 10, B: 20}
    assert fence(held_since, {TopicPartition("t", 9): 1}, 9) == {}  # never held


# ---------------------------------------------------------------------------------- handlers


def stable_group() -> tuple[GroupCoordinator, TopicPartition, TopicPartition]:
    """Members a and b in one stable generation of a cooperative group, 2 partitions each."""
    coord = GroupCoordinator("g", GroupConfig(initial_rebalance_delay_ms=0))

    def join(member: str) -> None:
        request = JoinRequest(member, ("cooperative-sticky",), topics=("t",))
        records, _ = coord.join(request, 0)
        coord.apply_all(records)

    for member in ("a", "b", "a", "b"):
        if coord.member_view(member).needs_join:
            join(member)
    leader = coord.group.leader
    assert leader is not None
    records, _ = coord.sync(leader, coord.group.generation, 0, metadata={"t": 4})
    coord.apply_all(records)
    a, b = coord.group.members["a"], coord.group.members["b"]
    assert a.assignment and b.assignment and not a.revoking and not b.revoking
    return coord, min(a.assignment), min(b.assignment)


def test_commit_batch_is_fenced_and_filtered_by_its_source() -> None:
    coord, mine, theirs = stable_group()
    gen = coord.group.generation
    offsets = {mine: RecordedOffset(10, gen), theirs: RecordedOffset(10, gen)}
    work = coord.fork()
    records, response = commit_batch(work.group, "a", offsets, 1, source=Source.MEMBER)
    assert response is not None and response.accepted == {mine}  # the other's is fenced
    assert [r.kind for r in records] == [RecordKind.COMMIT]
    assert work.group == coord.group  # a handler applies nothing: its caller does
    work.apply_all(records)
    # The same offset again writes nothing; a lower one is a listener's late commit: nothing.
    assert commit_batch(work.group, "a", offsets, 2, source=Source.MEMBER) == ([], None)
    back = {mine: RecordedOffset(4, gen)}
    assert commit_batch(work.group, "a", back, 2, source=Source.LISTENER) == ([], None)
    # The member's own lower commit is a reset by policy: written.
    records, _ = commit_batch(work.group, "a", back, 3, source=Source.MEMBER)
    work.apply_all(records)
    assert work.group.offsets[mine].offset == 4 and len(records) == 1
    # A batch from before the member held the partition (generation 0): never applied.
    stale = {mine: RecordedOffset(50, gen - 1)}
    assert commit_batch(work.group, "a", stale, 4, source=Source.FOLD) == ([], None)
    # Not a member: nothing.
    assert commit_batch(work.group, "zombie", offsets, 5, source=Source.MEMBER) == ([], None)


def test_a_fold_applies_only_what_the_member_may_still_commit_and_only_forward() -> None:
    coord, mine, _ = stable_group()
    gen = coord.group.generation
    work = coord.fork()
    objects = [
        CommitObject("a", 1, {mine: RecordedOffset(30, gen)}),
        CommitObject("a", 7, {mine: RecordedOffset(20, gen)}, writer=LISTENER),
        CommitObject("ghost", 1, {mine: RecordedOffset(99, gen)}),
    ]
    records, done = fold_commit_objects(work.group, {key_of(o): o for o in objects}, 1)
    work.apply_all(records)
    assert work.group.offsets[mine].offset == 30  # the listener's lower one never undoes it
    assert {r.member_id for r in records} == {"a"}
    assert done == {"a", "a~listener", "ghost"}


def test_an_operator_reset_is_refused_while_the_group_has_members() -> None:
    coord, mine, _ = stable_group()
    records, response = reset(coord.group, {mine: 0}, 1)
    assert records == [] and response.accepted == set()
    empty = GroupCoordinator("g")
    work = empty.fork()
    records, response = reset(work.group, {mine: 0}, 1)
    work.apply_all(records)
    assert response.accepted == {mine} and work.group.offsets[mine].offset == 0


def test_the_listeners_commit_is_an_object_with_its_rewinds_marked() -> None:
    coord, mine, theirs = stable_group()
    gen = coord.group.generation
    work = coord.fork()
    work.apply_all(
        commit_batch(work.group, "a", {mine: RecordedOffset(40, gen)}, 1, source=Source.MEMBER)[0]
    )
    # A batch of a that started `mine` at 5 (below the committed 40) and read up to 12.
    commit = listener_commit(
        work.group, "a", gen, {mine: 12, theirs: 8}, batch_id=6, starts={mine: 5}
    )
    assert commit is not None
    assert commit.obj == CommitObject(
        "a", 7, {mine: RecordedOffset(12, gen)}, writer=LISTENER, rewinds=frozenset({mine})
    )
    assert commit.moved == 1
    # A late one (no reset) moves nothing: no object.
    assert listener_commit(work.group, "a", gen, {mine: 12}, batch_id=7) is None
    assert listener_commit(work.group, "gone", gen, {mine: 12}, batch_id=7) is None
    # The next batch continues the rewind, which is not folded yet: it carries the mark on.
    carried = listener_commit(work.group, "a", gen, {mine: 20}, batch_id=7, previous=commit.obj)
    assert carried is not None and carried.obj.rewinds == {mine}
    # The fold writes the marked rewind, and never an older object of the same writer after.
    records, _ = fold_commit_objects(work.group, {"a~listener": carried.obj}, 2)
    work.apply_all(records)
    assert work.group.offsets[mine].offset == 20
    assert work.group.members["a"].folded_seq == {LISTENER: 8}
    stale = CommitObject("a", 6, {mine: RecordedOffset(40, gen)}, writer=LISTENER)
    assert fold_commit_objects(work.group, {"a~listener": stale}, 3) == ([], {"a~listener"})


def test_a_late_progress_event_of_a_batch_before_the_listeners_object_writes_nothing() -> None:
    coord, mine, _ = stable_group()
    gen = coord.group.generation
    work = coord.fork()
    work.apply_all(
        commit_batch(work.group, "a", {mine: RecordedOffset(40, gen)}, 1, source=Source.MEMBER)[0]
    )
    # Batch 6 started `mine` at 5 (below the committed 40): a rewind, not folded yet.
    rewind = listener_commit(work.group, "a", gen, {mine: 12}, batch_id=6, starts={mine: 5})
    assert rewind is not None and rewind.obj.rewinds == {mine}
    # Batch 3's event comes late, its end above the rewind's: it neither replaces the object
    # holding the rewind nor counts as its continuation (that would move 40 back to 30).
    late = listener_commit(work.group, "a", gen, {mine: 30}, batch_id=3, previous=rewind.obj)
    assert late is None
    # The same batch again (the listener's event and a leave's last progress) is no late one.
    again = listener_commit(
        work.group, "a", gen, {mine: 12}, batch_id=6, starts={mine: 5}, previous=rewind.obj
    )
    assert again is not None and again.obj == rewind.obj


def test_a_member_takes_only_forward_offsets_from_its_listeners_object() -> None:
    obj = CommitObject(
        "a",
        3,
        {
            A: RecordedOffset(10, 2),
            B: RecordedOffset(10, 2),
            TopicPartition("t", 2): RecordedOffset(9, 1),
        },
        writer=LISTENER,
    )
    held_since = {A: 2, B: 1, TopicPartition("t", 2): 2}  # t-2 came back in generation 2
    taken = listener_offsets_to_take(
        held_since, obj, committed(p0=8, p1=11), {A: RecordedOffset(9, 2)}
    )
    assert taken == {A: RecordedOffset(10, 2)}  # B: the log is ahead; t-2: fenced
