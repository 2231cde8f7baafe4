"""``kafka-group delete-offsets``: drop a group's committed offsets of a topic it no longer
reads (``kafka-consumer-groups --delete-offsets``), so that its stale lag leaves ``describe``
and the exporter.

The partitions are Kafka's: every partition of ``--topic T`` on the cluster, or the ones
``--topic T:P,P`` lists. One difference: a topic deleted from the cluster keeps its committed
offsets here (a Kafka broker drops a deleted topic's offsets itself; a group log has nobody to
do it), so the partitions the group has committed count too, and deleting them is how they go.
A partition neither on the cluster nor committed is UNKNOWN_TOPIC_OR_PARTITION, as Kafka's.

The decision is the protocol's (:func:`spark_kafka_group.group.offsets.delete_offsets`),
appended by compare-and-swap like every other write: a member that joins with the topic in
its subscription meanwhile makes the append conflict, and the deletion is decided again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from spark_kafka_group.group import GroupCoordinator, GroupError, GroupRecord, TopicPartition
from spark_kafka_group.group.offsets import delete_offsets as delete_offsets_handler
from spark_kafka_group.group.timer import Clock
from spark_kafka_group.member.log_client import GroupLogClient
from spark_kafka_group.ops.admin import expire_stopped_members
from spark_kafka_group.ops.reset import TopicSpec

#: The partition-level errors here: the protocol's, and the cluster's for a partition that
#: neither exists nor has a committed offset (Kafka's name).
UNKNOWN_TOPIC_OR_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"

#: The partition of a ``--topic T`` row when T is unknown (Kafka prints it as ``-``).
NO_PARTITION = -1


@dataclass(frozen=True)
class OffsetDeletion:
    """What ``delete-offsets`` did to one group."""

    group_id: str
    #: Each partition asked for, and its error name ("NONE": its committed offset is gone, or
    #: it had none). A topic unknown as a whole has one row, partition :data:`NO_PARTITION`.
    statuses: Mapping[TopicPartition, str]
    #: Committed offsets removed.
    deleted: frozenset[TopicPartition] = frozenset()
    #: Topic -> why its partitions were refused (names the members reading it, and the fix).
    refusals: Mapping[str, str] = field(default_factory=dict)
    #: Members expired on the way (past their session timeout).
    expired: int = 0

    @property
    def failed(self) -> bool:
        return any(status != GroupError.NONE.value for status in self.statuses.values())


def partitions_to_delete(
    specs: Sequence[TopicSpec],
    on_cluster: Mapping[str, int],
    committed: Iterable[TopicPartition],
) -> tuple[list[TopicPartition], list[TopicPartition]]:
    """The partitions ``--topic`` names (``on_cluster``: topic -> partition count of the named
    topics the cluster has), and those unknown: neither on the cluster nor committed (a whole
    unknown topic as partition :data:`NO_PARTITION`)."""
    committed_by_topic: dict[str, set[int]] = {}
    for tp in committed:
        committed_by_topic.setdefault(tp.topic, set()).add(tp.partition)
    asked: set[TopicPartition] = set()
    unknown: set[TopicPartition] = set()
    for spec in specs:
        count = on_cluster.get(spec.topic, 0)
        mine = committed_by_topic.get(spec.topic, set())
        if spec.partitions is None:
            found = set(range(count)) | mine
            if not found:
                unknown.add(TopicPartition(spec.topic, NO_PARTITION))
            asked.update(TopicPartition(spec.topic, p) for p in found)
            continue
        for p in spec.partitions:
            tp = TopicPartition(spec.topic, p)
            (asked if p < count or p in mine else unknown).add(tp)
    return sorted(asked), sorted(unknown)


def delete_offsets(
    store: str,
    group_id: str,
    partitions: Sequence[TopicPartition],
    *,
    unknown: Sequence[TopicPartition] = (),
    storage_options: Mapping[str, str] | None = None,
    clock: Clock | None = None,
) -> OffsetDeletion:
    """Delete ``group_id``'s committed offsets of ``partitions`` (``unknown``: partitions
    reported UNKNOWN_TOPIC_OR_PARTITION without asking the group). Members this process sees
    silent past their session timeout are expired first; a topic a live member reads is
    refused, and the others are deleted."""
    statuses: dict[TopicPartition, str] = dict.fromkeys(unknown, UNKNOWN_TOPIC_OR_PARTITION)
    if not partitions:
        return OffsetDeletion(group_id, statuses)
    client = GroupLogClient(
        store, group_id, storage_options=storage_options, create=False, clock=clock
    )
    topics = {tp.topic for tp in partitions}
    group = client.fold().group
    if any(group.members_reading(t) for t in topics):
        # Watched on this clock before being expired, as a reset's members are; only when a
        # member reads one of the topics (else nothing would be refused).
        expire_stopped_members(client)

    def decide(work: GroupCoordinator, now: int) -> tuple[list[GroupRecord], OffsetDeletion]:
        expired = work.tick(now, client.sightings())
        work.apply_all(expired)
        had = set(work.group.offsets)
        records, response = delete_offsets_handler(work.group, partitions, now)
        errors = response.partition_errors
        done = OffsetDeletion(
            group_id,
            {**statuses, **{tp: e.value for tp, e in errors.items()}},
            deleted=frozenset(tp for tp in response.deleted if tp in had),
            refusals=dict(response.refusals),
            expired=len(expired),
        )
        return expired + records, done

    return client.transact(decide)
