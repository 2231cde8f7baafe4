"""Factories for every record kind (Kafka's ``GroupCoordinatorRecordHelpers``).

The handlers of :class:`~spark_kafka_group.group.coordinator.GroupCoordinator` build records
only here: each factory fills the envelope columns its kind uses and the payload from its
type in :mod:`~spark_kafka_group.group.payloads`. ``now_ms`` is the writer's clock, passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.metadata import GroupMetadata, TopicPartition
from spark_kafka_group.group.payloads import (
    CommitPayload,
    DeletePayload,
    ExpirePayload,
    GenerationPayload,
    HeartbeatPayload,
    JoinPayload,
    LeavePayload,
    MetadataPayload,
    OffsetDeletePayload,
    RebalancePayload,
    RevokePayload,
    SnapshotPayload,
    SyncPayload,
)
from spark_kafka_group.group.records import GroupRecord


def join_record(
    *,
    now_ms: int,
    member_id: str,
    instance_id: str | None,
    generation: int,
    payload: JoinPayload,
) -> GroupRecord:
    """JOIN: ``generation`` is the group generation the member saw."""
    return GroupRecord(
        kind=RecordKind.JOIN.value,
        timestamp_ms=now_ms,
        member_id=member_id,
        instance_id=instance_id,
        generation=generation,
        payload=payload.to_dict(),
    )


def generation_record(
    *,
    now_ms: int,
    writer: str | None,
    generation: int,
    payload: GenerationPayload,
    deadline_after_ms: int | None = None,
) -> GroupRecord:
    """GENERATION: ``generation`` is the new one; ``writer`` None when time completed it.
    ``deadline_after_ms``: the sync phase's length, written as a deadline on this record's own
    clock (its timestamp plus the length: only the difference is ever read back)."""
    if deadline_after_ms is not None:
        payload = replace(payload, deadline_ms=now_ms + deadline_after_ms)
    return GroupRecord(
        kind=RecordKind.GENERATION.value,
        timestamp_ms=now_ms,
        member_id=writer,
        generation=generation,
        payload=payload.to_dict(),
    )


def sync_record(*, now_ms: int, leader: str, generation: int, payload: SyncPayload) -> GroupRecord:
    """SYNC: the leader's assignment for ``generation``."""
    return GroupRecord(
        kind=RecordKind.SYNC.value,
        timestamp_ms=now_ms,
        member_id=leader,
        generation=generation,
        payload=payload.to_dict(),
    )


def heartbeat_record(*, now_ms: int, member_id: str, generation: int) -> GroupRecord:
    return GroupRecord(
        kind=RecordKind.HEARTBEAT.value,
        timestamp_ms=now_ms,
        member_id=member_id,
        generation=generation,
        payload=HeartbeatPayload().to_dict(),
    )


def leave_record(
    *, now_ms: int, member_id: str, instance_id: str | None, generation: int, reason: str
) -> GroupRecord:
    return GroupRecord(
        kind=RecordKind.LEAVE.value,
        timestamp_ms=now_ms,
        member_id=member_id,
        instance_id=instance_id,
        generation=generation,
        payload=LeavePayload(reason=reason).to_dict(),
    )


def expire_record(
    *,
    now_ms: int,
    member_id: str,
    instance_id: str | None,
    generation: int,
    reason: str,
    delay_until_ms: int | None,
) -> GroupRecord:
    """EXPIRE: ``member_id`` is the member removed (whoever writes it)."""
    return GroupRecord(
        kind=RecordKind.EXPIRE.value,
        timestamp_ms=now_ms,
        member_id=member_id,
        instance_id=instance_id,
        generation=generation,
        payload=ExpirePayload(reason=reason, delay_until_ms=delay_until_ms).to_dict(),
    )


def commit_record(
    *,
    now_ms: int,
    member_id: str | None,
    instance_id: str | None,
    generation: int,
    partition: TopicPartition,
    offset: int,
    metadata: str | None,
    folded_from: tuple[str, int] | None = None,
) -> GroupRecord:
    """COMMIT: ``member_id`` None with generation -1 is an admin commit; ``folded_from``: the
    writer and sequence number of the commit object it comes from."""
    return GroupRecord(
        kind=RecordKind.COMMIT.value,
        timestamp_ms=now_ms,
        member_id=member_id,
        instance_id=instance_id,
        generation=generation,
        topic=partition.topic,
        partition=partition.partition,
        offset=offset,
        payload=CommitPayload(metadata=metadata, folded_from=folded_from).to_dict(),
    )


def offset_delete_record(*, now_ms: int, partition: TopicPartition) -> GroupRecord:
    """OFFSET_DELETE: an operator's deletion of ``partition``'s committed offset (no writer)."""
    return GroupRecord(
        kind=RecordKind.OFFSET_DELETE.value,
        timestamp_ms=now_ms,
        topic=partition.topic,
        partition=partition.partition,
        payload=OffsetDeletePayload().to_dict(),
    )


def revoke_record(
    *,
    now_ms: int,
    member_id: str,
    generation: int,
    partitions: Iterable[TopicPartition],
    rebalance: bool,
) -> GroupRecord:
    return GroupRecord(
        kind=RecordKind.REVOKE.value,
        timestamp_ms=now_ms,
        member_id=member_id,
        generation=generation,
        payload=RevokePayload(partitions=frozenset(partitions), rebalance=rebalance).to_dict(),
    )


def metadata_record(
    *,
    now_ms: int,
    member_id: str,
    generation: int,
    snapshot: Mapping[str, int],
    rebalance: bool,
) -> GroupRecord:
    return GroupRecord(
        kind=RecordKind.METADATA.value,
        timestamp_ms=now_ms,
        member_id=member_id,
        generation=generation,
        payload=MetadataPayload(snapshot=snapshot, rebalance=rebalance).to_dict(),
    )


def rebalance_record(*, now_ms: int, reason: str) -> GroupRecord:
    return GroupRecord(
        kind=RecordKind.REBALANCE.value,
        timestamp_ms=now_ms,
        payload=RebalancePayload(reason=reason).to_dict(),
    )


def delete_record(*, now_ms: int) -> GroupRecord:
    return GroupRecord(
        kind=RecordKind.DELETE.value, timestamp_ms=now_ms, payload=DeletePayload().to_dict()
    )


def snapshot_record(*, now_ms: int, group: GroupMetadata) -> GroupRecord:
    """SNAPSHOT: the whole state of ``group``."""
    return GroupRecord(
        kind=RecordKind.SNAPSHOT.value,
        timestamp_ms=now_ms,
        generation=group.generation,
        payload=SnapshotPayload(group=group).to_dict(),
    )
