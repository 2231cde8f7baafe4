"""When a member gives up a partition being revoked: as soon as its last batch is committed.

Real group logs (delta-rs, local directory), real :class:`GroupMember` s and the commit path of
the progress listener (:func:`spark_kafka_group.listener.writes.commit_batch_for_member`: its
own commit object for the member, which the member's background step reads while it revokes a
partition with a batch in flight); no Spark, no broker (the members' topic metadata comes from
a function).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_kafka_group.group.assignors import load_assignor
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.listener.writes import commit_batch_for_member
from spark_kafka_group.member import GroupMember, SubscriptionSpec
from spark_kafka_group.options import GroupSettings

TOPIC = "t"
PARTITIONS = [TopicPartition(TOPIC, p) for p in range(4)]


def settings(store: str, strategy: str) -> GroupSettings:
    """``strategy``: an assignmentStrategy list of built-in names."""
    return GroupSettings(
        group_id="g",
        store=store,
        heartbeat_interval_ms=500,
        session_timeout_ms=30_000,
        rebalance_timeout_ms=30_000,
        assignment_strategy=tuple(load_assignor(e) for e in strategy.split(",")),
        initial_rebalance_delay_ms=0,
    )


@pytest.fixture
def members(tmp_path: Path) -> Iterator[list[GroupMember]]:
    started: list[GroupMember] = []
    yield started
    for m in started:
        m.close()


def start(members: list[GroupMember], store: str, strategy: str) -> GroupMember:
    member = GroupMember(
        settings(store, strategy),
        subscription=SubscriptionSpec(topics=(TOPIC,)),
        topic_counts=lambda: {TOPIC: len(PARTITIONS)},
    )
    members.append(member)
    member.start()  # the newcomer's partitions may come later, in these tests
    return member


def poll_until(member: GroupMember, ready, timeout_s: float = 10.0):
    deadline = time.monotonic() + timeout_s
    assignment = member.current_holdings()
    while not ready(assignment):
        assert time.monotonic() < deadline, f"no such assignment: {assignment}"
        time.sleep(0.05)
        assignment = member.current_holdings()
    return assignment


def test_revoked_partition_is_released_once_the_listener_commits_its_last_batch(
    tmp_path: Path, members: list[GroupMember]
) -> None:
    store = str(tmp_path / "groups")
    a = start(members, store, "cooperative-sticky")
    first = poll_until(a, lambda x: x.held == frozenset(PARTITIONS))
    ends = dict.fromkeys(PARTITIONS, 10)
    assert a.begin_batch(ends, batch_generation=first.generation) == frozenset(PARTITIONS)

    b = start(members, store, "cooperative-sticky")
    revoking = poll_until(a, lambda x: bool(x.revoking)).revoking
    # The batch is still running: a keeps the partitions however often it steps.
    for _ in range(5):
        time.sleep(0.1)
        assert a.current_holdings().revoking == revoking
    assert not b.current_holdings().held

    # The batch completes; the progress listener commits it for a. The generation moved on
    # since the batch was planned, but a held the partitions all along: accepted.
    version = a.client.table.latest_version()
    committed = commit_batch_for_member(store, "g", a.member_id, first.generation, ends, batch_id=0)
    assert committed == len(PARTITIONS)
    assert a.client.table.latest_version() == version  # in the listener's object: no append
    # a's background step reads that object and releases them with that offset: b gets them
    # without a's reader being called again.
    after = poll_until(a, lambda x: not x.revoking)
    assert after.held == frozenset(PARTITIONS) - revoking
    assert poll_until(b, lambda x: x.stable and bool(x.held)).held == revoking
    assert {tp: b.committed_offsets()[tp] for tp in revoking} == dict.fromkeys(revoking, 10)


def test_a_partition_no_batch_read_is_released_at_once(
    tmp_path: Path, members: list[GroupMember]
) -> None:
    store = str(tmp_path / "groups")
    a = start(members, store, "cooperative-sticky")
    poll_until(a, lambda x: x.held == frozenset(PARTITIONS))
    b = start(members, store, "cooperative-sticky")
    moved = poll_until(b, lambda x: x.stable and bool(x.held)).held
    assert len(moved) == 2
    assert poll_until(a, lambda x: x.settled).held == frozenset(PARTITIONS) - moved


def test_listener_commit_refused_for_a_partition_reacquired_since_the_batch(
    tmp_path: Path, members: list[GroupMember]
) -> None:
    # Eager (range): a rebalance takes every partition away and hands some back; a batch
    # planned before it must not commit them (their position restarts from the group's).
    store = str(tmp_path / "groups")
    a = start(members, store, "range")
    first = poll_until(a, lambda x: x.held == frozenset(PARTITIONS))
    start(members, store, "range")
    later = poll_until(a, lambda x: x.stable and x.generation > first.generation)
    assert later.held and later.held < frozenset(PARTITIONS)
    ends = dict.fromkeys(PARTITIONS, 10)
    assert commit_batch_for_member(store, "g", a.member_id, first.generation, ends, batch_id=0) == 0
    # A batch planned in the new generation commits what a holds.
    assert commit_batch_for_member(
        store, "g", a.member_id, later.generation, ends, batch_id=1
    ) == len(later.held)
