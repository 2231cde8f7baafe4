"""Operations assets shipped in the wheel: the Grafana dashboard of ``kafka-group exporter``'s
series and the Prometheus alert rules (docs/monitoring.md shows both).

    python -m spark_kafka_group.ops.assets      # prints where they are installed
"""

from __future__ import annotations

from pathlib import Path

DIRECTORY = Path(__file__).resolve().parent
#: Grafana dashboard JSON (Dashboards > New > Import).
GRAFANA_DASHBOARD = DIRECTORY / "grafana-dashboard.json"
#: Prometheus alert rules (rule_files: in prometheus.yml).
PROMETHEUS_RULES = DIRECTORY / "prometheus-rules.yml"
