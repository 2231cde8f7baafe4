"""``kafka-group exporter``: scraped over HTTP, its figures are ``kafka-group describe``'s, and a
store or broker it cannot reach is a figure, never a crash or a stale value."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from spark_kafka_group.group import ManualClock
from spark_kafka_group.ops.exporter import DEFAULT_CACHE_S, GroupLagCollector, serve
from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from tests.integration.cli_support import GroupDriver, run_cli
from tests.prometheus import Samples, named, one, scrape, start_exporter
from tests.streaming import Collected, source_options, start_query


@pytest.fixture
def exporter_process(group_store: str, bootstrap_servers: str, tmp_path: Path) -> Iterator[Any]:
    """Start ``kafka-group exporter`` (the CLI, its own process) for some groups: its URL."""
    started: list[subprocess.Popen[str]] = []

    def start(*groups: str) -> str:
        args = [
            sys.executable,
            "-m",
            "spark_kafka_group.ops.cli",
            "exporter",
            "--store",
            group_store,
        ]
        args += ["--bootstrap-server", bootstrap_servers, "--port", "0", "--addr", "127.0.0.1"]
        args += ["--cache-seconds", "0"]  # compared with describe at the same moment
        for g in groups:
            args += ["--group", g]
        process, url = start_exporter(args)
        started.append(process)
        return url

    yield start
    for process in started:
        process.terminate()
        process.wait(30)


def _stable(report: dict[str, Any]) -> dict[str, Any]:
    """A describe --json without what changes by itself (ages, now)."""
    out = {k: v for k, v in report.items() if k != "now_ms"}
    out["members"] = [
        {k: v for k, v in m.items() if k != "last_heartbeat_age_ms"} for m in report["members"]
    ]
    return out


def _describe(store: str, group: str, bootstrap_servers: str) -> dict[str, Any] | None:
    """``kafka-group describe --json`` (None before the group has a log)."""
    result = run_cli(
        "describe", "--store", store, "--group", group, "--bootstrap-servers",
        bootstrap_servers, "--json",
    )  # fmt: skip
    if "no group log" in result.err:
        return None
    assert result.code == 0, result.err
    return _stable(result.json())


@pytest.mark.spark
@pytest.mark.broker
def test_scraped_figures_are_describes_for_a_group_of_running_queries(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path, exporter_process
) -> None:
    create_topic(bootstrap_servers, topic_name, 3)
    produce_sample(bootstrap_servers, topic_name, partitions=3, per_partition=300)
    group = f"g-exp-{uuid.uuid4().hex[:6]}"
    options = source_options(
        bootstrap_servers, topic_name, group, group_store, maxOffsetsPerTrigger=20
    )
    slow: dict[str, Any] = {"available_now": False, "processing_time": "3 seconds"}
    queries = [
        start_query(spark, options, str(tmp_path / f"ckpt{i}"), Collected(), **slow)
        for i in range(2)
    ]
    url = exporter_process(group)
    try:
        matched = None
        deadline = time.monotonic() + 150
        while matched is None and time.monotonic() < deadline:
            before = _describe(group_store, group, bootstrap_servers)
            samples = scrape(url)
            after = _describe(group_store, group, bootstrap_servers)
            # Compared only when nothing moved during the scrape (between two batches), with
            # both queries in, committed offsets and lag still to go.
            if (
                before is not None
                and before == after
                and before["state"] == "Stable"
                and len(before["members"]) == 2
                and all(p["committed"] is not None for p in before["partitions"])
                and (before["total_lag"] or 0) > 0
            ):
                matched = before, samples
            else:
                time.sleep(0.5)
        assert matched is not None, f"no stable moment with two members and lag: {before}"
    finally:
        for q in queries:
            q.stop()
    described, samples = matched
    g = {"consumergroup": group}
    assert one(samples, "spark_kafka_group_scrape_success", source="store", **g) == 1
    assert one(samples, "spark_kafka_group_scrape_success", source="broker", **g) == 1
    rows = described["partitions"]
    assert len(rows) == 3
    for p in rows:
        labels = {**g, "topic": topic_name, "partition": str(p["partition"])}
        assert one(samples, "kafka_consumergroup_current_offset", **labels) == p["committed"]
        assert one(samples, "kafka_consumergroup_lag", **labels) == p["lag"]
    assert (
        one(samples, "kafka_consumergroup_lag_sum", topic=topic_name, **g)
        == (described["total_lag"])
    )
    assert one(samples, "kafka_consumergroup_current_offset_sum", topic=topic_name, **g) == sum(
        p["committed"] for p in rows
    )
    assert one(samples, "kafka_consumergroup_members", **g) == 2
    assert one(samples, "spark_kafka_group_live_members", **g) == 2
    assert one(samples, "spark_kafka_group_generation", **g) == described["generation"]
    assert one(samples, "spark_kafka_group_rebalances_total", **g) == described["generation"]
    assert one(samples, "spark_kafka_group_state", state="Stable", **g) == 1
    assert sum(named(samples, "spark_kafka_group_state", **g).values()) == 1
    age = one(samples, "spark_kafka_group_newest_commit_age_seconds", **g)
    assert 0 <= age < 120


@pytest.mark.broker
def test_an_unreachable_store_or_broker_is_a_figure_not_a_stale_value(
    bootstrap_servers: str, topic_name: str, group_store: str
) -> None:
    create_topic(bootstrap_servers, topic_name, 2)
    produced = produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=10)
    group = f"g-{uuid.uuid4().hex[:8]}"
    d = GroupDriver(group_store, group, {topic_name: 2})
    d.rebalance(["A"])
    d.commit("A", {(topic_name, 0): 4, (topic_name, 1): 6})

    clock = ManualClock(int(time.time() * 1000))
    served = GroupLagCollector(group_store, bootstrap_servers=bootstrap_servers, clock=clock)
    no_broker = GroupLagCollector(group_store, bootstrap_servers="127.0.0.1:1", cache_s=0)
    urls = []
    for collector in (served, no_broker):
        host, port, _ = serve(collector, 0, "127.0.0.1")
        urls.append(f"http://{host}:{port}/metrics")
    g = {"consumergroup": group}
    tp0 = {**g, "topic": topic_name, "partition": "0"}

    first = scrape(urls[0])
    assert one(first, "spark_kafka_group_list_success") == 1
    assert one(first, "kafka_consumergroup_lag", **tp0) == produced[0] - 4
    assert one(first, "spark_kafka_group_scrape_errors_total", source="store") == 0

    # The broker is unreachable: the group's own figures, no lag, and the failure says so.
    broken = scrape(urls[1])
    assert one(broken, "spark_kafka_group_scrape_success", source="broker", **g) == 0
    assert one(broken, "spark_kafka_group_scrape_success", source="store", **g) == 1
    assert named(broken, "kafka_consumergroup_lag", **g) == {}
    assert named(broken, "kafka_consumergroup_lag_sum", **g) == {}
    assert one(broken, "kafka_consumergroup_current_offset", **tp0) == 4
    assert one(broken, "spark_kafka_group_scrape_errors_total", source="broker") == 1

    # The group's log cannot be read any more. Within the cache window the scrape is the
    # last collection's, read before: the store is not read again.
    for commit in (Path(group_store) / group / "_delta_log").iterdir():
        commit.unlink()
    clock.advance(int(DEFAULT_CACHE_S * 1000) - 1)
    assert scrape(urls[0]) == first and served.collections == 1
    # Past it: nothing of the group's is served, the scrape says so, and the exporter still
    # answers (twice: the error count grows).
    for errors in (1, 2):
        clock.advance(int(DEFAULT_CACHE_S * 1000))
        gone = scrape(urls[0])
        assert one(gone, "spark_kafka_group_scrape_success", source="store", **g) == 0
        assert named(gone, "kafka_consumergroup_current_offset", **g) == {}
        assert named(gone, "kafka_consumergroup_members", **g) == {}
        assert named(gone, "spark_kafka_group_generation", **g) == {}
        assert one(gone, "spark_kafka_group_scrape_errors_total", source="store") == errors

    # A store that cannot be listed (an object store nobody answers at).
    unreachable = GroupLagCollector(
        "s3://no-bucket/groups",
        bootstrap_servers=bootstrap_servers,
        cache_s=0,
        storage_options={
            "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": "x",
            "AWS_SECRET_ACCESS_KEY": "y",
            "AWS_REGION": "us-east-1",
        },
    )
    host, port, _ = serve(unreachable, 0, "127.0.0.1")
    unlisted = scrape(f"http://{host}:{port}/metrics")
    assert one(unlisted, "spark_kafka_group_list_success") == 0
    assert one(unlisted, "spark_kafka_group_scrape_errors_total", source="store") == 1
    assert named(unlisted, "kafka_consumergroup_members") == {}


def _produce_at(servers: str, topic: str, partitions: int, times_ms: list[int]) -> None:
    """One record per timestamp in ``times_ms`` to each partition (CreateTime as given)."""
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5})
    for i, ts in enumerate(times_ms):
        for p in range(partitions):
            producer.produce(topic, value=f"v{i}".encode(), partition=p, timestamp=ts)
    assert producer.flush(30) == 0


@pytest.mark.broker
def test_topic_series_lag_in_seconds_owners_partition_status_and_the_cache(
    bootstrap_servers: str, topic_name: str, group_store: str
) -> None:
    """kafka_exporter's topic series, kafka-lag-exporter's lag (records and seconds, with the
    owner's labels), each partition's commit age and Burrow-style status, on one group whose
    story the exporter's clock walks through."""
    create_topic(bootstrap_servers, topic_name, 2)
    start = int(time.time() * 1000)
    hour_ago = start - 3_600_000
    _produce_at(bootstrap_servers, topic_name, 2, [hour_ago] * 10 + [start] * 10)
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    [deleted] = admin.delete_records([KafkaTopicPartition(topic_name, 1, 3)]).values()
    deleted.result(timeout=30)  # partition 1's log now starts at offset 3
    group = f"g-{uuid.uuid4().hex[:8]}"
    d = GroupDriver(group_store, group, {topic_name: 2}, start_ago_ms=10_000)
    d.rebalance(["A"])
    d.commit("A", {(topic_name, 0): 4, (topic_name, 1): 20})
    clock = ManualClock(start)
    collector = GroupLagCollector(
        group_store, bootstrap_servers=bootstrap_servers, clock=clock, stall_after_s=60,
        cluster_name="main",
    )  # fmt: skip
    host, port, _ = serve(collector, 0, "127.0.0.1")
    url = f"http://{host}:{port}/metrics"
    g = {"consumergroup": group}
    tp = {"topic": topic_name}

    s = scrape(url)
    assert one(s, "kafka_topic_partitions", **tp) == 2
    assert one(s, "kafka_topic_partition_current_offset", partition="0", **tp) == 20
    assert one(s, "kafka_topic_partition_current_offset", partition="1", **tp) == 20
    assert one(s, "kafka_topic_partition_oldest_offset", partition="0", **tp) == 0
    assert one(s, "kafka_topic_partition_oldest_offset", partition="1", **tp) == 3
    owner = {"cluster_name": "main", "group": group, "consumer_id": "A"}
    owner |= {"member_host": "test-host", "client_id": ""}
    p0, p1 = {**owner, **tp, "partition": "0"}, {**owner, **tp, "partition": "1"}
    assert one(s, "kafka_consumergroup_group_lag", **p0) == 16
    assert one(s, "kafka_consumergroup_group_lag", **p1) == 0
    assert one(s, "kafka_consumergroup_group_offset", **p0) == 4
    # Partition 0's first unread record (offset 4) was written an hour before the clock.
    assert one(s, "kafka_consumergroup_group_lag_seconds", **p0) == 3600
    assert one(s, "kafka_consumergroup_group_lag_seconds", **p1) == 0
    by_group = {"cluster_name": "main", "group": group}
    assert one(s, "kafka_consumergroup_group_max_lag_seconds", **by_group) == 3600
    assert one(s, "kafka_consumergroup_group_max_lag", **by_group) == 16
    assert one(s, "kafka_consumergroup_group_sum_lag", **by_group) == 16
    assert one(s, "kafka_consumergroup_group_topic_sum_lag", **by_group, **tp) == 16
    age = one(s, "spark_kafka_group_partition_commit_age_seconds", partition="0", **g, **tp)
    assert 0 < age <= 15  # committed some seconds before the clock (the driver's clock)

    def status(samples: Samples, partition: str) -> str:
        found = named(samples, "spark_kafka_group_partition_status", partition=partition, **g)
        assert len(found) == 4 and sum(found.values()) == 1, found
        [labels] = [labels for labels, v in found.items() if v == 1]
        return dict(labels)["status"]

    assert (status(s, "0"), status(s, "1")) == ("OK", "OK")

    # Within the cache window: the same figures, with new records and no read.
    _produce_at(bootstrap_servers, topic_name, 2, [start] * 5)
    clock.advance(5_000)
    assert scrape(url) == s and collector.collections == 1
    # 100 s on: partition 0 has lag and has not moved for over 60 s; A is live (session
    # timeout 120 s): STALL. Partition 1 has lag now too, but nobody must read it yet.
    clock.advance(95_000)
    s = scrape(url)
    assert collector.collections == 2
    assert one(s, "kafka_consumergroup_group_lag", **p0) == 21
    assert one(s, "kafka_consumergroup_group_lag_seconds", **p0) == 3700
    assert one(s, "kafka_consumergroup_group_lag_seconds", **p1) == 100  # its record: start
    assert (status(s, "0"), status(s, "1")) == ("STALL", "STALL")
    # A goes past its session timeout: no live owner, STOP.
    clock.advance(200_000)
    assert (status(scrape(url), "0"), status(scrape(url), "1")) == ("STOP", "STOP")
    # Partition 1's committed offset goes back: REWIND (and its lag grows).
    d.commit("A", {(topic_name, 1): 5})
    clock.advance(15_000)
    s = scrape(url)
    assert status(s, "1") == "REWIND"
    assert one(s, "kafka_consumergroup_lag", partition="1", **g, **tp) == 20
