"""The shipped alert rules and Grafana dashboard, loaded by the real tools: promtool checks and
unit-tests the rules; a real Prometheus scrapes ``kafka-group exporter`` while a query is
behind, fires the lag alert, and evaluates every panel query of the dashboard."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from spark_kafka_group.ops.assets import GRAFANA_DASHBOARD, PROMETHEUS_RULES
from spark_kafka_group.quickstart.sample_data import create_topic
from spark_kafka_group.testing.waiting import wait_until
from tests.prometheus import free_port, prometheus_server, tool
from tests.streaming import Collected, source_options, start_query

RULES_TEST = Path(__file__).resolve().parent.parent / "promtool" / "prometheus-rules-test.yml"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("promtool"), *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_promtool_checks_and_unit_tests_the_shipped_rules() -> None:
    checked = _promtool("check", "rules", str(PROMETHEUS_RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 5 rules found" in checked.stdout
    tested = _promtool("test", "rules", str(RULES_TEST))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def panel_queries(dashboard: dict[str, Any], **variables: str) -> dict[str, str]:
    """Every panel target's PromQL, with the dashboard's variables (and Grafana's
    ``$__rate_interval``) replaced as Grafana would: ``{title/refId: expr}``."""
    out = {}
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for name, value in sorted(variables.items(), key=lambda kv: -len(kv[0])):
                expr = expr.replace(f"${name}", value)
            assert "$" not in expr, expr
            out[f"{panel['title']}/{target['refId']}"] = expr
    return out


def _rules_firing_at_once(path: Path) -> Path:
    """The shipped rules, their expressions unchanged, with every ``for`` 0s: an alert fires at
    the first evaluation that finds its condition (a test cannot wait 5 minutes)."""
    text, count = re.subn(r"(?m)^(\s+for: )\S+$", r"\g<1>0s", PROMETHEUS_RULES.read_text())
    assert count == text.count("- alert:") == 5, text
    path.write_text(text)
    return path


@pytest.mark.spark
@pytest.mark.broker
def test_prometheus_scrapes_the_exporter_alerts_and_evaluates_the_dashboard(
    spark, bootstrap_servers: str, topic_name: str, group_store: str, tmp_path: Path
) -> None:
    create_topic(bootstrap_servers, topic_name, 2)
    # Written an hour ago: the group is over an hour behind from its first unread record on.
    hour_ago = int(time.time() * 1000) - 3_600_000
    producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 5})
    for i in range(200):
        for p in range(2):
            producer.produce(topic_name, value=b"v%d" % i, partition=p, timestamp=hour_ago)
    assert producer.flush(30) == 0
    group = f"g-prom-{uuid.uuid4().hex[:6]}"
    port = free_port()
    exporter = subprocess.Popen(
        [
            sys.executable, "-m", "spark_kafka_group.ops.cli", "exporter", "--store", group_store,
            "--bootstrap-server", bootstrap_servers, "--group", group, "--port", str(port),
            "--addr", "127.0.0.1", "--cache-seconds", "1",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    rules = _rules_firing_at_once(tmp_path / "rules.yml")
    options = source_options(
        bootstrap_servers, topic_name, group, group_store, maxOffsetsPerTrigger=10
    )
    query = None
    try:
        assert exporter.stdout is not None
        assert "Serving the lag of" in exporter.stdout.readline()
        with prometheus_server(
            tmp_path / "prometheus", [f"127.0.0.1:{port}"], rule_files=[rules]
        ) as prom:
            query = start_query(
                spark, options, str(tmp_path / "ckpt"), Collected(),
                available_now=False, processing_time="2 seconds",
            )  # fmt: skip
            g = f'consumergroup="{group}"'

            def behind() -> bool:
                lag = prom.query(f"kafka_consumergroup_lag_sum{{{g}}}")
                committed = prom.query(f"kafka_consumergroup_current_offset{{{g}}}")
                return bool(lag) and float(lag[0]["value"][1]) > 0 and len(committed) == 2

            wait_until(behind, 120, "Prometheus holding the lag of a group with commits")
            # While the query runs and is behind: the lag series, in records and seconds.
            assert query.isActive
            lag = prom.query(f'sum(kafka_consumergroup_lag{{{g}, job="kafka-group"}})')
            assert 0 < float(lag[0]["value"][1]) <= 400  # its first commit may be at 0
            wait_until(
                lambda: prom.query(f'kafka_consumergroup_group_max_lag_seconds{{group="{group}"}}'),
                60,
                "the lag in seconds scraped",
            )
            [seconds] = prom.query(f'kafka_consumergroup_group_max_lag_seconds{{group="{group}"}}')
            assert float(seconds["value"][1]) >= 3600

            def lag_alert() -> list[dict[str, Any]]:
                return [
                    a
                    for a in prom.firing()
                    if a["labels"]["alertname"] == "KafkaGroupLagSecondsHigh"
                    and a["labels"].get("group") == group
                ]

            wait_until(lag_alert, 60, "KafkaGroupLagSecondsHigh firing")
            [alert] = lag_alert()
            assert alert["labels"]["severity"] == "warning"

            # Every panel of the shipped dashboard: its PromQL evaluates and returns series.
            dashboard = json.loads(GRAFANA_DASHBOARD.read_text())
            queries = panel_queries(
                dashboard, job="kafka-group", consumergroup=group, __rate_interval="30s"
            )
            assert len(queries) == sum(len(p["targets"]) for p in dashboard["panels"]) >= 10
            # A range query (Rebalances: increase over $__rate_interval) needs two samples
            # of the series in its window: waited for, as a new dashboard shows it.
            empty: dict[str, str] = {}

            def every_panel_has_series() -> bool:
                empty.clear()
                empty.update({name: q for name, q in queries.items() if not prom.query(q)})
                return not empty

            try:
                wait_until(every_panel_has_series, 60, "series of every panel query")
            except AssertionError:
                raise AssertionError(f"dashboard queries without series: {empty}") from None
            statuses = prom.query(f"sum by (status) (spark_kafka_group_partition_status{{{g}}})")
            assert {s["metric"]["status"] for s in statuses} == {"OK", "STALL", "STOP", "REWIND"}
    finally:
        if query is not None:
            query.stop()
        exporter.terminate()
        exporter.wait(30)
