"""Records the group had not read yet are deleted (DeleteRecords with Kafka's own tool, and
retention by time): failOnDataLoss=true fails naming the partition and the offsets, false goes
on at the log start."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import spark_kafka_group
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.kafka import KafkaCluster
from spark_kafka_group.testing.kafka_broker import kafka_tool
from spark_kafka_group.testing.waiting import wait_until
from tests.streaming import run_available_now, source_options

pytestmark = [pytest.mark.broker, pytest.mark.spark]

HOUR_MS = 3_600_000


def write(servers: str, topic: str, start: int, stop: int, *, timestamp_ms: int = 0) -> None:
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 0, "log_level": 0})
    for i in range(start, stop):
        producer.produce(topic, value=f"v{i}".encode(), partition=0, timestamp=timestamp_ms)
    assert producer.flush(30) == 0


def log_start(servers: str, topic: str) -> int:
    tp = TopicPartition(topic, 0)
    with KafkaCluster(servers) as cluster:
        return cluster.earliest_offsets([tp])[tp]


@pytest.mark.parametrize("deletion", ["kafka-delete-records", "retention.ms"])
def test_records_deleted_before_the_group_read_them(
    spark, bootstrap_servers: str, topic_name: str, group_store: str, tmp_path: Path, deletion: str
) -> None:
    if deletion == "kafka-delete-records" and os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        pytest.skip("Kafka's tools come from jvm/pom.xml's jars, next to the suite's broker")
    config = {"retention.ms": "60000"} if deletion == "retention.ms" else {}
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(topic_name, 1, 1, config=config)])[topic_name].result(30)
    group = "g-retention"
    spark_kafka_group.reset_offsets(
        group_store, group, {TopicPartition(topic_name, 0): 4}, execute=True
    )
    if deletion == "retention.ms":
        # Written an hour ago: past the topic's one-minute retention, so the broker's next
        # retention check (every second in the suite) deletes them.
        write(bootstrap_servers, topic_name, 0, 10, timestamp_ms=int(time.time() * 1000) - HOUR_MS)
    else:
        write(bootstrap_servers, topic_name, 0, 10)
        offsets = tmp_path / "offsets.json"
        offsets.write_text(
            json.dumps(
                {"version": 1, "partitions": [{"topic": topic_name, "partition": 0, "offset": 10}]}
            )
        )
        kafka_tool(
            "kafka-delete-records",
            "--bootstrap-server",
            bootstrap_servers,
            "--offset-json-file",
            str(offsets),
        )
    wait_until(lambda: log_start(bootstrap_servers, topic_name) == 10, 60, "records 0-9 to go")
    write(bootstrap_servers, topic_name, 10, 13)

    options = source_options(bootstrap_servers, topic_name, group, group_store)
    with pytest.raises(Exception) as failed:
        run_available_now(spark, options, str(tmp_path / "strict"))
    message = str(failed.value)
    assert f"partition {topic_name}-0 is 4, out of range [log start 10" in message, message[:3000]
    assert "offsets 4..9 (6) were deleted" in message, message[:3000]
    assert spark_kafka_group.describe_group(group_store, group).committed == {(topic_name, 0): 4}

    lenient = {**options, "failOnDataLoss": "false"}
    run = run_available_now(spark, lenient, str(tmp_path / "lenient"))
    assert run.records == [(0, 10), (0, 11), (0, 12)]
    wait_until(
        lambda: (
            spark_kafka_group.describe_group(group_store, group).committed == {(topic_name, 0): 13}
        ),
        30,
        "the commit at the end",
    )
