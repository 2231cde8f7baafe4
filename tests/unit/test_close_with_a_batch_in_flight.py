"""A member closed while a batch it handed to Spark has no commit (``query.stop()``
interrupted it, perhaps after its sink ran) does not leave: its partitions must not move to a
member that would read that batch again. It stays as a crashed member would: a restart on the
same checkpoint replaces it at once and runs the batch again itself (a sink idempotent by batch
id skips it), and without a restart its session timeout expires it.

Production members over the in-memory log, leases and commit objects, stepped by hand on an
injected clock (the helpers of ``test_commit_objects``).
"""

from __future__ import annotations

import json
import logging

import pytest

from spark_kafka_group.group import TopicPartition
from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.payloads import JoinPayload, SyncPayload
from spark_kafka_group.listener.progress import GroupProgressListener
from spark_kafka_group.member.close import Closing, closing
from spark_kafka_group.source.offsets import SourceOffset
from spark_kafka_group.testing.simulation import SimMember
from tests.unit.test_commit_objects import Group, commit
from tests.unit.test_listener_objects import listener_client, listener_commit, planned

T0 = TopicPartition("t", 0)


@pytest.mark.parametrize(
    ("uncommitted", "static", "expected"),
    [
        (frozenset(), False, Closing.LEAVE),
        (frozenset({T0}), False, Closing.STAY),
        (frozenset(), True, Closing.STAY),
        (frozenset({T0}), True, Closing.STAY),
        (None, False, Closing.GONE),
        (None, True, Closing.GONE),
    ],
)
def test_a_member_leaves_only_with_every_batch_committed(uncommitted, static, expected) -> None:
    assert closing(uncommitted, static=static) is expected


def _closed_mid_batch(g: Group) -> tuple[SimMember, SimMember, dict[TopicPartition, int]]:
    """Members a and b; b commits a batch, hands the next to Spark and closes before Spark
    completes it. Returns a, b and what b committed."""
    a, b = g.add("a"), g.add("b")
    g.settle()
    done = {tp: 5 for tp in b.member.holdings.held}
    commit(b, done)
    planned(b, {tp: 9 for tp in done})
    b.member.close(grace_s=1.0)
    g.members.remove(b)  # its process is gone
    return a, b, done


def _assigned(g: Group, member_id: str, since: int) -> set[TopicPartition]:
    """Every partition a SYNC from the ``since``-th record of the log on gave ``member_id``."""
    return {
        tp
        for r in g.log.records[since:]
        if r.kind == RecordKind.SYNC
        for tp in SyncPayload.of(r).assignment.get(member_id, ())
    }


def test_a_member_closed_mid_batch_writes_no_leave_and_says_so(caplog) -> None:
    g = Group()
    with caplog.at_level(logging.INFO, logger="spark_kafka_group.member.close"):
        a, _b, done = _closed_mid_batch(g)
    assert [r for r in g.records(RecordKind.LEAVE) if r.member_id == "b"] == []
    a.step()
    assert "b" in a.coord.group.members  # still a member: nobody takes its partitions
    assert g.committed() == {**g.committed(), **done}  # what it committed is in the log
    [line] = [r.getMessage() for r in caplog.records if "closes without leaving" in r.message]
    assert "member b closes without leaving the group" in line
    assert "sessionTimeoutMs = 10000" in line
    assert "left" not in line


def test_its_restart_on_the_same_checkpoint_replaces_it_and_runs_the_batch_again() -> None:
    g = Group()
    _a, b, done = _closed_mid_batch(g)
    held = frozenset(done)
    generation = b.member.holdings.generation
    closed_at = len(g.log.records)
    g.step(ms=2_000)  # the restart takes a while: the others go on
    b2 = g.add("b2", replaces="b")
    b2.member.refresh_metadata()
    for _ in range(20):
        g.step()
        if b2.member.holdings.held == held:
            break
    [join] = [r for r in g.records(RecordKind.JOIN) if r.member_id == "b2"]
    assert JoinPayload.of(join).replaces == "b"
    assert b2.member.holdings.held == held  # b's partitions, at once
    assert not (_assigned(g, "a", closed_at) & held)  # they never moved to a
    # Spark runs the checkpoint's interrupted batch again: same range, accepted, committed.
    starts = dict(done)
    assert b2.member.resume_checkpoint("b", generation, starts) == held
    assert b2.member.begin_batch({tp: 9 for tp in held}, batch_generation=generation) == held
    b2.member.commit({tp: 9 for tp in held}, batch_generation=generation, batch_member="b")
    for _ in range(10):
        g.step(ms=1_000)
    assert {tp: o for tp, o in g.committed().items() if tp in held} == dict.fromkeys(held, 9)


def test_without_a_restart_it_expires_after_its_session_timeout() -> None:
    g = Group()
    a, _b, done = _closed_mid_batch(g)
    for _ in range(9):
        g.step(ms=1_000)
    assert "b" in a.coord.group.members  # within its 10 s session
    for _ in range(10):
        g.step(ms=1_000)
    assert [r.member_id for r in g.records(RecordKind.EXPIRE)] == ["b"]
    for _ in range(20):
        g.step(ms=200)
    # Its partitions moved with the last commit: the interrupted batch is read again there.
    assert a.member.holdings.held >= frozenset(done)
    assert {tp: o for tp, o in g.committed().items() if tp in done} == done


def test_a_member_whose_last_batch_the_listener_committed_leaves() -> None:
    g = Group()
    _, b = g.add("a"), g.add("b")
    g.settle()
    last = planned(b, {tp: 9 for tp in b.member.holdings.held})
    listener_commit(g, b, last, batch_id=1)
    b.member.close(grace_s=1.0)
    assert [r.member_id for r in g.records(RecordKind.LEAVE)] == ["b"]


def test_the_progress_listener_writes_no_leave_when_its_query_terminates() -> None:
    """The listener saw the member's last completed batch; the member has a later one in
    flight that only it knows of. Its query's termination must not make it leave."""
    g = Group()
    a, b = g.add("a"), g.add("b")
    g.settle()
    generation = b.member.holdings.generation
    done = {tp: 5 for tp in b.member.holdings.held}
    planned(b, done)
    listener = GroupProgressListener()
    listener._clients[("memory", "g")] = listener_client(g)
    end = SourceOffset("g", "memory", generation, "b", done)
    progress = {"runId": "r1", "batchId": 3, "sources": [{"endOffset": json.dumps(end.to_json())}]}
    listener.onQueryProgress(type("Event", (), {"progress": progress})())
    planned(b, {tp: 9 for tp in done})  # the next batch, interrupted by the stop
    listener.onQueryTerminated(type("Event", (), {"runId": "r1"})())
    assert g.records(RecordKind.LEAVE) == []
    a.step()
    assert "b" in a.coord.group.members
