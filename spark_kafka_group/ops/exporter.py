"""``kafka-group exporter``: groups' lag in Prometheus, under kafka_exporter's names.

Operators chart Kafka consumer lag with kafka_exporter, Burrow or kafka-lag-exporter, none of
which can read a group log, so this serves the figures kafka_exporter users already chart, with
its metric names and labels (``kafka_consumergroup_current_offset``, ``..._lag``, ``..._lag_sum``,
``..._members``), plus the group's own figures under ``spark_kafka_group_``.

Collected at scrape time (a custom collector, as kafka_exporter does): every scrape describes
each group through :func:`~spark_kafka_group.admin.describe_existing_group` and
:func:`~spark_kafka_group.ops.lag.with_lag`, the code behind ``kafka-group describe``, so the
two never disagree and nothing is served from an earlier scrape. A store or broker that cannot
be reached is a figure (``spark_kafka_group_scrape_success`` 0, ``..._scrape_errors_total``)
and one log line per failed scrape, never an exception out of the collector:

- the store fails (listing the groups, or reading one group's log): that group serves no
  figures but its ``scrape_success{source="store"}`` 0;
- the broker fails: the group's own figures (offsets, members, generation, state) are still
  served, since they come from the store, but no lag, and ``scrape_success{source="broker"}``
  is 0.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry

from spark_kafka_group.admin import describe_existing_group
from spark_kafka_group.errors import KafkaGroupError
from spark_kafka_group.group import GroupDescription, GroupState, SystemClock
from spark_kafka_group.ops.lag import GroupLag, with_lag
from spark_kafka_group.store import list_groups
from spark_kafka_group.store.errors import describe_error

log = logging.getLogger(__name__)

#: kafka_exporter's default port is 9308; this exporter serves the same metrics.
DEFAULT_PORT = 9308
PREFIX = "spark_kafka_group_"
SOURCES = ("store", "broker")


class GroupLagCollector:
    """A Prometheus collector of groups' lag, figured at each scrape.

    ``groups``: the groups to serve (None: every group in ``store``, listed at each scrape).
    ``now_ms``: the clock of the descriptions (liveness, commit ages).
    """

    def __init__(
        self,
        store: str,
        *,
        groups: Sequence[str] | None = None,
        bootstrap_servers: str | None = None,
        client_conf: Mapping[str, str] | None = None,
        storage_options: Mapping[str, str] | None = None,
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        self.store = store
        self.groups = list(groups) if groups else None
        self.bootstrap_servers = bootstrap_servers
        self.client_conf = dict(client_conf or {})
        self.storage_options = dict(storage_options) if storage_options else None
        self._now_ms = now_ms or SystemClock().now_ms
        self._errors = dict.fromkeys(SOURCES, 0)
        self._lock = threading.Lock()  # scrapes may run on several server threads

    def describe(self) -> list[Metric]:
        """Nothing: registering must not scrape (the registry would otherwise call collect)."""
        return []

    def _failed(self, source: str, what: str, exc: BaseException) -> None:
        with self._lock:
            self._errors[source] += 1
        log.warning("scrape of %s failed: %s", what, describe_error(exc))

    def collect(self) -> Iterable[Metric]:
        m = _Families()
        listed = self._group_ids(m)
        for group_id in listed:
            self._collect_group(group_id, m)
        errors = CounterMetricFamily(
            PREFIX + "scrape_errors",
            "Failed reads of the group store or the Kafka cluster since the exporter started.",
            labels=["source"],
        )
        with self._lock:
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

    def _collect_group(self, group_id: str, m: _Families) -> None:
        try:
            group = describe_existing_group(
                self.store, group_id, storage_options=self.storage_options, now_ms=self._now_ms()
            )
        except Exception as exc:
            self._failed("store", f"group {group_id} in {self.store}", exc)
            m.success.add_metric([group_id, "store"], 0)
            return
        m.success.add_metric([group_id, "store"], 1)
        report: GroupLag | None = None
        if self.bootstrap_servers:
            try:
                report = with_lag(
                    group, bootstrap_servers=self.bootstrap_servers, client_conf=self.client_conf
                )
            except Exception as exc:
                self._failed("broker", f"the log end offsets of group {group_id}", exc)
                m.success.add_metric([group_id, "broker"], 0)
            else:
                m.success.add_metric([group_id, "broker"], 1)
        if report is None:
            report = with_lag(group)  # the group's own figures, without lag
        _add_group(m, group, report)


def _add_group(m: _Families, group: GroupDescription, report: GroupLag) -> None:
    g = group.group_id
    m.members.add_metric([g], len(group.members))
    m.live_members.add_metric([g], sum(1 for member in group.members if member.live))
    m.generation.add_metric([g], group.generation)
    m.rebalances.add_metric([g], group.generation)
    for state in GroupState:
        m.state.add_metric([g, state.value], 1 if group.state is state else 0)
    lag_sum: dict[str, int] = {}
    offset_sum: dict[str, int] = {}
    for p in report.partitions:
        labels = [g, p.topic, str(p.partition)]
        if p.committed is not None:
            m.current_offset.add_metric(labels, p.committed)
            offset_sum[p.topic] = offset_sum.get(p.topic, 0) + p.committed
        if p.lag is not None:
            m.lag.add_metric(labels, p.lag)
            lag_sum[p.topic] = lag_sum.get(p.topic, 0) + p.lag
    for topic, total in sorted(offset_sum.items()):
        m.current_offset_sum.add_metric([g, topic], total)
    for topic, total in sorted(lag_sum.items()):
        m.lag_sum.add_metric([g, topic], total)
    newest = max((o.commit_timestamp_ms for o in group.offsets.values()), default=0)
    if newest:
        # The committing member's clock against this one: a figure to watch, not a decision.
        m.commit_age.add_metric([g], max(0, group.now_ms - newest) / 1000)


class _Families:
    """The metric families of one scrape."""

    def __init__(self) -> None:
        tp = ["consumergroup", "topic", "partition"]
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
        return [
            self.current_offset,
            self.current_offset_sum,
            self.lag,
            self.lag_sum,
            self.members,
            self.live_members,
            self.generation,
            self.rebalances,
            self.state,
            self.commit_age,
            self.success,
            *([self.list_success] if self.list_success.samples else []),
        ]


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
