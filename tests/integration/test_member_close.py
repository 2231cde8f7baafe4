"""What a member that closes says: it left the group; nothing expired, nothing rejoins.

A real group log (delta-rs, local directory) and a real :class:`GroupMember`; no Spark, no
broker (the topic metadata comes from a function).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import ClassVar

import pytest

from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.testing.group_log import group_records
from tests.members import group_member

TOPIC = "t"
PARTITIONS = frozenset(TopicPartition(TOPIC, p) for p in range(12))


class RecordingListener:
    """The rebalance listener of the test's member (``rebalanceListener`` = module:Class)."""

    calls: ClassVar[list[tuple[str, list[TopicPartition]]]] = []

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("assigned", partitions))

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("revoked", partitions))

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("lost", partitions))


def test_a_member_that_closes_logs_that_it_left_not_an_expiry_or_a_rejoin(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    RecordingListener.calls.clear()
    store = str(tmp_path / "groups")
    member = group_member(
        store, "g", {TOPIC: len(PARTITIONS)}, rebalance_listener=f"{__name__}:RecordingListener"
    )
    member.start()
    deadline = time.monotonic() + 10
    while member.current_holdings().held != PARTITIONS:
        assert time.monotonic() < deadline, member.current_holdings()
        time.sleep(0.05)
    member_id = member.member_id

    with caplog.at_level(logging.INFO, logger="spark_kafka_group"):
        member.close()

    kinds = [str(r.kind) for r in group_records(store, "g")]
    # JOIN, GENERATION, SYNC, LEAVE (and the GENERATION of the now empty group): no expiry,
    # no second JOIN.
    assert kinds.count(RecordKind.LEAVE) == 1 and kinds.count(RecordKind.JOIN) == 1, kinds
    assert RecordKind.EXPIRE not in kinds and kinds.index(RecordKind.LEAVE) > kinds.index(
        RecordKind.SYNC
    ), kinds
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "lost" in m or "expired" in m or "Rejoining" in m], messages
    names = ", ".join(f"{TOPIC}-{p}" for p in range(12))
    assert f"Left group g as member {member_id}, giving up {names}" in messages, messages
    assert member.member_id == member_id  # no new incarnation
    assert RecordingListener.calls[-1] == ("revoked", sorted(PARTITIONS))
    assert all(kind != "lost" for kind, _ in RecordingListener.calls)
