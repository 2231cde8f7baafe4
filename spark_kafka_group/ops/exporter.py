"""``kafka-group exporter``: groups' lag in Prometheus, under the names operators chart.

Operators chart Kafka consumer lag with kafka_exporter, kafka-lag-exporter or Burrow, none of
which can read a group log, so this serves their series with their names and labels:

- kafka_exporter's: ``kafka_consumergroup_current_offset``, ``..._current_offset_sum``,
  ``..._lag``, ``..._lag_sum``, ``..._members`` (label ``consumergroup``), and its topic
  series ``kafka_topic_partitions``, ``kafka_topic_partition_current_offset`` (the log end)
  and ``kafka_topic_partition_oldest_offset`` (the log start), for the groups' topics;
- kafka-lag-exporter's: ``kafka_consumergroup_group_lag`` and ``..._group_lag_seconds`` per
  partition, with the owner's labels (``consumer_id``, ``member_host``, ``client_id``), and
  per group ``..._group_max_lag``, ``..._group_max_lag_seconds``, ``..._group_sum_lag``,
  ``..._group_topic_sum_lag`` (label ``group``, and ``cluster_name``);
- Burrow's partition status (OK, STALL, STOP, REWIND: :mod:`.status`) as
  ``spark_kafka_group_partition_status``, with each partition's commit age, and the group's
  own figures (members, generation, rebalances, state) under ``spark_kafka_group_``.

Lag in seconds is measured from the timestamp of the first unread record
(:mod:`.record_times`).

Collected at scrape time (a custom collector, as kafka_exporter does), through
:func:`~spark_kafka_group.ops.admin.describe_existing_group` and
:func:`~spark_kafka_group.ops.lag.with_lag`, the code behind ``kafka-group describe``, so the
two never disagree. Within ``cache_s`` of a collection, scrapes are answered from it without
reading the store or the broker (several Prometheus servers, or a short scrape interval, cost
one read per window). A store or broker that cannot be reached is a figure
(``spark_kafka_group_scrape_success`` 0, ``..._scrape_errors_total``) and one log line per
failed read, never an exception out of the collector:

- the store fails (listing the groups, or reading one group's log): that group serves no
  figures but its ``scrape_success{source="store"}`` 0; the other groups are served;
- the broker fails: the group's own figures (offsets, members, generation, state) are still
  served, since they come from the store, but no lag, and ``scrape_success{source="broker"}``
  is 0.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry

from spark_kafka_group.errors import KafkaGroupError
from spark_kafka_group.group import GroupDescription, GroupState, SystemClock, TopicPartition
from spark_kafka_group.group.timer import Clock
from spark_kafka_group.ops.admin import describe_existing_group
from spark_kafka_group.ops.lag import GroupLag, partitions_of, with_lag
from spark_kafka_group.ops.record_times import first_unread_timestamps
from spark_kafka_group.ops.status import CommitSighting, PartitionStatus, partition_status
from spark_kafka_group.store import list_groups
from spark_kafka_group.store.errors import describe_error

log = logging.getLogger(__name__)

#: kafka_exporter's default port is 9308; this exporter serves the same metrics.
DEFAULT_PORT = 9308
PREFIX = "spark_kafka_group_"
SOURCES = ("store", "broker")
#: Scrapes within this many seconds of a collection are answered from it.
DEFAULT_CACHE_S = 10.0
#: A partition with lag whose committed offset stays put this long is STALL or STOP.
DEFAULT_STALL_AFTER_S = 300.0


@dataclass
class _BrokerView:
    """What one collection read from the cluster, for every group's partitions at once."""

    log_start: dict[TopicPartition, int] = field(default_factory=dict)
    log_end: dict[TopicPartition, int] = field(default_factory=dict)
    #: Partition count of each topic the groups read.
    partitions: dict[str, int] = field(default_factory=dict)
    #: Timestamp (ms) of the first unread record of each lagging partition.
    first_unread_ms: dict[tuple[str, TopicPartition], int] = field(default_factory=dict)


class GroupLagCollector:
    """A Prometheus collector of groups' lag, figured at most once per cache window.

    ``groups``: the groups to serve (None: every group in ``store``, listed at each
    collection). ``clock``: the exporter's (descriptions, ages, lag in seconds, the cache
    window). ``cache_s``: how long a collection answers scrapes (0: every scrape collects).
    ``stall_after_s``: see :func:`~spark_kafka_group.ops.status.partition_status`.
    ``cluster_name``: kafka-lag-exporter's ``cluster_name`` label.
    """

    def __init__(
        self,
        store: str,
        *,
        groups: Sequence[str] | None = None,
        bootstrap_servers: str | None = None,
        client_conf: Mapping[str, str] | None = None,
        storage_options: Mapping[str, str] | None = None,
        clock: Clock | None = None,
        cache_s: float = DEFAULT_CACHE_S,
        stall_after_s: float = DEFAULT_STALL_AFTER_S,
        cluster_name: str = "default",
    ) -> None:
        self.store = store
        self.groups = list(groups) if groups else None
        self.bootstrap_servers = bootstrap_servers
        self.client_conf = dict(client_conf or {})
        self.storage_options = dict(storage_options) if storage_options else None
        self.clock: Clock = clock or SystemClock()
        self.cache_ms = max(0, int(cache_s * 1000))
        self.stall_after_ms = max(0, int(stall_after_s * 1000))
        self.cluster_name = cluster_name
        #: How many collections read the store (scrapes answered from the cache do not).
        self.collections = 0
        self._errors = dict.fromkeys(SOURCES, 0)
        self._cached: tuple[int, list[Metric]] | None = None
        # Committed offsets seen in the last window, per (group, partition): REWIND.
        self._sightings: dict[tuple[str, TopicPartition], deque[CommitSighting]] = {}
        self._lock = threading.Lock()  # scrapes may run on several server threads

    def describe(self) -> list[Metric]:
        """Nothing: registering must not scrape (the registry would otherwise call collect)."""
        return []

    def _failed(self, source: str, what: str, exc: BaseException) -> None:
        self._errors[source] += 1
        log.warning("scrape of %s failed: %s", what, describe_error(exc))

    def collect(self) -> Iterable[Metric]:
        with self._lock:  # one collection at a time; the others wait and share it
            now = self.clock.monotonic_ms()
            if self._cached is not None and now - self._cached[0] < self.cache_ms:
                return self._cached[1]
            metrics = self._collect()
            self._cached = (now, metrics)
            return metrics

    def _collect(self) -> list[Metric]:
        self.collections += 1
        m = _Families()
        described: list[GroupDescription] = []
        for group_id in self._group_ids(m):
            group = self._describe(group_id, m)
            if group is not None:
                described.append(group)
        view = self._read_broker(described, m)
        now_ms = self.clock.now_ms()
        for group in described:
            report = (
                with_lag(group, log_end=view.log_end)
                if view is not None and group.group_id not in m.broker_failed
                else with_lag(group)
            )
            self._add_group(m, group, report, view, now_ms)
        if view is not None:
            _add_topics(m, view)
        errors = CounterMetricFamily(
            PREFIX + "scrape_errors",
            "Failed reads of the group store or the Kafka cluster since the exporter started.",
            labels=["source"],
        )
        for source in SOURCES:
            errors.add_metric([source], self._errors[source])
        return [*m.all(), errors]

    def _group_ids(self, m: _Families) -> list[str]:
        if self.groups is not None:
            return self.groups
        try:
            found = list_groups(self.store, storage_options=self.storage_options)
        except Exception as exc:
            self._failed("store", f"the group store {self.store}", exc)
            m.list_success.add_metric([], 0)
            return []
        m.list_success.add_metric([], 1)
        return found

    def _describe(self, group_id: str, m: _Families) -> GroupDescription | None:
        try:
            group = describe_existing_group(
                self.store,
                group_id,
                storage_options=self.storage_options,
                now_ms=self.clock.now_ms(),
            )
        except Exception as exc:  # this group only: the others are still served
            self._failed("store", f"group {group_id} in {self.store}", exc)
            m.success.add_metric([group_id, "store"], 0)
            return None
        m.success.add_metric([group_id, "store"], 1)
        return group

    def _read_broker(self, groups: list[GroupDescription], m: _Families) -> _BrokerView | None:
        """Log start and end offsets of every group's topics, and the first unread record's
        timestamp of every lagging partition, in one client."""
        if not self.bootstrap_servers or not groups:
            return None
        from spark_kafka_group.kafka.cluster import KafkaCluster

        view = _BrokerView()
        try:
            with KafkaCluster(self.bootstrap_servers, client_conf=self.client_conf) as cluster:
                md = cluster.metadata()
                wanted = {tp.topic for g in groups for tp in partitions_of(g)}
                view.partitions = {
                    t: len(meta.partitions) for t, meta in md.topics.items() if t in wanted
                }
                tps = [TopicPartition(t, p) for t, n in view.partitions.items() for p in range(n)]
                if tps:
                    view.log_start, view.log_end = cluster.earliest_and_latest_offsets(tps)
        except Exception as exc:
            for g in groups:
                m.success.add_metric([g.group_id, "broker"], 0)
                m.broker_failed.add(g.group_id)
            self._failed("broker", "the log offsets of the groups' topics", exc)
            return None
        for g in groups:
            m.success.add_metric([g.group_id, "broker"], 1)
        positions = {
            (g.group_id, tp): o.offset
            for g in groups
            for tp, o in g.offsets.items()
            if o.offset < view.log_end.get(tp, -1)
        }
        try:
            for offset_set in _distinct_positions(positions):
                times = first_unread_timestamps(
                    self.bootstrap_servers, self.client_conf, offset_set
                )
                for (g_id, tp), o in positions.items():
                    if offset_set.get(tp) == o and tp in times:
                        view.first_unread_ms[(g_id, tp)] = times[tp]
        except Exception as exc:  # lag in records is still served
            self._failed("broker", "the timestamps of the first unread records", exc)
        return view

    def _add_group(
        self,
        m: _Families,
        group: GroupDescription,
        report: GroupLag,
        view: _BrokerView | None,
        now_ms: int,
    ) -> None:
        g = group.group_id
        m.members.add_metric([g], len(group.members))
        m.live_members.add_metric([g], sum(1 for member in group.members if member.live))
        m.generation.add_metric([g], group.generation)
        m.rebalances.add_metric([g], group.generation)
        for state in GroupState:
            m.state.add_metric([g, state.value], 1 if group.state is state else 0)
        members = {member.member_id: member for member in group.members}
        lag_sum: dict[str, int] = {}
        offset_sum: dict[str, int] = {}
        lags: list[int] = []
        lag_seconds: list[float] = []
        for p in report.partitions:
            tp = TopicPartition(p.topic, p.partition)
            labels = [g, p.topic, str(p.partition)]
            owner = members.get(p.owner) if p.owner else None
            owner_labels = [
                owner.member_id if owner else "",
                owner.client_host if owner else "",
                owner.client_id if owner else "",
            ]
            lag_labels = [self.cluster_name, g, p.topic, str(p.partition), *owner_labels]
            if p.committed is not None:
                m.current_offset.add_metric(labels, p.committed)
                offset_sum[p.topic] = offset_sum.get(p.topic, 0) + p.committed
                m.group_offset.add_metric(lag_labels, p.committed)
                self._seen(g, tp, CommitSighting(self.clock.monotonic_ms(), p.committed))
            if p.committed_at_ms:
                # The committing member's clock against this one: a figure, not a decision.
                m.partition_commit_age.add_metric(labels, max(0, now_ms - p.committed_at_ms) / 1000)
            if p.lag is not None:
                m.lag.add_metric(labels, p.lag)
                m.group_lag.add_metric(lag_labels, p.lag)
                lag_sum[p.topic] = lag_sum.get(p.topic, 0) + p.lag
                lags.append(p.lag)
                seconds = _lag_seconds(p.lag, view, g, tp, now_ms)
                if seconds is not None:
                    m.group_lag_seconds.add_metric(lag_labels, seconds)
                    lag_seconds.append(seconds)
            status = partition_status(
                now_ms=now_ms,
                lag=p.lag,
                last_moved_ms=p.committed_at_ms,
                owner_live=owner is not None and owner.live,
                window=self._window(g, tp),
                stall_after_ms=self.stall_after_ms,
            )
            for each in PartitionStatus:
                m.status.add_metric([*labels, each.value], 1 if each is status else 0)
        for topic, total in sorted(offset_sum.items()):
            m.current_offset_sum.add_metric([g, topic], total)
        for topic, total in sorted(lag_sum.items()):
            m.lag_sum.add_metric([g, topic], total)
            m.group_topic_sum_lag.add_metric([self.cluster_name, g, topic], total)
        if lags:
            m.group_max_lag.add_metric([self.cluster_name, g], max(lags))
            m.group_sum_lag.add_metric([self.cluster_name, g], sum(lags))
        if lag_seconds:
            m.group_max_lag_seconds.add_metric([self.cluster_name, g], max(lag_seconds))
        newest = max((o.commit_timestamp_ms for o in group.offsets.values()), default=0)
        if newest:
            m.commit_age.add_metric([g], max(0, group.now_ms - newest) / 1000)

    def _seen(self, group_id: str, tp: TopicPartition, sighting: CommitSighting) -> None:
        window = self._sightings.setdefault((group_id, tp), deque())
        window.append(sighting)
        # A rewind is shown for one stall window (and at least two collections).
        while len(window) > 2 and sighting.at_ms - window[0].at_ms > self.stall_after_ms:
            window.popleft()

    def _window(self, group_id: str, tp: TopicPartition) -> list[CommitSighting]:
        return list(self._sightings.get((group_id, tp), ()))


def _distinct_positions(
    positions: Mapping[tuple[str, TopicPartition], int],
) -> list[dict[TopicPartition, int]]:
    """Sets of ``{partition: offset}`` covering every (group, partition) position: one fetch
    per set (groups reading the same partition at different offsets need one set each)."""
    sets: list[dict[TopicPartition, int]] = []
    for (_, tp), offset in sorted(positions.items()):
        for s in sets:
            if s.get(tp, offset) == offset:
                s[tp] = offset
                break
        else:
            sets.append({tp: offset})
    return sets


def _lag_seconds(
    lag: int, view: _BrokerView | None, group_id: str, tp: TopicPartition, now_ms: int
) -> float | None:
    """0 when nothing is left to read, else the age of the first unread record (None: its
    timestamp was not read)."""
    if lag <= 0:
        return 0.0
    if view is None or (group_id, tp) not in view.first_unread_ms:
        return None
    return max(0, now_ms - view.first_unread_ms[(group_id, tp)]) / 1000


def _add_topics(m: _Families, view: _BrokerView) -> None:
    for topic, count in sorted(view.partitions.items()):
        m.topic_partitions.add_metric([topic], count)
    for tp, offset in sorted(view.log_end.items()):
        m.topic_current_offset.add_metric([tp.topic, str(tp.partition)], offset)
    for tp, offset in sorted(view.log_start.items()):
        m.topic_oldest_offset.add_metric([tp.topic, str(tp.partition)], offset)


class _Families:
    """The metric families of one collection."""

    def __init__(self) -> None:
        tp = ["consumergroup", "topic", "partition"]
        #: kafka-lag-exporter's partition labels: the owner's are "" for an unowned partition.
        lag_tp = ["cluster_name", "group", "topic", "partition"]
        lag_tp += ["consumer_id", "member_host", "client_id"]
        self.broker_failed: set[str] = set()
        self.current_offset = GaugeMetricFamily(
            "kafka_consumergroup_current_offset",
            "Current Offset of a ConsumerGroup at Topic/Partition (the committed offset)",
            labels=tp,
        )
        self.current_offset_sum = GaugeMetricFamily(
            "kafka_consumergroup_current_offset_sum",
            "Current Offset of a ConsumerGroup at Topic for all partitions",
            labels=["consumergroup", "topic"],
        )
        self.lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "Current Approximate Lag of a ConsumerGroup at Topic/Partition",
            labels=tp,
        )
        self.lag_sum = GaugeMetricFamily(
            "kafka_consumergroup_lag_sum",
            "Current Approximate Lag of a ConsumerGroup at Topic for all partitions",
            labels=["consumergroup", "topic"],
        )
        self.members = GaugeMetricFamily(
            "kafka_consumergroup_members",
            "Amount of members in a consumer group",
            labels=["consumergroup"],
        )
        self.topic_partitions = GaugeMetricFamily(
            "kafka_topic_partitions", "Number of partitions for this Topic", labels=["topic"]
        )
        self.topic_current_offset = GaugeMetricFamily(
            "kafka_topic_partition_current_offset",
            "Current Offset of a Broker at Topic/Partition (the log end offset)",
            labels=["topic", "partition"],
        )
        self.topic_oldest_offset = GaugeMetricFamily(
            "kafka_topic_partition_oldest_offset",
            "Oldest Offset of a Broker at Topic/Partition (the log start offset)",
            labels=["topic", "partition"],
        )
        self.group_offset = GaugeMetricFamily(
            "kafka_consumergroup_group_offset",
            "Last group consumed offset of a partition",
            labels=lag_tp,
        )
        self.group_lag = GaugeMetricFamily(
            "kafka_consumergroup_group_lag", "Group offset lag of a partition", labels=lag_tp
        )
        self.group_lag_seconds = GaugeMetricFamily(
            "kafka_consumergroup_group_lag_seconds",
            "Group time lag of a partition: the age of its first unread record",
            labels=lag_tp,
        )
        self.group_max_lag = GaugeMetricFamily(
            "kafka_consumergroup_group_max_lag",
            "Max group offset lag",
            labels=["cluster_name", "group"],
        )
        self.group_max_lag_seconds = GaugeMetricFamily(
            "kafka_consumergroup_group_max_lag_seconds",
            "Max group time lag",
            labels=["cluster_name", "group"],
        )
        self.group_sum_lag = GaugeMetricFamily(
            "kafka_consumergroup_group_sum_lag",
            "Sum of group offset lag",
            labels=["cluster_name", "group"],
        )
        self.group_topic_sum_lag = GaugeMetricFamily(
            "kafka_consumergroup_group_topic_sum_lag",
            "Sum of group offset lag across topic partitions",
            labels=["cluster_name", "group", "topic"],
        )
        self.live_members = GaugeMetricFamily(
            PREFIX + "live_members",
            "Members not past their session timeout (the others are expired at the next step)",
            labels=["consumergroup"],
        )
        self.generation = GaugeMetricFamily(
            PREFIX + "generation", "The group's generation id", labels=["consumergroup"]
        )
        self.rebalances = CounterMetricFamily(
            PREFIX + "rebalances",
            "Rebalances the group has completed (each one starts a generation)",
            labels=["consumergroup"],
        )
        self.state = GaugeMetricFamily(
            PREFIX + "state",
            "1 for the group's state (Empty, PreparingRebalance, CompletingRebalance, Stable, "
            "Dead), 0 for the others",
            labels=["consumergroup", "state"],
        )
        self.commit_age = GaugeMetricFamily(
            PREFIX + "newest_commit_age_seconds",
            "Age of the group's newest committed offset (its writer's clock against the "
            "exporter's)",
            labels=["consumergroup"],
        )
        self.partition_commit_age = GaugeMetricFamily(
            PREFIX + "partition_commit_age_seconds",
            "Age of the partition's committed offset: since it last moved (its writer's clock "
            "against the exporter's)",
            labels=tp,
        )
        self.status = GaugeMetricFamily(
            PREFIX + "partition_status",
            "1 for the partition's Burrow-style status (OK, STALL, STOP, REWIND), 0 for the others",
            labels=[*tp, "status"],
        )
        self.success = GaugeMetricFamily(
            PREFIX + "scrape_success",
            "1 if this scrape read the group from its source (store: the group log; broker: "
            "the log end offsets), else 0 and the figures from that source are left out",
            labels=["consumergroup", "source"],
        )
        self.list_success = GaugeMetricFamily(
            PREFIX + "list_success",
            "1 if this scrape listed the groups of the store (only without --group)",
        )

    def all(self) -> list[Metric]:
        families = [v for v in vars(self).values() if isinstance(v, Metric)]
        return [f for f in families if f is not self.list_success or f.samples]


def registry_of(collector: GroupLagCollector) -> CollectorRegistry:
    """A registry serving only ``collector`` (no process metrics: one exporter, one meaning)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def serve(collector: GroupLagCollector, port: int, addr: str = "0.0.0.0") -> tuple[str, int, Any]:
    """Serve ``collector`` at ``http://addr:port/metrics`` on a daemon thread; the address
    bound (``port`` 0 picks a free one) and the thread (join it to serve until interrupted)."""
    from prometheus_client import start_http_server

    try:
        server, thread = start_http_server(port, addr=addr, registry=registry_of(collector))
    except OSError as exc:
        raise KafkaGroupError(
            f"cannot serve metrics on {addr}:{port}: {exc.strerror or exc}; choose another "
            "--port or --addr"
        ) from None
    host, bound = server.server_address[:2]
    return str(host), int(bound), thread
