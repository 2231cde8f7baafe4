"""``commitToKafka``: every commit the group log accepts is copied to the Kafka consumer group,
whichever path wrote it: the member's own commits, the progress listener's (the only path for an
AvailableNow run's single batch on pyspark 4.0 / 4.1), and the final batch's commit when the
query stops; and ``importFromKafkaGroup`` starts a new group at a Kafka group's offsets. Smoke
tests: they run on the oldest pyspark too."""

from __future__ import annotations

import uuid

import pytest

from spark_kafka_group.admin import describe_group
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.kafka.cluster import KafkaCluster
from spark_kafka_group.kafka.consumer_group_offsets import (
    commit_to_kafka_group,
    kafka_group_offsets,
)
from spark_kafka_group.sample_data import create_topic, produce_sample
from spark_kafka_group.testing.waiting import wait_until
from tests.streaming import (
    Collected,
    expected_records,
    run_available_now,
    source_options,
    start_query,
)

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.smoke]


@pytest.fixture
def produced(bootstrap_servers: str, topic_name: str) -> dict[int, int]:
    """Ten records in each of the two partitions of a fresh topic (records per partition)."""
    create_topic(bootstrap_servers, topic_name, 2)
    return produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=10)


def _ends(topic: str, produced: dict[int, int]) -> dict[tuple[str, int], int]:
    return {(topic, p): n for p, n in produced.items()}


def _committing_to_kafka(
    bootstrap_servers: str, topic: str, group_store: str, **extra: str
) -> tuple[str, dict[str, str]]:
    """A fresh group id and the options of a query in it with ``commitToKafka``."""
    group = f"g-{uuid.uuid4().hex[:8]}"
    options = source_options(
        bootstrap_servers, topic, group, group_store, commitToKafka="true", **extra
    )
    return group, options


def _wait_for_kafka_group(
    bootstrap_servers: str, group: str, offsets: dict[tuple[str, int], int], what: str
) -> None:
    def held() -> dict[TopicPartition, int]:
        with KafkaCluster(bootstrap_servers) as cluster:
            return dict(kafka_group_offsets(cluster, group))

    wait_until(lambda: held() == offsets, 30, what)


def test_an_available_now_run_leaves_its_final_offsets_in_the_kafka_group(
    spark, bootstrap_servers: str, topic_name: str, group_store: str, produced, tmp_path
) -> None:
    group, options = _committing_to_kafka(bootstrap_servers, topic_name, group_store)
    collected = run_available_now(spark, options, str(tmp_path / "checkpoint"))
    assert collected.count() == sum(produced.values())
    _wait_for_kafka_group(
        bootstrap_servers,
        group,
        _ends(topic_name, produced),
        "the Kafka group to hold the run's final offsets",
    )
    assert describe_group(group_store, group).committed == _ends(topic_name, produced)


def test_a_stopped_query_leaves_what_the_group_log_accepted_in_the_kafka_group(
    spark, bootstrap_servers: str, topic_name: str, group_store: str, produced, tmp_path
) -> None:
    group, options = _committing_to_kafka(bootstrap_servers, topic_name, group_store)
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
    _wait_for_kafka_group(
        bootstrap_servers,
        group,
        _ends(topic_name, produced),
        "the Kafka group to hold what the group log accepted",
    )


def test_source_options_import_from_and_commit_to_kafka(
    spark, bootstrap_servers: str, topic_name: str, group_store: str, produced, tmp_path
) -> None:
    legacy = f"legacy-{uuid.uuid4().hex[:8]}"
    with KafkaCluster(bootstrap_servers) as cluster:
        commit_to_kafka_group(cluster, legacy, {TopicPartition(topic_name, 0): 6})
    group, options = _committing_to_kafka(
        bootstrap_servers, topic_name, group_store, importFromKafkaGroup=legacy
    )
    collected = run_available_now(spark, options, str(tmp_path / "checkpoint"))
    # partition 0 from the Kafka group's offset, partition 1 (never committed) from earliest
    start = {0: 6, 1: 0}
    counts = {p: n - start[p] for p, n in produced.items()}
    assert collected.records == expected_records(counts, start)
    _wait_for_kafka_group(
        bootstrap_servers,
        group,
        _ends(topic_name, produced),
        "the Kafka group to hold the run's final offsets",
    )
