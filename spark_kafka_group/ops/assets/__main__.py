"""``python -m spark_kafka_group.ops.assets``: where the dashboard and the rules are."""

from spark_kafka_group.ops.assets import GRAFANA_DASHBOARD, PROMETHEUS_RULES

print(GRAFANA_DASHBOARD)
print(PROMETHEUS_RULES)
