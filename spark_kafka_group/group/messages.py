"""Requests and responses of the coordinator's handlers (Kafka's group APIs, in Python)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from spark_kafka_group.group import defaults
from spark_kafka_group.group.errors import GroupError
from spark_kafka_group.group.metadata import Partitions, TopicPartition
from spark_kafka_group.group.state import GroupState


@dataclass(frozen=True)
class JoinRequest:
    """JoinGroup. ``member_id`` is chosen by the member (e.g. a uuid) and kept for its life.

    ``protocols`` are assignor names in order of preference, or ``(name, metadata)`` pairs with
    JSON metadata. ``owned`` lists the partitions the member still holds (cooperative
    protocols); ``None`` means "whatever the group gave me". With an eager protocol a join
    gives up everything, whatever ``owned`` says.

    ``replaces`` names the previous incarnation of a dynamic member (a query restarted from
    its checkpoint knows it): if that member is still in the group, the new one takes its
    place and its partitions at once, as a static member's new incarnation does (KIP-345),
    and the old id is fenced. Ignored for static members (their instance id says it) and
    when the previous incarnation has already left or expired.
    """

    member_id: str
    protocols: Sequence[str | tuple[str, Any]]
    topics: Sequence[str] = ()
    pattern: str | None = None
    instance_id: str | None = None
    owned: Partitions | None = None
    session_timeout_ms: int = defaults.SESSION_TIMEOUT_MS
    rebalance_timeout_ms: int = defaults.REBALANCE_TIMEOUT_MS
    client_id: str = ""
    client_host: str = ""
    protocol_type: str = "consumer"
    reason: str | None = None
    replaces: str | None = None
    #: What the member's release of the library can do beyond Kafka's classic protocol
    #: (:data:`~spark_kafka_group.group.metadata.FEATURES`); the group uses a feature only
    #: once every member has it, so members of older releases can share a group.
    features: Sequence[str] = ()

    def protocol_pairs(self) -> tuple[tuple[str, Any], ...]:
        return tuple((p, {}) if isinstance(p, str) else (p[0], p[1]) for p in self.protocols)


@dataclass(frozen=True)
class JoinResponse:
    error: GroupError
    member_id: str
    #: The generation the member now belongs to (-1 while the join phase is pending).
    generation: int = -1
    protocol: str | None = None
    leader: str | None = None
    #: True: joined, waiting for the other members to rejoin; poll again.
    pending: bool = False
    #: The generation's members (leader first).
    members: tuple[str, ...] = ()


@dataclass(frozen=True)
class SyncResponse:
    error: GroupError
    generation: int = -1
    protocol: str | None = None
    #: True: the leader has not written the assignment yet; poll again.
    pending: bool = False
    assignment: Partitions = frozenset()
    #: Partitions to give up: finish the in-flight batch, commit its end, then
    #: ``ack_revocation``; they go to their new owner in the follow-up rebalance.
    revoking: Partitions = frozenset()
    #: Remaining scheduled rebalance delay (KIP-415), 0 if none.
    delay_ms: int = 0


@dataclass(frozen=True)
class HeartbeatResponse:
    error: GroupError


@dataclass(frozen=True)
class LeaveResponse:
    error: GroupError


@dataclass(frozen=True)
class CommitResponse:
    error: GroupError
    partition_errors: dict[TopicPartition, GroupError] = field(default_factory=dict)

    @property
    def accepted(self) -> Partitions:
        return frozenset(tp for tp, e in self.partition_errors.items() if e is GroupError.NONE)


@dataclass(frozen=True)
class RevokeResponse:
    error: GroupError
    released: Partitions = frozenset()


@dataclass(frozen=True)
class MetadataResponse:
    error: GroupError
    rebalance: bool = False


@dataclass(frozen=True)
class DeleteResponse:
    error: GroupError


@dataclass(frozen=True)
class OffsetDeleteResponse:
    """OffsetDelete's answer: each partition's error (NONE: its committed offset is gone, or
    it had none). ``refusals``: for each topic refused with GROUP_SUBSCRIBED_TO_TOPIC, the
    message naming the group, the topic, the members reading it and the fix."""

    error: GroupError
    partition_errors: dict[TopicPartition, GroupError] = field(default_factory=dict)
    refusals: dict[str, str] = field(default_factory=dict)

    @property
    def deleted(self) -> Partitions:
        return frozenset(tp for tp, e in self.partition_errors.items() if e is GroupError.NONE)


@dataclass(frozen=True)
class MemberView:
    """What one member should do next, as the fold sees it (for member loops)."""

    member_id: str
    state: GroupState
    group_generation: int
    #: The member is in the group (it may still need to rejoin).
    known: bool
    #: A newer incarnation of the member's static instance replaced it: stop for good.
    fenced: bool
    #: Join (or rejoin) now: not a member, or a rebalance is waiting for this member.
    needs_join: bool
    #: Joined; the join phase waits for other members.
    awaiting_join: bool
    #: CompletingRebalance: the leader must sync (the others wait for it).
    awaiting_sync: bool
    is_leader: bool
    member_generation: int
    assignment: Partitions
    revoking: Partitions
    delay_ms: int
    protocol: str | None
    #: Its next JOIN gives up everything it holds (a rebalance of an eager protocol): until
    #: then, as partitions being revoked, they get no new batch and their last commit lands.
    gives_up_at_join: bool = False
