"""The progress listener's commits go into a commit object of its own for the member
(``<member>~listener``), never an append: the leader's fold brings them into the log with the
members' objects, and the member takes them in itself where the log must hold the offset now
(a revoked partition's release, its LEAVE). A reset by policy still goes to the log directly.

Production members over the in-memory log, leases and commit objects, stepped by hand on an
injected clock (the helpers of ``test_commit_objects``).
"""

from __future__ import annotations

import pytest

from spark_kafka_group.group import TopicPartition
from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.types import LISTENER, CommitObject, RecordedOffset
from spark_kafka_group.listener.progress import commit_progress
from spark_kafka_group.listener.writes import commit_batch_for_member
from spark_kafka_group.member.folder import COMMIT_FOLD_INTERVAL_MS
from spark_kafka_group.member.log_client import GroupLogClient
from spark_kafka_group.ops.leave import leave_for_member
from spark_kafka_group.store.commit_objects import decode, encode, key_of, object_key, owner
from spark_kafka_group.testing.simulation import SimMember
from tests.unit.test_commit_objects import Group, commit


def listener_client(g: Group) -> GroupLogClient:
    return GroupLogClient("memory", "g", log=g.log, clock=g.clock, commit_objects=g.objects)


def listener_commit(
    g: Group,
    m: SimMember,
    offsets: dict[TopicPartition, int],
    *,
    batch_id: int,
    generation: int | None = None,
    starts: dict[TopicPartition, int] | None = None,
) -> int:
    """What ``GroupProgressListener`` does when the batch ``batch_id`` completes (its own client
    of the log, in the query's driver)."""
    gen = m.member.holdings.generation if generation is None else generation
    return commit_batch_for_member(
        "memory", "g", m.member_id, gen, offsets, batch_id=batch_id, starts=starts,
        client=listener_client(g),
    )  # fmt: skip


def planned(m: SimMember, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """The member hands a batch reading ``offsets``' partitions up to there to Spark."""
    m.member.begin_batch(offsets, batch_generation=m.member.holdings.generation)
    return offsets


def commits_before(g: Group, kind: str, member_id: str) -> dict[TopicPartition, int]:
    """The COMMIT records of ``member_id`` before its (only) ``kind`` record, newest last."""
    [mark] = [r for r in g.records(kind) if r.member_id == member_id]
    return {
        TopicPartition(r.topic or "", r.partition or 0): r.offset or 0
        for r in g.log.records[: g.log.records.index(mark)]
        if r.kind == RecordKind.COMMIT and r.member_id == member_id
    }


def test_the_key_names_the_writer_and_maps_back_to_the_member() -> None:
    obj = CommitObject("m-1", 4, {TopicPartition("t", 0): RecordedOffset(9, 2)}, writer=LISTENER)
    assert key_of(obj) == object_key("m-1", LISTENER) == "m-1~listener"
    assert owner(key_of(obj)) == owner("m-1") == "m-1"
    assert decode(encode(obj)) == obj
    # The member's own objects keep the format they had.
    assert b"writer" not in encode(CommitObject("m-1", 1))


def test_the_listeners_commit_is_an_object_and_the_log_gets_no_append() -> None:
    g = Group()
    _, b = g.add("a"), g.add("b")
    g.settle()
    ends = planned(b, {tp: 9 for tp in b.member.holdings.held})
    version = g.log.version
    assert listener_commit(g, b, ends, batch_id=3) == len(ends)
    assert g.log.version == version  # no append
    assert g.objects.list()["b~listener"] == 4  # numbered by the batch: batch id + 1


def test_the_listener_has_no_other_way_into_the_log() -> None:
    """Given a client without commit objects, or a progress without a batch id to number its
    object by, the listener's commit says so and writes nothing (it never appends)."""
    g = Group()
    _, b = g.add("a"), g.add("b")
    g.settle()
    ends = planned(b, {tp: 9 for tp in b.member.holdings.held})
    version = g.log.version
    bare = GroupLogClient("memory", "g", log=g.log, clock=g.clock)
    with pytest.raises(ValueError, match="needs the group's commit objects"):
        commit_batch_for_member("memory", "g", "b", 1, ends, batch_id=0, client=bare)
    offset = {"group": "g", "store": "memory", "generation": 1, "member": "b", "starts": {}}
    progress = {"sources": [{"endOffset": {**offset, "offsets": {"t": {"0": 9}}}}]}
    with pytest.raises(ValueError, match="batchId None"):
        commit_progress(progress, clients={("memory", "g"): listener_client(g)})
    assert g.log.version == version
    assert g.objects.list().get("b~listener") is None


def test_the_leaders_fold_brings_the_listeners_commit_into_the_log() -> None:
    g = Group()
    a, b = g.add("a"), g.add("b")
    g.settle()
    ends = planned(b, {tp: 9 for tp in b.member.holdings.held})
    listener_commit(g, b, ends, batch_id=0)
    appends = g.log.appends
    for _ in range(3):
        g.step([a, b], ms=COMMIT_FOLD_INTERVAL_MS)
    assert {tp: o for tp, o in g.committed().items() if tp in ends} == ends
    assert g.log.appends - appends == 1  # one fold
    assert {r.member_id for r in g.records(RecordKind.COMMIT)} == {"b"}  # in the member's name


def test_a_listener_object_of_a_partition_that_moved_since_its_batch_is_never_applied() -> None:
    """A zombie: the batch was planned in a generation before its member acquired the
    partition again (or it moved away since): the fold checks the owner's ``held_since``."""
    g = Group()
    a, b = g.add("a"), g.add("b")
    g.settle()
    tp = sorted(b.member.holdings.held)[0]
    since = b.coord.group.members["b"].held_since[tp]
    assert listener_commit(g, b, {tp: 99}, batch_id=0, generation=since - 1) == 0
    # Written by a listener that did not check (another release): the fold still refuses it.
    g.objects.put(CommitObject("b", 5, {tp: RecordedOffset(99, since - 1)}, writer=LISTENER))
    moved = sorted(a.member.holdings.held)[0]  # and one for a partition b never held
    g.objects.put(CommitObject("b", 6, {moved: RecordedOffset(77, since)}, writer=LISTENER))
    for _ in range(4):
        g.step([a, b], ms=COMMIT_FOLD_INTERVAL_MS)
    assert g.committed().get(tp) != 99
    assert g.committed().get(moved) != 77
    assert g.records(RecordKind.COMMIT) == []


def test_a_closing_member_waits_for_the_listeners_object_not_for_the_grace_period() -> None:
    g = Group()
    _, b = g.add("a"), g.add("b")
    g.settle()
    last = planned(b, {tp: 9 for tp in b.member.holdings.held})
    assert b.member.loop._uncommitted() == frozenset(last)  # the batch is still running
    listener_commit(g, b, last, batch_id=1)
    assert b.member.loop._uncommitted() == frozenset()  # counts as committed: the LEAVE writes it


def test_a_member_leaving_writes_the_listeners_newer_offsets_before_its_leave() -> None:
    """``leave()`` itself (not only ``close()``, which waits for them first) takes them in."""
    g = Group()
    _, b = g.add("a"), g.add("b")
    g.settle()
    held = b.member.holdings.held
    commit(b, {tp: 5 for tp in held})
    last = planned(b, {tp: 9 for tp in held})
    listener_commit(g, b, last, batch_id=1)
    b.member.loop.leave()
    assert commits_before(g, RecordKind.LEAVE, "b") == last
    assert g.objects.list() == {}  # both of its objects are gone with it


def test_the_listeners_leave_folds_its_object_first() -> None:
    """``leave_group(query)`` leaves for the member (``leave_for_member``): the listener's last
    object lands before the LEAVE."""
    g = Group()
    _, b = g.add("a"), g.add("b")
    g.settle()
    last = planned(b, {tp: 9 for tp in b.member.holdings.held})
    listener_commit(g, b, last, batch_id=1)
    g.members.remove(b)
    assert leave_for_member("memory", "g", "b", client=listener_client(g))
    assert commits_before(g, RecordKind.LEAVE, "b") == last
    assert g.objects.list() == {}


def test_a_revoked_partition_is_released_once_the_listeners_object_covers_its_last_batch() -> None:
    g = Group()
    a = g.add("a")
    g.settle()
    ends = planned(a, {TopicPartition("t", p): 7 for p in range(4)})
    g.add("b")
    revoking = g.until_revoking(a)
    for _ in range(5):
        g.step([a], ms=10)
    assert not [r for r in g.records(RecordKind.REVOKE) if r.member_id == "a"]  # its batch runs
    listener_commit(g, a, ends, batch_id=0)  # the batch completed
    g.step([a], ms=10)  # the background step reads the object: commit and release
    released = commits_before(g, RecordKind.REVOKE, "a")
    assert {tp: released.get(tp) for tp in revoking} == {tp: 7 for tp in revoking}
    g.settle()
    assert {tp: g.committed()[tp] for tp in revoking} == {tp: 7 for tp in revoking}


def test_an_expiring_members_listener_object_is_folded_in_the_append_of_its_expiry() -> None:
    """The crashed member led the group (nobody else folds): whoever expires it folds its
    listener's object too, in the same append, before the EXPIRE."""
    g = Group()
    b, a = g.add("b"), g.add("a")
    g.settle()
    assert a.coord.group.leader == "b"
    g.clock.advance(COMMIT_FOLD_INTERVAL_MS)
    g.step(ms=10)  # b has just folded: the next fold is an interval away
    theirs = planned(b, {tp: 42 for tp in b.member.holdings.held})
    g.members.remove(b)  # b's process is gone; its query's last batch had completed
    listener_commit(g, b, theirs, batch_id=8)
    for _ in range(200):
        g.step([a], ms=500)
        if "b" not in a.coord.group.members:
            break
    assert commits_before(g, RecordKind.EXPIRE, "b") == theirs
    [(version, _)] = [(v, r) for v, r in g.log.read_slice().records if r.kind == RecordKind.EXPIRE]
    same_append = g.log.read_slice(after_version=version - 1).records
    assert {r.offset for v, r in same_append if v == version and r.kind == RecordKind.COMMIT} == {
        42
    }
    assert g.objects.list() == {}  # both of its objects are gone with it


def test_a_rewind_by_policy_is_marked_in_the_listeners_object_and_folded() -> None:
    """A batch that started below the committed offset (``failOnDataLoss=false`` after the topic
    was recreated) lowers it: the listener marks it as a rewind in its object (no append), and
    the fold writes it although it otherwise only moves forward."""
    g = Group()
    a = g.add("a")
    g.settle()
    held = a.member.holdings.held
    commit(a, {tp: 10 for tp in held})
    g.step([a], ms=COMMIT_FOLD_INTERVAL_MS)
    g.step([a], ms=COMMIT_FOLD_INTERVAL_MS)
    assert g.committed() == {tp: 10 for tp in held}
    appends = g.log.appends
    rewound = planned(a, {tp: 3 for tp in held})
    listener_commit(g, a, rewound, batch_id=5, starts={tp: 0 for tp in held})
    assert g.log.appends == appends  # the listener never appends
    g.step([a], ms=COMMIT_FOLD_INTERVAL_MS)
    assert g.log.appends - appends == 1  # the leader's fold
    assert g.committed() == rewound
    for _ in range(3):
        g.step([a], ms=COMMIT_FOLD_INTERVAL_MS)
    assert g.committed() == rewound  # no fold of an older object moves it back up
