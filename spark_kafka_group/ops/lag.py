"""A group's description with log end offsets and lag: what ``kafka-group describe`` shows.

Lag of a partition = log end offset (high watermark, from ListOffsets) - committed offset in
the group log, as ``kafka-consumer-groups --describe`` computes it. Partitions listed: every
partition with a committed offset, every partition a member holds and every partition of the
topics in the leader's last assignment snapshot.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from spark_kafka_group.admin import GroupInfo, MemberInfo, describe_group
from spark_kafka_group.errors import GroupStoreError, TopicNotFoundError
from spark_kafka_group.store import GroupLogNotFoundError

TP = tuple[str, int]


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
class MemberReport:
    member_id: str
    instance_id: str | None
    client_host: str
    client_id: str
    generation: int
    last_heartbeat_age_ms: int
    session_timeout_ms: int
    live: bool
    assigned: tuple[TP, ...]
    revoking: tuple[TP, ...]


@dataclass(frozen=True)
class GroupReport:
    group_id: str
    uri: str
    version: int
    state: str
    generation: int
    protocol: str | None
    leader: str | None
    now_ms: int
    members: tuple[MemberReport, ...] = ()
    partitions: tuple[PartitionLag, ...] = ()
    #: Sum of the known lags (None if no log end offsets were asked for).
    total_lag: int | None = None
    #: Topics the cluster does not have any more (log end unknown).
    missing_topics: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        for m in d["members"]:
            m["assigned"] = [f"{t}-{p}" for t, p in m["assigned"]]
            m["revoking"] = [f"{t}-{p}" for t, p in m["revoking"]]
        d["missing_topics"] = list(d["missing_topics"])
        return d


def group_info_or_fail(
    store: str, group_id: str, storage_options: Mapping[str, str] | None = None
) -> GroupInfo:
    """:func:`describe_group`, but a group without a log is an error that says so."""
    info = describe_group(store, group_id, storage_options=storage_options)
    if info.version < 0:
        from spark_kafka_group.store import list_groups

        try:
            known = list_groups(store, storage_options=storage_options)
        except GroupStoreError:
            known = []
        shown = ", ".join(known[:20]) + (" ..." if len(known) > 20 else "")
        raise GroupLogNotFoundError(
            f"There is no group log for group {group_id!r} at {info.uri}. Groups in store "
            f"{store!r}: {shown or 'none'}. Check --store and --group (the query's "
            "groupStore and groupId options)."
        )
    return info


def _member_report(m: MemberInfo, now_ms: int) -> MemberReport:
    age = max(0, now_ms - m.last_seen_ms)
    return MemberReport(
        member_id=m.member_id,
        instance_id=m.instance_id,
        client_host=m.client_host,
        client_id=m.client_id,
        generation=m.generation,
        last_heartbeat_age_ms=age,
        session_timeout_ms=m.session_timeout_ms,
        live=m.session_timeout_ms <= 0 or age <= m.session_timeout_ms,
        assigned=tuple(m.assignment),
        revoking=tuple(m.revoking),
    )


def describe_with_lag(
    store: str,
    group_id: str,
    *,
    bootstrap_servers: str | None = None,
    client_conf: Mapping[str, str] | None = None,
    storage_options: Mapping[str, str] | None = None,
    now_ms: int | None = None,
) -> GroupReport:
    """The group (members, owners, committed offsets) and, with ``bootstrap_servers``, the log
    end offset and lag of every partition."""
    info = group_info_or_fail(store, group_id, storage_options)
    now = int(time.time() * 1000) if now_ms is None else int(now_ms)
    owners: dict[TP, tuple[str, str]] = {}
    for m in info.members:
        for tp in m.revoking:
            owners[tp] = (m.member_id, "revoking")
        for tp in m.assignment:
            owners[tp] = (m.member_id, "assigned")
    partitions: set[TP] = set(info.committed) | set(owners)
    for topic, count in (info.assignment_snapshot or {}).items():
        partitions.update((topic, p) for p in range(count))
    log_end: dict[TP, int] = {}
    missing: list[str] = []
    if bootstrap_servers:
        log_end, missing = log_end_offsets(bootstrap_servers, client_conf, sorted(partitions))
    rows = []
    for tp in sorted(partitions):
        owner = owners.get(tp)
        committed = info.committed.get(tp)
        end = log_end.get(tp)
        rows.append(
            PartitionLag(
                topic=tp[0],
                partition=tp[1],
                owner=owner[0] if owner else None,
                owner_state=owner[1] if owner else None,
                committed=committed,
                committed_at_ms=info.committed_at.get(tp) if committed is not None else None,
                log_end=end,
                lag=max(0, end - committed) if end is not None and committed is not None else None,
            )
        )
    total = sum(r.lag for r in rows if r.lag is not None) if bootstrap_servers else None
    return GroupReport(
        group_id=info.group_id,
        uri=info.uri,
        version=info.version,
        state=info.state,
        generation=info.generation,
        protocol=info.protocol,
        leader=info.leader,
        now_ms=now,
        members=tuple(_member_report(m, now) for m in info.members),
        partitions=tuple(rows),
        total_lag=total,
        missing_topics=tuple(missing),
    )


def log_end_offsets(
    bootstrap_servers: str, client_conf: Mapping[str, str] | None, partitions: list[TP]
) -> tuple[dict[TP, int], list[str]]:
    """High watermarks; topics that no longer exist are returned as missing, not raised."""
    from spark_kafka_group.kafka.cluster import KafkaCluster

    with KafkaCluster(bootstrap_servers, client_conf=client_conf) as cluster:
        cluster.metadata()  # an unreachable cluster fails fast here, with the reason
        if not partitions:
            return {}, []
        try:
            return cluster.latest_offsets(partitions), []
        except TopicNotFoundError:
            pass
        md = cluster.metadata()
        counts = {name: len(meta.partitions) for name, meta in md.topics.items()}
        present = [(t, p) for t, p in partitions if p < counts.get(t, 0)]
        missing = sorted({t for t, _ in partitions if t not in counts})
        return cluster.latest_offsets(present), missing
