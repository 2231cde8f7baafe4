"""A query's stream reader talks to Kafka through one client: topic metadata, ListOffsets,
``importFromKafkaGroup`` and ``commitToKafka`` all share its AdminClient (real broker, real
group log; the reader is driven the way Spark drives it, in this process)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import spark_kafka_group.kafka.cluster as cluster_module
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.kafka.cluster import KafkaCluster
from spark_kafka_group.kafka.consumer_group_offsets import (
    commit_to_kafka_group,
    kafka_group_offsets,
)
from spark_kafka_group.options import parse_options
from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from spark_kafka_group.source.offsets import SourceOffset
from spark_kafka_group.source.reader import KafkaGroupStreamReader
from spark_kafka_group.testing.waiting import wait_until
from tests.streaming import source_options

pytestmark = pytest.mark.broker


def test_import_from_and_commit_to_kafka_go_through_the_readers_one_client(
    bootstrap_servers: str, topic_name: str, group_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_topic(bootstrap_servers, topic_name, 2)
    produced = produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=10)
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    legacy, group = f"legacy-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    checker = KafkaCluster(bootstrap_servers)
    commit_to_kafka_group(checker, legacy, {tp0: 6})

    built: list[str] = []

    class CountingAdminClient(cluster_module.AdminClient):
        def __init__(self, conf: dict[str, Any]) -> None:
            built.append(conf["bootstrap.servers"])
            super().__init__(conf)

    monkeypatch.setattr(cluster_module, "AdminClient", CountingAdminClient)
    options = source_options(
        bootstrap_servers,
        topic_name,
        group,
        group_store,
        importFromKafkaGroup=legacy,
        commitToKafka="true",
    )
    reader = KafkaGroupStreamReader(parse_options(options))
    try:
        start = reader.initialOffset()
        # Partition 0 starts at the Kafka group's offset, 1 (never committed there) at earliest.
        assert SourceOffset.from_json(start).offsets == {tp0: 6, tp1: 0}
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        assert SourceOffset.from_json(end).offsets == {tp0: produced[0], tp1: produced[1]}
        reader.partitions(start, end)
        reader.commit(end)
        wait_until(
            lambda: kafka_group_offsets(checker, group) == {tp0: produced[0], tp1: produced[1]},
            30,
            "commitToKafka to copy the batch's commit to the Kafka group",
        )
    finally:
        reader.stop()
        checker.close()
    # One AdminClient for the whole query: the import and the copies used the reader's.
    assert built == [bootstrap_servers]
