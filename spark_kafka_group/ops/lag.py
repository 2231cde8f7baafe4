"""A group's description with log end offsets and lag: what ``kafka-group describe`` shows.

Lag of a partition = log end offset (high watermark, from ListOffsets) - committed offset in
the group log, as ``kafka-consumer-groups --describe`` computes it. Partitions listed: every
partition with a committed offset, every partition a member holds and every partition of the
topics in the leader's last assignment snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from spark_kafka_group.errors import TopicNotFoundError
from spark_kafka_group.group import GroupDescription, TopicPartition
from spark_kafka_group.ops.admin import describe_existing_group

if TYPE_CHECKING:
    from spark_kafka_group.kafka.cluster import KafkaCluster


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    owner: str | None
    #: "assigned", "revoking" or None (no owner).
    owner_state: str | None
    committed: int | None
    committed_at_ms: int | None
    log_end: int | None
    lag: int | None


@dataclass(frozen=True)
class GroupLag:
    """A group's description extended with the log end offset and lag of its partitions."""

    group: GroupDescription
    partitions: tuple[PartitionLag, ...] = ()
    #: Sum of the known lags (None if no log end offsets were asked for).
    total_lag: int | None = None
    #: Topics the cluster does not have any more (log end unknown).
    missing_topics: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """What ``kafka-group describe --json`` prints: the group's JSON form, whose committed
        offsets are shown in the partition rows here (with their lag)."""
        group = {k: v for k, v in self.group.to_json().items() if k != "committed"}
        return {
            **group,
            "partitions": [asdict(p) for p in self.partitions],
            "total_lag": self.total_lag,
            "missing_topics": list(self.missing_topics),
        }


def describe_with_lag(
    store: str,
    group_id: str,
    *,
    bootstrap_servers: str | None = None,
    client_conf: Mapping[str, str] | None = None,
    storage_options: Mapping[str, str] | None = None,
    now_ms: int | None = None,
    timeout_s: float | None = None,
) -> GroupLag:
    """The group (members, owners, committed offsets) and, with ``bootstrap_servers``, the log
    end offset and lag of every partition."""
    group = describe_existing_group(store, group_id, storage_options=storage_options, now_ms=now_ms)
    return with_lag(
        group, bootstrap_servers=bootstrap_servers, client_conf=client_conf, timeout_s=timeout_s
    )


def owners_of(group: GroupDescription) -> dict[TopicPartition, tuple[str, str]]:
    """``{partition: (member id, "assigned" or "revoking")}`` of the group's members."""
    owners: dict[TopicPartition, tuple[str, str]] = {}
    for m in group.members:
        for tp in m.revoking:
            owners[tp] = (m.member_id, "revoking")
        for tp in m.assignment:
            owners[tp] = (m.member_id, "assigned")
    return owners


def partitions_of(group: GroupDescription) -> list[TopicPartition]:
    """The partitions ``describe`` lists: committed, owned, or of the topics in the leader's
    last assignment snapshot. A group without members reads no topic: there the snapshot
    adds only topics it still has committed offsets of (not one whose offsets were deleted)."""
    partitions: set[TopicPartition] = set(group.offsets) | set(owners_of(group))
    committed_topics = {tp.topic for tp in group.offsets}
    for topic, count in (group.assignment_snapshot or {}).items():
        if group.members or topic in committed_topics:
            partitions.update(TopicPartition(topic, p) for p in range(count))
    return sorted(partitions)


def with_lag(
    group: GroupDescription,
    *,
    bootstrap_servers: str | None = None,
    client_conf: Mapping[str, str] | None = None,
    log_end: Mapping[TopicPartition, int] | None = None,
    missing_topics: Sequence[str] = (),
    timeout_s: float | None = None,
) -> GroupLag:
    """:func:`describe_with_lag` of a group already described (the exporter describes first,
    so that a broker it cannot reach still leaves the group's own figures). ``log_end``: log
    end offsets read already (the exporter reads those of every group at once); else they are
    read from ``bootstrap_servers``, if given (``timeout_s``: per request)."""
    owners = owners_of(group)
    partitions = partitions_of(group)
    known = log_end is not None or bool(bootstrap_servers)
    ends: Mapping[TopicPartition, int] = log_end or {}
    missing: list[str] = list(missing_topics)
    if log_end is None and bootstrap_servers:
        ends, missing = log_end_offsets(
            bootstrap_servers, client_conf, partitions, timeout_s=timeout_s
        )
    rows = []
    for tp in partitions:
        owner = owners.get(tp)
        offset = group.offsets.get(tp)
        committed = None if offset is None else offset.offset
        end = ends.get(tp)
        rows.append(
            PartitionLag(
                topic=tp.topic,
                partition=tp.partition,
                owner=owner[0] if owner else None,
                owner_state=owner[1] if owner else None,
                committed=committed,
                committed_at_ms=None if offset is None else offset.commit_timestamp_ms,
                log_end=end,
                lag=max(0, end - committed) if end is not None and committed is not None else None,
            )
        )
    total = sum(r.lag for r in rows if r.lag is not None) if known else None
    return GroupLag(
        group=group,
        partitions=tuple(rows),
        total_lag=total,
        missing_topics=tuple(sorted(set(missing) & {tp.topic for tp in partitions})),
    )


def open_cluster(
    bootstrap_servers: str,
    client_conf: Mapping[str, str] | None = None,
    *,
    timeout_s: float | None = None,
) -> KafkaCluster:
    """A client of the cluster for an operator command. ``timeout_s`` (the CLI's
    ``--timeout``): one attempt of that long per request, as Kafka's tools wait; default: the
    source's attempts and timeouts."""
    from spark_kafka_group.kafka.cluster import KafkaCluster
    from spark_kafka_group.kafka.config import OffsetFetchRetry

    if timeout_s is None:
        return KafkaCluster(bootstrap_servers, client_conf=client_conf)
    return KafkaCluster(
        bootstrap_servers,
        client_conf=client_conf,
        attempt_timeout_s=timeout_s,
        retry=OffsetFetchRetry(num_retries=1),
    )


def log_end_offsets(
    bootstrap_servers: str,
    client_conf: Mapping[str, str] | None,
    partitions: Sequence[TopicPartition],
    *,
    timeout_s: float | None = None,
) -> tuple[dict[TopicPartition, int], list[str]]:
    """High watermarks; topics that no longer exist are returned as missing, not raised.
    ``timeout_s``: as :func:`open_cluster`'s."""
    with open_cluster(bootstrap_servers, client_conf, timeout_s=timeout_s) as cluster:
        cluster.metadata()  # an unreachable cluster fails fast here, with the reason
        if not partitions:
            return {}, []
        try:
            return cluster.latest_offsets(partitions), []
        except TopicNotFoundError:
            pass
        md = cluster.metadata()
        counts = {name: len(meta.partitions) for name, meta in md.topics.items()}
        present = [tp for tp in partitions if tp.partition < counts.get(tp.topic, 0)]
        missing = sorted({t for t, _ in partitions if t not in counts})
        return cluster.latest_offsets(present), missing
