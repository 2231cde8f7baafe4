"""The record kinds of the group log and what their envelope fields mean.

``member_id`` is the writer of the record (its liveness is refreshed by it), except for
``EXPIRE`` where it is the member being removed. Each kind's payload is a type of
:mod:`~spark_kafka_group.group.payloads` (named after the kind: ``JOIN`` -> ``JoinPayload``),
and its records are built by :mod:`~spark_kafka_group.group.record_helpers`.
"""

from __future__ import annotations

from enum import Enum


class RecordKind(str, Enum):
    #: A member (re)joins. generation = group generation seen by the writer; instance_id.
    JOIN = "JOIN"
    #: A join phase completes. generation = the new generation; member_id = writer or null.
    GENERATION = "GENERATION"
    #: The leader's assignment. member_id = leader; generation.
    SYNC = "SYNC"
    #: Liveness only. generation.
    HEARTBEAT = "HEARTBEAT"
    #: A member leaves the group on purpose. instance_id; generation.
    LEAVE = "LEAVE"
    #: A member is removed by whoever noticed. member_id = the removed member; instance_id.
    EXPIRE = "EXPIRE"
    #: An accepted offset commit of one partition: topic, partition, offset, generation
    #: (member_id null and generation -1: an admin commit into an Empty group).
    COMMIT = "COMMIT"
    #: An operator deleted the committed offset of one partition (OffsetDelete): topic,
    #: partition; member_id null. No member subscribes to the topic (or holds the partition).
    OFFSET_DELETE = "OFFSET_DELETE"
    #: Revocation ack: the member released partitions it was giving up. generation.
    REVOKE = "REVOKE"
    #: A member observed topic metadata that differs from the assignment snapshot.
    METADATA = "METADATA"
    #: A rebalance started for a reason no other record carries.
    REBALANCE = "REBALANCE"
    #: The group was deleted (Empty -> Dead).
    DELETE = "DELETE"
    #: The complete group state; replay may start here. generation.
    SNAPSHOT = "SNAPSHOT"

    def __str__(self) -> str:
        return self.value
