"""``kafka-group exporter``: scraped over HTTP, its figures are ``kafka-group describe``'s, and a
store or broker it cannot reach is a figure, never a crash or a stale value."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from spark_kafka_group.ops.exporter import GroupLagCollector, serve
from spark_kafka_group.sample_data import create_topic, produce_sample
from tests.integration.cli_support import GroupDriver, run_cli
from tests.streaming import Collected, source_options, start_query

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=60) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def named(samples: Samples, name: str, **labels: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of metric ``name`` whose labels include ``labels``."""
    return {
        key: value
        for (n, key), value in samples.items()
        if n == name and set(labels.items()) <= set(key)
    }


def one(samples: Samples, name: str, **labels: str) -> float:
    found = named(samples, name, **labels)
    assert len(found) == 1, (name, labels, found)
    return next(iter(found.values()))


@pytest.fixture
def exporter_process(group_store: str, bootstrap_servers: str, tmp_path: Path) -> Iterator[Any]:
    """Start ``kafka-group exporter`` (the CLI, its own process) for some groups: its URL."""
    started: list[subprocess.Popen[str]] = []

    def start(*groups: str) -> str:
        args = [sys.executable, "-m", "spark_kafka_group.cli", "exporter", "--store", group_store]
        args += ["--bootstrap-servers", bootstrap_servers, "--port", "0", "--addr", "127.0.0.1"]
        for g in groups:
            args += ["--group", g]
        process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        started.append(process)
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "Serving the lag of" in line, line
        return line.rsplit(" ", 1)[-1].strip()

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

    served = GroupLagCollector(group_store, bootstrap_servers=bootstrap_servers)
    no_broker = GroupLagCollector(group_store, bootstrap_servers="127.0.0.1:1")
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

    # The group's log cannot be read any more: nothing of the group's is served, the scrape
    # says so, and the exporter still answers (twice: the error count grows).
    for commit in (Path(group_store) / group / "_delta_log").iterdir():
        commit.unlink()
    for errors in (1, 2):
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
