"""The partitions a source's subscription (subscribe / subscribePattern / assign) covers now."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.options import SourceOptions

if TYPE_CHECKING:
    from spark_kafka_group.kafka.cluster import KafkaCluster


def subscription_partitions(cluster: KafkaCluster, options: SourceOptions) -> list[TopicPartition]:
    """Every partition of the subscription on ``cluster`` (a ``KafkaCluster``), sorted."""
    counts = cluster.topic_partitions(
        subscribe=options.subscribe, pattern=options.subscribe_pattern, assign=options.assign
    )
    if options.assign is not None:
        return sorted(TopicPartition(t, p) for t, parts in options.assign.items() for p in parts)
    return sorted(TopicPartition(t, p) for t, n in counts.items() for p in range(n))
