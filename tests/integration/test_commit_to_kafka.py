"""``commitToKafka``: every commit the group log accepts is copied to the Kafka consumer group,
whichever path wrote it: the member's own commits, the progress listener's (the only path for an
AvailableNow run's single batch on pyspark 4.0 / 4.1), and the final batch's commit when the
query stops. Smoke tests: they run on the oldest pyspark too."""

from __future__ import annotations

import uuid

import pytest

from spark_kafka_group.admin import describe_group
from spark_kafka_group.kafka.cluster import KafkaCluster
from spark_kafka_group.kafka.consumer_group_offsets import kafka_group_offsets
from spark_kafka_group.sample_data import create_topic, produce_sample
from tests.processes import wait_until
from tests.streaming import Collected, run_available_now, source_options, start_query

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.smoke]


def _kafka_offsets(servers: str, group: str) -> dict[tuple[str, int], int]:
    with KafkaCluster(servers) as cluster:
        return dict(kafka_group_offsets(cluster, group))


def _ends(topic: str, produced: dict[int, int]) -> dict[tuple[str, int], int]:
    return {(topic, p): n for p, n in produced.items()}


def test_an_available_now_run_leaves_its_final_offsets_in_the_kafka_group(
    spark, bootstrap_servers: str, topic_name: str, group_store: str, tmp_path
) -> None:
    create_topic(bootstrap_servers, topic_name, 2)
    produced = produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=10)
    group = f"g-{uuid.uuid4().hex[:8]}"
    options = source_options(
        bootstrap_servers, topic_name, group, group_store, commitToKafka="true"
    )
    collected = run_available_now(spark, options, str(tmp_path / "checkpoint"))
    assert collected.count() == sum(produced.values())
    wait_until(
        lambda: _kafka_offsets(bootstrap_servers, group) == _ends(topic_name, produced),
        30,
        "the Kafka group to hold the run's final offsets",
    )
    assert describe_group(group_store, group).committed == _ends(topic_name, produced)


def test_a_stopped_query_leaves_what_the_group_log_accepted_in_the_kafka_group(
    spark, bootstrap_servers: str, topic_name: str, group_store: str, tmp_path
) -> None:
    create_topic(bootstrap_servers, topic_name, 2)
    produced = produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=10)
    group = f"g-{uuid.uuid4().hex[:8]}"
    options = source_options(
        bootstrap_servers, topic_name, group, group_store, commitToKafka="true"
    )
    collected = Collected()
    query = start_query(
        spark, options, str(tmp_path / "checkpoint"), collected, available_now=False
    )
    try:
        wait_until(lambda: collected.count() >= sum(produced.values()), 120, "every record")
    finally:
        query.stop()
    # After the stop, the group log's commits (whichever path wrote the last batch's) are
    # exactly what the Kafka group holds, and they cover every record read.
    wait_until(
        lambda: describe_group(group_store, group).committed == _ends(topic_name, produced),
        30,
        "the group log to hold the final offsets",
    )
    wait_until(
        lambda: _kafka_offsets(bootstrap_servers, group) == _ends(topic_name, produced),
        30,
        "the Kafka group to hold what the group log accepted",
    )
