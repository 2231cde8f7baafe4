"""The driver-side group member of a ``kafka-group`` query, and the group-log client that
every writer of the group log (members, the CLI, the progress listener) goes through."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.member.fixed import FixedAssignmentMember
from spark_kafka_group.member.log_client import GroupLogClient
from spark_kafka_group.member.member import GroupMember, SubscriptionSpec
from spark_kafka_group.member.view import Holdings, Member

if TYPE_CHECKING:
    from spark_kafka_group.kafka import KafkaCluster
    from spark_kafka_group.options import SourceOptions

__all__ = [
    "FixedAssignmentMember",
    "GroupLogClient",
    "GroupMember",
    "Holdings",
    "Member",
    "SubscriptionSpec",
    "member_for_source",
]


def member_for_source(opts: SourceOptions, cluster: KafkaCluster) -> Member:
    """The member of a ``kafka-group`` query: a group member, or a fixed ``assign`` set."""
    if opts.assign is not None:
        cluster.topic_partitions(assign=opts.assign)  # clear error for a missing partition
        partitions = [TopicPartition(t, p) for t, ps in opts.assign.items() for p in ps]
        return FixedAssignmentMember(opts.group, partitions)
    return GroupMember.for_source(opts, cluster=cluster)
