"""The shipped Grafana dashboard and alert rules are where the package says, and
docs/monitoring.md shows every panel's PromQL and names every alert as they are (the real
tools load them in tests/integration/test_prometheus.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from spark_kafka_group.ops.assets import GRAFANA_DASHBOARD, PROMETHEUS_RULES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "monitoring.md"


def test_every_panel_query_is_in_the_docs_as_it_is_in_the_dashboard() -> None:
    dashboard = json.loads(GRAFANA_DASHBOARD.read_text())
    docs = DOCS.read_text()
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    missing = [e for e in exprs if f"```promql\n{e}\n```" not in docs]
    assert not missing, f"panel queries not in docs/monitoring.md: {missing}"
    # Every panel filters on the exporter's job (the double count with a kafka_exporter).
    assert all('job=~"$job"' in e for e in exprs)
    titles = [p["title"] for p in dashboard["panels"]]
    assert len(set(titles)) == len(titles)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(set(ids)) == len(ids)


def test_every_alert_is_named_in_the_docs() -> None:
    alerts = re.findall(r"- alert: (\w+)", PROMETHEUS_RULES.read_text())
    assert len(alerts) == 5
    docs = DOCS.read_text()
    assert [a for a in alerts if f"`{a}`" not in docs] == []
