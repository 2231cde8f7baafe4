"""The payload of every record kind: one frozen type per kind, and its JSON form.

A :class:`~spark_kafka_group.group.records.GroupRecord` carries the writer, the generation and
the partition in typed columns of the group log; everything else it says is its ``payload``,
stored as a JSON object. This module is the only code that knows the payload keys: each type
converts itself to the JSON object the store writes (:meth:`to_dict`) and back
(:meth:`from_dict`), and ``JoinPayload.of(record)`` reads a record's payload as its type.
Records are built by the factories of :mod:`~spark_kafka_group.group.record_helpers`; replay
and every reader of the log go through these types.

The JSON form is the on-disk format of every group log already written
(``tests/unit/fixtures/group_log_v1.jsonl`` is one): ``from_dict`` accepts what earlier
versions wrote (a key they did not write gets the value they meant), and ``to_dict`` writes
the same keys and values. Adding a key is backward compatible; renaming or retyping one is not
(bump :data:`~spark_kafka_group.group.records.RECORD_SCHEMA_VERSION` and read both).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from spark_kafka_group.group.errors import GroupProtocolBug
from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.metadata import (
    GroupMetadata,
    MemberProfile,
    Partitions,
    ScheduledDelay,
    scheduled_from_payload,
    scheduled_to_payload,
    tp_list,
    tp_set,
)
from spark_kafka_group.group.records import GroupRecord

P = TypeVar("P", bound="RecordPayload")

#: Partitions per member id (a SYNC record's assignment and revocations).
MemberPartitions = Mapping[str, Partitions]


class RecordPayload:
    """What the payload types share: their kind, and reading one from a record."""

    KIND: ClassVar[RecordKind]

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_dict(cls: type[P], d: Mapping[str, Any]) -> P:
        raise NotImplementedError

    @classmethod
    def of(cls: type[P], record: GroupRecord) -> P:
        """The payload of ``record``, which must be of this type's kind."""
        if record.kind != cls.KIND.value:
            raise GroupProtocolBug(f"a {record.kind} record read as a {cls.KIND} record")
        try:
            return cls.from_dict(record.payload)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise GroupProtocolBug(
                f"{record.kind} record written by {record.member_id!r} at {record.timestamp_ms} "
                f"has a malformed payload ({type(exc).__name__}: {exc}): {record.payload!r}"
            ) from None


def _counts(d: Mapping[str, Any]) -> dict[str, int]:
    """Topic -> partition count."""
    return {str(k): int(v) for k, v in d.items()}


def _by_member(d: Mapping[str, Any]) -> dict[str, Partitions]:
    return {str(mid): tp_set(parts) for mid, parts in d.items()}


@dataclass(frozen=True)
class JoinPayload(RecordPayload):
    """A member (re)joins (JoinGroup). Envelope: member_id, instance_id, generation seen."""

    KIND: ClassVar[RecordKind] = RecordKind.JOIN

    #: What the member said of itself (written flat in the payload).
    profile: MemberProfile
    #: What the member still holds (None: keep what the group says it holds).
    owned: Partitions | None = None
    #: The previous incarnation this join replaces (a static instance or a restarted query).
    replaces: str | None = None
    #: This join starts a rebalance.
    rebalance: bool = False
    reason: str = ""
    #: The initial rebalance delay this join sets or extends (written only when it does).
    join_delay_until_ms: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            **self.profile.to_payload(),
            "owned": None if self.owned is None else tp_list(self.owned),
            "replaces": self.replaces,
            "rebalance": self.rebalance,
            "reason": self.reason,
        }
        if self.join_delay_until_ms is not None:
            d["join_delay_until_ms"] = self.join_delay_until_ms
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> JoinPayload:
        owned = d.get("owned")
        delay_until = d.get("join_delay_until_ms")
        return cls(
            profile=MemberProfile.from_payload(d),
            owned=None if owned is None else tp_set(owned),
            replaces=d.get("replaces"),
            rebalance=bool(d.get("rebalance")),
            reason=str(d.get("reason") or ""),
            join_delay_until_ms=None if delay_until is None else int(delay_until),
        )


@dataclass(frozen=True)
class GenerationPayload(RecordPayload):
    """A join phase completes. Envelope: generation = the new generation, member_id = writer."""

    KIND: ClassVar[RecordKind] = RecordKind.GENERATION

    leader: str | None
    protocol: str | None
    #: The generation's members, leader first (empty: the group becomes Empty).
    members: tuple[str, ...]
    #: When the leader's SYNC is due.
    deadline_ms: int | None
    #: A cooperative generation whose members all have implicit-rejoin: the next rebalance
    #: needs no JOIN from them (written only when true).
    rejoin_implicitly: bool = False

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "leader": self.leader,
            "protocol": self.protocol,
            "members": list(self.members),
            "deadline_ms": self.deadline_ms,
        }
        if self.rejoin_implicitly:
            d["rejoin_implicitly"] = True
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GenerationPayload:
        deadline = d.get("deadline_ms")
        return cls(
            leader=d.get("leader"),
            protocol=d.get("protocol"),
            members=tuple(str(m) for m in d["members"]),
            deadline_ms=None if deadline is None else int(deadline),
            rejoin_implicitly=bool(d.get("rejoin_implicitly", False)),
        )


@dataclass(frozen=True)
class SyncPayload(RecordPayload):
    """The leader's assignment (SyncGroup). Envelope: member_id = leader, generation."""

    KIND: ClassVar[RecordKind] = RecordKind.SYNC

    protocol: str | None
    #: Every member's partitions in this generation (members with none have an empty set).
    assignment: MemberPartitions
    #: Partitions each member must give up before their new owner gets them (KIP-429).
    revoking: MemberPartitions
    #: Topic -> partition count the assignment used (``ConsumerCoordinator.assignmentSnapshot``).
    snapshot: Mapping[str, int]
    #: Remaining scheduled rebalance delay (KIP-415), 0 if none.
    delay_ms: int = 0
    #: Departed static members' partitions still waiting for them, by instance id.
    scheduled: Mapping[str, ScheduledDelay] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "protocol": self.protocol,
            "assignment": {mid: tp_list(ps) for mid, ps in self.assignment.items()},
            "revoking": {mid: tp_list(ps) for mid, ps in self.revoking.items()},
            "snapshot": dict(self.snapshot),
            "delay_ms": self.delay_ms,
            "scheduled": scheduled_to_payload(self.scheduled, opened=False),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SyncPayload:
        return cls(
            protocol=d.get("protocol"),
            assignment=_by_member(d["assignment"]),
            revoking=_by_member(d["revoking"]),
            snapshot=_counts(d["snapshot"]),
            delay_ms=int(d.get("delay_ms") or 0),
            scheduled=scheduled_from_payload(d.get("scheduled")),
        )


@dataclass(frozen=True)
class HeartbeatPayload(RecordPayload):
    """Liveness only (no payload). Envelope: member_id, generation."""

    KIND: ClassVar[RecordKind] = RecordKind.HEARTBEAT

    def to_dict(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HeartbeatPayload:
        return cls()


@dataclass(frozen=True)
class LeavePayload(RecordPayload):
    """A member leaves on purpose (LeaveGroup). Envelope: member_id, instance_id, generation."""

    KIND: ClassVar[RecordKind] = RecordKind.LEAVE

    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LeavePayload:
        return cls(reason=str(d.get("reason") or ""))


@dataclass(frozen=True)
class ExpirePayload(RecordPayload):
    """A member removed by whoever noticed. Envelope: member_id = the removed member."""

    KIND: ClassVar[RecordKind] = RecordKind.EXPIRE

    #: "session_timeout", "rebalance_timeout" or "sync_timeout".
    reason: str = ""
    #: End of the scheduled rebalance delay for a static member's partitions (KIP-415).
    delay_until_ms: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "delay_until_ms": self.delay_until_ms}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ExpirePayload:
        until = d.get("delay_until_ms")
        return cls(
            reason=str(d.get("reason") or ""),
            delay_until_ms=None if until is None else int(until),
        )


@dataclass(frozen=True)
class CommitPayload(RecordPayload):
    """An accepted offset commit. Envelope: topic, partition, offset, member_id, generation."""

    KIND: ClassVar[RecordKind] = RecordKind.COMMIT

    metadata: str | None = None
    #: The commit object it was folded from: its writer ("": the member's own; the progress
    #: listener's) and sequence number (None: not from an object).
    folded_from: tuple[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"metadata": self.metadata}
        if self.folded_from is not None:  # left out otherwise: the format before it
            d["object"] = list(self.folded_from)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CommitPayload:
        obj = d.get("object")
        return cls(
            metadata=d.get("metadata"),
            folded_from=None if obj is None else (str(obj[0]), int(obj[1])),
        )


@dataclass(frozen=True)
class OffsetDeletePayload(RecordPayload):
    """An operator deleted one partition's committed offset (OffsetDelete; no payload: the
    envelope's topic and partition name it, as a COMMIT's name what it commits)."""

    KIND: ClassVar[RecordKind] = RecordKind.OFFSET_DELETE

    def to_dict(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OffsetDeletePayload:
        return cls()


@dataclass(frozen=True)
class RevokePayload(RecordPayload):
    """A member released partitions it was giving up. Envelope: member_id, generation."""

    KIND: ClassVar[RecordKind] = RecordKind.REVOKE

    partitions: Partitions
    #: The last revocation of a Stable group is done: rebalance to give the partitions away.
    rebalance: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"partitions": tp_list(self.partitions), "rebalance": self.rebalance}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RevokePayload:
        return cls(partitions=tp_set(d.get("partitions")), rebalance=bool(d.get("rebalance")))


@dataclass(frozen=True)
class MetadataPayload(RecordPayload):
    """Topic metadata a member saw that differs from the assignment's. Envelope: member_id."""

    KIND: ClassVar[RecordKind] = RecordKind.METADATA

    #: Topic -> partition count, only the topics the group subscribes to.
    snapshot: Mapping[str, int]
    rebalance: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"snapshot": dict(self.snapshot), "rebalance": self.rebalance}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MetadataPayload:
        return cls(snapshot=_counts(d["snapshot"]), rebalance=bool(d.get("rebalance")))


@dataclass(frozen=True)
class RebalancePayload(RecordPayload):
    """A rebalance for a reason no other record carries (a scheduled delay ran out)."""

    KIND: ClassVar[RecordKind] = RecordKind.REBALANCE

    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RebalancePayload:
        return cls(reason=str(d.get("reason") or ""))


@dataclass(frozen=True)
class DeletePayload(RecordPayload):
    """The group was deleted, Empty -> Dead (no payload)."""

    KIND: ClassVar[RecordKind] = RecordKind.DELETE

    def to_dict(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DeletePayload:
        return cls()


@dataclass(frozen=True)
class SnapshotPayload(RecordPayload):
    """The complete group state; replay may start here. Its JSON form is the state's own
    (:meth:`GroupMetadata.to_payload`), kept next to the fields it lists."""

    KIND: ClassVar[RecordKind] = RecordKind.SNAPSHOT

    group: GroupMetadata

    def to_dict(self) -> dict[str, Any]:
        return self.group.to_payload()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SnapshotPayload:
        return cls(group=GroupMetadata.from_payload(d))


#: The payload type of each record kind.
PAYLOAD_TYPES: Mapping[str, type[RecordPayload]] = {
    t.KIND.value: t
    for t in (
        JoinPayload,
        GenerationPayload,
        SyncPayload,
        HeartbeatPayload,
        LeavePayload,
        ExpirePayload,
        CommitPayload,
        OffsetDeletePayload,
        RevokePayload,
        MetadataPayload,
        RebalancePayload,
        DeletePayload,
        SnapshotPayload,
    )
}


def payload_of(record: GroupRecord) -> RecordPayload:
    """The typed payload of any record."""
    payload_type = PAYLOAD_TYPES.get(str(record.kind))
    if payload_type is None:
        raise GroupProtocolBug(f"unknown record kind {record.kind!r}")
    return payload_type.of(record)
