"""What the reader sees of its member: the :class:`Holdings`, the :class:`Published` snapshot
of its owner loop, and the :class:`Member` protocol, which both the group member
(:class:`~spark_kafka_group.member.GroupMember`) and the fixed ``assign`` member
(:class:`~spark_kafka_group.member.FixedAssignmentMember`) follow.

One vocabulary with the group core (:class:`~spark_kafka_group.group.MemberMetadata`): an
*assignment* is what the assignor decides (the leader's plan,
:data:`spark_kafka_group.group.assignors.Assignment`, and each member's share of it,
``MemberMetadata.assignment``); a member's *holdings* are what it holds now: its assignment
and the partitions it is *revoking*, each *held since* a generation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from spark_kafka_group.group.metadata import Partitions, TopicPartition
from spark_kafka_group.group.types import Committed
from spark_kafka_group.member.in_flight import BatchesInFlight


@dataclass(frozen=True)
class Holdings:
    """One member's view of what it holds, as of its last step."""

    generation: int
    member_id: str
    #: Everything the member holds: partitions it may plan and those being revoked.
    held: Partitions = frozenset()
    #: Held partitions the member must finish and release (cooperative rebalancing).
    revoking: Partitions = frozenset()
    #: Generation since which each held partition has been held continuously.
    held_since: Mapping[TopicPartition, int] = field(default_factory=dict)
    stable: bool = False
    #: Stable, and no member is still revoking: a cooperative rebalance has fully finished.
    settled: bool = False


@dataclass(frozen=True)
class Published:
    """What a group member's owner loop publishes for other threads after each step, replaced
    whole (one assignment: a reader sees one step's values together)."""

    #: The member's id (a new one after it expired and rejoined).
    member_id: str
    #: The log's committed offsets, an immutable copy.
    committed: Committed = field(default_factory=lambda: MappingProxyType({}))
    #: The ids of the group's members (one that left or expired is not among them).
    members: frozenset[str] = frozenset()
    #: Why the member stopped for good (fenced, a refused option), or None.
    failure: Exception | None = None


class Member(Protocol):
    """What the streaming reader needs from its member."""

    def start(self, *, replaces: str | None = None, must_complete_join: bool = False) -> Holdings:
        """Join (or not, for fixed partitions) and return the first holdings."""
        ...

    def current_holdings(self) -> Holdings:
        """The holdings as last stepped, without reading the group log (every trigger)."""
        ...

    def group_metadata(self) -> Mapping[str, int] | None:
        """The partition count of each subscribed topic as the group last assigned them
        (before this member joins: what its earlier members knew); None if it never did."""
        ...

    def resume_checkpoint(
        self, previous_member: str, generation: int, positions: Mapping[TopicPartition, int]
    ) -> Partitions:
        """The partitions whose checkpointed positions (of ``previous_member``, the
        incarnation this member replaces) stay valid."""
        ...

    def begin_batch(
        self, ends: Mapping[TopicPartition, int], *, batch_generation: int
    ) -> Partitions:
        """The partitions of a batch about to run that this member may read."""
        ...

    @property
    def holdings(self) -> Holdings:
        """The holdings after the last step (without stepping, unlike ``poll``)."""
        ...

    @property
    def in_flight(self) -> BatchesInFlight:
        """The batches handed to Spark and not yet seen committed."""
        ...

    def committed_offsets(self) -> dict[TopicPartition, int]:
        """The group's committed offsets."""
        ...

    def group_members(self) -> frozenset[str]:
        """The ids of the group's members (one that left or expired is not among them)."""
        ...

    #: Called with this member's offsets once the group log holds them, whoever wrote them
    #: (its own commits, the group's fold of its commit object, the progress listener).
    on_durable: Callable[[dict[TopicPartition, int]], None] | None

    def commit(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        batch_generation: int,
        batch_member: str,
        release: Iterable[TopicPartition] = (),
    ) -> Holdings:
        """Commit a completed batch's end offsets and release revoked partitions."""
        ...

    def close(self) -> None:
        """Leave (or stay, for a static member) and stop; idempotent."""
        ...
