"""A group as DescribeGroups shows it: what :meth:`GroupCoordinator.describe` returns.

This is the one description of a group. The Python API (``spark_kafka_group.describe_group``),
``kafka-group list`` and ``kafka-group describe`` (which extends it with lag, see
:mod:`spark_kafka_group.ops.lag`) all show this type, and its JSON form is defined here.
Whether a member is live is not decided here: the coordinator fills :attr:`MemberDescription.live`
from the same rule that expires members (:meth:`GroupCoordinator.tick`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_kafka_group.group.errors import GroupError
from spark_kafka_group.group.metadata import (
    OffsetAndMetadata,
    Partitions,
    TopicPartition,
    partition_name,
)
from spark_kafka_group.group.state import GroupState


def _names(partitions: Partitions) -> list[str]:
    """Partitions as Kafka's tools print them: ``topic-partition``."""
    return [partition_name(tp.topic, tp.partition) for tp in sorted(partitions)]


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    generation: int
    assignment: Partitions
    revoking: Partitions
    session_timeout_ms: int = 0
    #: When the member was last known alive: its newest record, or its lease if later
    #: (writer's clock, epoch ms).
    last_seen_ms: int = 0
    #: Not expired at the description's ``now_ms``: the coordinator would not expire it then.
    live: bool = True

    def heartbeat_age_ms(self, now_ms: int) -> int:
        return max(0, now_ms - self.last_seen_ms)

    def to_json(self, now_ms: int) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "instance_id": self.instance_id,
            "client_host": self.client_host,
            "client_id": self.client_id,
            "generation": self.generation,
            "last_heartbeat_age_ms": self.heartbeat_age_ms(now_ms),
            "session_timeout_ms": self.session_timeout_ms,
            "live": self.live,
            "assigned": _names(self.assignment),
            "revoking": _names(self.revoking),
        }


@dataclass(frozen=True)
class GroupDescription:
    """The group as its log says at ``now_ms``. A group without a log is ``Dead`` with
    ``version`` -1, as Kafka describes an unknown group."""

    error: GroupError
    group_id: str
    state: GroupState
    protocol_type: str | None
    protocol: str | None
    generation: int
    leader: str | None
    #: The time the description was made for (liveness and heartbeat ages are as of then).
    now_ms: int
    members: tuple[MemberDescription, ...] = ()
    offsets: Mapping[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    #: Topic -> partition count the leader's last assignment used (None before any).
    assignment_snapshot: Mapping[str, int] | None = None
    #: Timestamp of the newest record folded (epoch ms; 0 for a missing log).
    last_record_ms: int = 0
    #: Where the group log is, and the log version the description was folded from.
    uri: str = ""
    version: int = -1

    @property
    def committed(self) -> dict[TopicPartition, int]:
        """Committed offset of each partition."""
        return {tp: o.offset for tp, o in self.offsets.items()}

    def to_json(self) -> dict[str, Any]:
        """What ``kafka-group describe --json`` prints about the group (lag adds partitions)."""
        return {
            "group_id": self.group_id,
            "uri": self.uri,
            "version": self.version,
            "state": self.state.value,
            "generation": self.generation,
            "protocol": self.protocol,
            "leader": self.leader,
            "now_ms": self.now_ms,
            "members": [m.to_json(self.now_ms) for m in self.members],
            "committed": [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "offset": o.offset,
                    "committed_at_ms": o.commit_timestamp_ms,
                }
                for tp, o in sorted(self.offsets.items())
            ],
        }

    def summary_json(self) -> dict[str, Any]:
        """One group of ``kafka-group list --json`` (as ``kafka-consumer-groups --list
        --state``)."""
        return {
            "group": self.group_id,
            "state": self.state.value,
            "members": len(self.members),
            "generation": self.generation,
            "protocol": self.protocol,
            "partitions_committed": len(self.offsets),
            "version": self.version,
            "last_record_ms": self.last_record_ms,
            "uri": self.uri,
        }
