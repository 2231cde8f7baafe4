"""The record kinds of the group log and what their envelope fields mean.

``member_id`` is the writer of the record (its liveness is refreshed by it), except for
``EXPIRE`` where it is the member being removed. Payload fields are listed on each kind.
"""

from __future__ import annotations

from enum import Enum


class RecordKind(str, Enum):
    #: A member (re)joins. generation = group generation seen by the writer; instance_id.
    #: payload: client_id, client_host, session_timeout_ms, rebalance_timeout_ms,
    #: protocol_type, protocols [[name, metadata]], topics [..], pattern, owned [[t, p]],
    #: replaces (old member id of the same static instance or null), rebalance (bool: this
    #: join starts a rebalance), reason.
    JOIN = "JOIN"
    #: A join phase completes. generation = the new generation.
    #: payload: leader, protocol, members [ids in join order], deadline_ms (sync deadline).
    GENERATION = "GENERATION"
    #: The leader's assignment. generation. payload: protocol, assignment {member: [[t, p]]},
    #: revoking {member: [[t, p]]}, snapshot {topic: partitions}, delay_ms,
    #: scheduled {instance: {"partitions": [[t, p]], "until_ms": int}}.
    SYNC = "SYNC"
    #: Liveness only. generation.
    HEARTBEAT = "HEARTBEAT"
    #: A member leaves the group on purpose. instance_id. payload: reason.
    LEAVE = "LEAVE"
    #: A member is removed by whoever noticed. member_id = the removed member.
    #: payload: reason ("session_timeout" | "rebalance_timeout" | "sync_timeout"),
    #: delay_until_ms (scheduled rebalance delay for a static member's partitions, or null).
    EXPIRE = "EXPIRE"
    #: An accepted offset commit of one partition: topic, partition, offset, generation.
    #: payload: metadata (str or null).
    COMMIT = "COMMIT"
    #: Revocation ack: the member released these partitions. generation.
    #: payload: partitions [[t, p]].
    REVOKE = "REVOKE"
    #: A member observed topic metadata that differs from the assignment snapshot.
    #: payload: snapshot {topic: partitions} (only the topics the group subscribes to).
    METADATA = "METADATA"
    #: A rebalance started for a reason no other record carries. payload: reason.
    REBALANCE = "REBALANCE"
    #: The group was deleted (Empty -> Dead). No payload.
    DELETE = "DELETE"
    #: The complete group state; replay may start here. payload: see GroupMetadata.to_payload.
    SNAPSHOT = "SNAPSHOT"

    def __str__(self) -> str:
        return self.value
