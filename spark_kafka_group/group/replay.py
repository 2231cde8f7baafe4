"""Replay: the only code that changes a :class:`GroupMetadata`.

``apply(group, record)`` folds one record into the group using only the record's data (never a
clock, never local configuration), so every member folding the same log reaches the same
state. Records carry the decisions the handlers took (who leads, which protocol, the
assignment, whether a rebalance starts); replay checks they are consistent with the state and
raises :class:`GroupProtocolBug` when they are not: a record that does not fit is a bug.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields

from spark_kafka_group.group.errors import GroupProtocolBug
from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.metadata import (
    LEASES,
    GroupMetadata,
    MemberMetadata,
    OffsetAndMetadata,
    Opened,
    ScheduledDelay,
    TopicPartition,
)
from spark_kafka_group.group.payloads import (
    CommitPayload,
    ExpirePayload,
    GenerationPayload,
    JoinPayload,
    LeavePayload,
    MetadataPayload,
    RebalancePayload,
    RevokePayload,
    SnapshotPayload,
    SyncPayload,
)
from spark_kafka_group.group.records import GroupRecord
from spark_kafka_group.group.state import GroupState


def replay(records: Iterable[GroupRecord], group_id: str) -> GroupMetadata:
    """Fold ``records`` into a new group (a SNAPSHOT record resets the state)."""
    group = GroupMetadata(group_id)
    for record in records:
        apply(group, record)
    return group


def latest_snapshot_index(records: list[GroupRecord]) -> int:
    """Index of the last SNAPSHOT record (0 if there is none): where replay may start."""
    for i in range(len(records) - 1, -1, -1):
        if records[i].kind == RecordKind.SNAPSHOT:
            return i
    return 0


def apply(group: GroupMetadata, record: GroupRecord) -> None:
    """Fold one record into ``group`` (in place)."""
    kind = record.kind
    if kind == RecordKind.SNAPSHOT:
        _apply_snapshot(group, record)
        return
    if group.state == GroupState.DEAD:
        raise GroupProtocolBug(f"{kind} record for group {group.group_id!r}, which is Dead")
    handler = _APPLY.get(str(kind))
    if handler is None:
        raise GroupProtocolBug(f"unknown record kind {kind!r}")
    ts = int(record.timestamp_ms)
    group.seq += 1
    group.last_record_ms = max(group.last_record_ms, ts)
    if kind != RecordKind.EXPIRE:
        writer = group.member(record.member_id)
        # A member on a lease shows it is alive by its lease, and a COMMIT in its name may
        # come from another writer (a folder writing the commits it recorded in its commit
        # object, maybe after it died), so such a COMMIT is no sign of life. A member without
        # a lease keeps counting every record of its own, as before leases.
        lease_commit = (
            kind == RecordKind.COMMIT and writer is not None and LEASES in writer.profile.features
        )
        if writer is not None and not lease_commit:
            _heard_from(group, writer, ts)
    handler(group, record)


# ---------------------------------------------------------------------- helpers


def _heard_from(group: GroupMetadata, member: MemberMetadata, ts: int) -> None:
    """The record being folded shows ``member`` alive (``ts``: its writer's clock, shown only)."""
    member.last_seen_ms = max(member.last_seen_ms, ts)
    member.last_seen_seq = group.seq


def _opened(group: GroupMetadata, ts: int) -> Opened:
    """The record being folded opens a window."""
    return Opened(group.seq, ts)


def _transition(group: GroupMetadata, target: GroupState) -> None:
    group.state.check_transition(target)
    group.state = target


def _prepare_rebalance(group: GroupMetadata, ts: int, reason: str) -> None:
    _transition(group, GroupState.PREPARING_REBALANCE)
    # With a cooperative protocol the members of the current generation count as rejoined,
    # owning what they hold: only members with something new to say (a new member, a changed
    # subscription) write a JOIN, so a rebalance costs writes in what changes, not in the
    # size of the group. Their liveness comes from their leases, not from rejoining.
    implicit = group.rejoin_implicitly
    for m in group.members.values():
        m.joined = implicit and m.generation == group.generation
    group.join_order = [mid for mid, m in group.members.items() if m.joined]
    group.deadline_ms = ts + group.max_rebalance_timeout_ms()
    group.deadline_opened = _opened(group, ts)
    group.rebalance_reason = reason


def _require_member(group: GroupMetadata, record: GroupRecord) -> MemberMetadata:
    m = group.member(record.member_id)
    if m is None:
        raise GroupProtocolBug(
            f"{record.kind} record names member {record.member_id!r}, "
            f"which is not a member of group {group.group_id!r}"
        )
    return m


def _remove_member(group: GroupMetadata, member_id: str, ts: int, reason: str) -> MemberMetadata:
    m = group.members.pop(member_id)
    if m.instance_id is not None and group.static_members.get(m.instance_id) == member_id:
        del group.static_members[m.instance_id]
    if member_id in group.join_order:
        group.join_order.remove(member_id)
    if group.leader == member_id:
        group.leader = None
    if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        _prepare_rebalance(group, ts, reason)
    return m


# ---------------------------------------------------------------------- kinds


def _apply_join(group: GroupMetadata, record: GroupRecord) -> None:
    p = JoinPayload.of(record)
    member_id = record.member_id
    if member_id is None:
        raise GroupProtocolBug("JOIN record without member id")
    instance_id = record.instance_id
    if p.replaces is not None:
        member = _replace_incarnation(group, member_id, instance_id, p.replaces)
    else:
        member = _joining_member(group, member_id, instance_id)
    member.instance_id = instance_id
    member.profile = p.profile
    _heard_from(group, member, int(record.timestamp_ms))
    if instance_id is not None:
        group.static_members[instance_id] = member_id
    if p.owned is not None:
        keep = p.owned
        member.hold(member.assignment & keep, member.revoking & keep, member.generation)
    if group.protocol_type is None:
        group.protocol_type = member.profile.protocol_type
    if p.rebalance:
        _prepare_rebalance(group, int(record.timestamp_ms), p.reason or "join")
    if group.state == GroupState.EMPTY:
        raise GroupProtocolBug("a JOIN to an Empty group must start a rebalance")
    if group.state == GroupState.PREPARING_REBALANCE:
        _joined_rebalance(group, member, p, int(record.timestamp_ms))


def _replace_incarnation(
    group: GroupMetadata, member_id: str, instance_id: str | None, replaces: str
) -> MemberMetadata:
    """A new incarnation takes the place of ``replaces`` (its partitions, generation and
    leadership); the old id is fenced."""
    old = group.members.pop(replaces, None)
    if old is None or old.instance_id != instance_id or member_id in group.members:
        raise GroupProtocolBug(f"JOIN of {member_id!r} replaces unknown member {replaces!r}")
    member = MemberMetadata(
        member_id=member_id,
        generation=old.generation,
        joined=old.joined,
        assignment=old.assignment,
        revoking=old.revoking,
        held_since=old.held_since,
    )
    group.members[member_id] = member
    # The fenced id maps to the instance id it held ("" for a restarted dynamic member).
    group.fenced[replaces] = instance_id or ""
    if group.leader == replaces:
        group.leader = member_id
    group.join_order = [member_id if x == replaces else x for x in group.join_order]
    return member


def _joining_member(
    group: GroupMetadata, member_id: str, instance_id: str | None
) -> MemberMetadata:
    """The member a JOIN without a replaced incarnation is about: known, or added."""
    member = group.members.get(member_id)
    if member is None:
        if instance_id is not None and instance_id in group.static_members:
            raise GroupProtocolBug(f"instance {instance_id!r} already has a member")
        member = group.members[member_id] = MemberMetadata(member_id=member_id)
    elif member.instance_id != instance_id:
        raise GroupProtocolBug(f"JOIN of {member_id!r} changes its instance id")
    return member


def _joined_rebalance(
    group: GroupMetadata, member: MemberMetadata, p: JoinPayload, timestamp_ms: int
) -> None:
    """The member joined the rebalance being prepared (which its initial delay may extend)."""
    member.joined = True
    if member.member_id not in group.join_order:
        group.join_order.append(member.member_id)
    if p.join_delay_until_ms is not None:
        group.join_delay_until_ms = p.join_delay_until_ms
        group.join_delay_opened = _opened(group, timestamp_ms)


def _apply_generation(group: GroupMetadata, record: GroupRecord) -> None:
    p = GenerationPayload.of(record)
    if group.state != GroupState.PREPARING_REBALANCE:
        raise GroupProtocolBug(f"GENERATION record while the group is {group.state}")
    members = list(p.members)
    if set(members) != set(group.members) or not group.all_joined():
        raise GroupProtocolBug(
            f"GENERATION {record.generation} names members {members} but the group has "
            f"{sorted(group.members)} (joined: {sorted(group.join_order)})"
        )
    if record.generation != group.generation + 1:
        raise GroupProtocolBug(
            f"GENERATION {record.generation} does not follow generation {group.generation}"
        )
    if p.protocol != group.select_protocol(group.members.values()):
        raise GroupProtocolBug(
            f"GENERATION {record.generation} selects protocol {p.protocol!r}; the members' "
            f"vote selects {group.select_protocol(group.members.values())!r}"
        )
    group.generation = int(record.generation)
    group.join_order = []
    group.join_delay_until_ms = None
    group.rebalance_reason = None
    if not members:
        _transition(group, GroupState.EMPTY)
        group.protocol = None
        group.protocol_type = None
        group.leader = None
        group.deadline_ms = None
        return
    if p.leader not in group.members:
        raise GroupProtocolBug(f"GENERATION leader {p.leader!r} is not a member")
    _transition(group, GroupState.COMPLETING_REBALANCE)
    group.leader = p.leader
    group.protocol = p.protocol
    group.rejoin_implicitly = p.rejoin_implicitly
    group.deadline_ms = p.deadline_ms
    group.deadline_opened = _opened(group, int(record.timestamp_ms))
    # Re-order members by the generation's join order (the leader joined first).
    group.members = {mid: group.members[mid] for mid in members}
    ts = int(record.timestamp_ms)
    for m in group.members.values():
        m.generation = group.generation
        m.joined = False
        _heard_from(group, m, ts)  # completing the join restarts every session


def _apply_sync(group: GroupMetadata, record: GroupRecord) -> None:
    p = SyncPayload.of(record)
    if group.state != GroupState.COMPLETING_REBALANCE:
        raise GroupProtocolBug(f"SYNC record while the group is {group.state}")
    if record.generation != group.generation or record.member_id != group.leader:
        raise GroupProtocolBug(
            f"SYNC by {record.member_id!r} for generation {record.generation}; the group is at "
            f"generation {group.generation} led by {group.leader!r}"
        )
    assignment, revoking = p.assignment, p.revoking
    if not set(assignment) | set(revoking) <= set(group.members):
        raise GroupProtocolBug("SYNC assigns partitions to non-members")
    seen: dict[TopicPartition, str] = {}
    for m in group.members.values():
        new_revoking = revoking.get(m.member_id, frozenset())
        if not new_revoking <= m.held:
            raise GroupProtocolBug(f"SYNC revokes from {m.member_id!r} what it does not hold")
        m.hold(assignment.get(m.member_id, frozenset()), new_revoking, group.generation)
        for tp in m.held:
            if tp in seen:
                raise GroupProtocolBug(f"SYNC gives {tp} to both {seen[tp]!r} and {m.member_id!r}")
            seen[tp] = m.member_id
        if m.assignment & m.revoking:
            raise GroupProtocolBug(f"SYNC both assigns and revokes partitions of {m.member_id!r}")
    group.assignment_snapshot = dict(p.snapshot)
    group.latest_metadata = dict(p.snapshot)
    ts = int(record.timestamp_ms)
    # The leader wrote what remains of each delay on its clock: they count from this record.
    group.scheduled = {
        inst: ScheduledDelay(d.partitions, d.until_ms, _opened(group, ts))
        for inst, d in p.scheduled.items()
    }
    group.delay_ms = p.delay_ms
    group.deadline_ms = None
    for m in group.members.values():
        _heard_from(group, m, ts)  # so does completing the sync
    _transition(group, GroupState.STABLE)


def _apply_heartbeat(group: GroupMetadata, record: GroupRecord) -> None:
    _require_member(group, record)


def _apply_leave(group: GroupMetadata, record: GroupRecord) -> None:
    _require_member(group, record)
    reason = LeavePayload.of(record).reason or "leave"
    _remove_member(group, str(record.member_id), int(record.timestamp_ms), reason)


def _apply_expire(group: GroupMetadata, record: GroupRecord) -> None:
    _require_member(group, record)
    p = ExpirePayload.of(record)
    m = _remove_member(
        group, str(record.member_id), int(record.timestamp_ms), p.reason or "expired"
    )
    if p.delay_until_ms is not None and m.instance_id is not None:
        previous = group.scheduled.get(m.instance_id)
        partitions = m.assignment | (previous.partitions if previous else frozenset())
        group.scheduled[m.instance_id] = ScheduledDelay(
            partitions, p.delay_until_ms, _opened(group, int(record.timestamp_ms))
        )


def _apply_commit(group: GroupMetadata, record: GroupRecord) -> None:
    if record.topic is None or record.partition is None or record.offset is None:
        raise GroupProtocolBug("COMMIT record without topic, partition and offset")
    if record.member_id is not None:
        _require_member(group, record)
    tp = TopicPartition(record.topic, int(record.partition))
    payload = CommitPayload.of(record)
    member = group.member(record.member_id)
    if payload.folded_from is not None and member is not None:
        writer, seq = payload.folded_from
        if seq > member.folded_seq.get(writer, -1):
            member.folded_seq = {**member.folded_seq, writer: seq}
    group.offsets[tp] = OffsetAndMetadata(
        offset=int(record.offset),
        metadata=payload.metadata,
        commit_timestamp_ms=int(record.timestamp_ms),
        generation=-1 if record.generation is None else int(record.generation),
        member_id=record.member_id,
    )


def _apply_offset_delete(group: GroupMetadata, record: GroupRecord) -> None:
    if record.topic is None or record.partition is None:
        raise GroupProtocolBug("OFFSET_DELETE record without topic and partition")
    tp = TopicPartition(record.topic, int(record.partition))
    readers = group.members_reading(tp.topic)
    if readers:
        raise GroupProtocolBug(
            f"OFFSET_DELETE of {tp} while members {sorted(m.member_id for m in readers)} "
            f"read topic {tp.topic!r}"
        )
    # Absent already: nothing to remove (Kafka's tombstone of an absent offset is a no-op).
    group.offsets.pop(tp, None)


def _apply_revoke(group: GroupMetadata, record: GroupRecord) -> None:
    m = _require_member(group, record)
    p = RevokePayload.of(record)
    released = p.partitions
    if not released <= m.revoking:
        raise GroupProtocolBug(f"REVOKE of {sorted(released - m.revoking)} not being revoked")
    m.hold(m.assignment, m.revoking - released, m.generation)
    if p.rebalance:
        _prepare_rebalance(group, int(record.timestamp_ms), "revocation completed")


def _apply_metadata(group: GroupMetadata, record: GroupRecord) -> None:
    p = MetadataPayload.of(record)
    group.latest_metadata = dict(p.snapshot)
    if p.rebalance:
        _prepare_rebalance(group, int(record.timestamp_ms), "metadata changed")


def _apply_rebalance(group: GroupMetadata, record: GroupRecord) -> None:
    reason = RebalancePayload.of(record).reason or "rebalance"
    _prepare_rebalance(group, int(record.timestamp_ms), reason)


def _apply_delete(group: GroupMetadata, record: GroupRecord) -> None:
    if group.members:
        raise GroupProtocolBug("DELETE of a group that has members")
    _transition(group, GroupState.DEAD)
    group.offsets = {}
    group.scheduled = {}


def _apply_snapshot(group: GroupMetadata, record: GroupRecord) -> None:
    restored = SnapshotPayload.of(record).group
    for f in fields(GroupMetadata):
        setattr(group, f.name, getattr(restored, f.name))


_APPLY = {
    RecordKind.JOIN.value: _apply_join,
    RecordKind.GENERATION.value: _apply_generation,
    RecordKind.SYNC.value: _apply_sync,
    RecordKind.HEARTBEAT.value: _apply_heartbeat,
    RecordKind.LEAVE.value: _apply_leave,
    RecordKind.EXPIRE.value: _apply_expire,
    RecordKind.COMMIT.value: _apply_commit,
    RecordKind.OFFSET_DELETE.value: _apply_offset_delete,
    RecordKind.REVOKE.value: _apply_revoke,
    RecordKind.METADATA.value: _apply_metadata,
    RecordKind.REBALANCE.value: _apply_rebalance,
    RecordKind.DELETE.value: _apply_delete,
}
