"""Topics deleted (and created again) under a running ``subscribePattern`` query, and the client
defect behind the executor crash it used to cause on Tansu (docs/troubleshooting.md)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from spark_kafka_group.quickstart.sample_data import create_topic
from spark_kafka_group.testing.waiting import wait_until
from tests.streaming import source_options

pytestmark = [pytest.mark.broker]

_REPO = Path(__file__).resolve().parents[2]


def run_probe(servers: str, mode: str) -> subprocess.CompletedProcess[str]:
    """tests/deleted_topic_consumer.py in a process of its own (a crash must not kill pytest)."""
    return subprocess.run(
        [sys.executable, "-m", "tests.deleted_topic_consumer", servers, mode],
        cwd=_REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_consumer_lives_through_its_topic_deleted_and_recreated_on_kafka(
    bootstrap_servers: str,
) -> None:
    """Apache Kafka answers a fetch of a deleted topic with UNKNOWN_TOPIC_ID; the client copes,
    and the source's pool hands the re-created topic to a consumer that reads it."""
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        pytest.skip("deletes topics: only on the suite's own broker")
    for mode in ("client", "pool"):
        probe = run_probe(bootstrap_servers, mode)
        assert probe.returncode == 0, (mode, probe.returncode, probe.stderr[-2000:])
        assert probe.stdout.split() == ["survived", "old,new"], (mode, probe.stdout)


def test_on_tansu_the_client_crashes_and_the_pool_does_not(tansu_bootstrap_servers: str) -> None:
    """librdkafka 2.5-2.16 die (SIGSEGV) when a consumer that knew a topic meets it deleted or
    re-created on Tansu, which answers such a fetch with UNKNOWN_TOPIC_OR_PARTITION. The pool
    closes every consumer that knew a topic under another id, so a Python worker lives on. If a
    new client no longer crashes, this fails: say so in docs/troubleshooting.md."""
    client = run_probe(tansu_bootstrap_servers, "client")
    assert client.returncode == -signal.SIGSEGV, (client.returncode, client.stdout)
    pooled = run_probe(tansu_bootstrap_servers, "pool")
    assert pooled.returncode == 0, (pooled.returncode, pooled.stderr[-2000:])
    assert pooled.stdout.split() == ["survived", "old,new"], pooled.stdout


class TopicRows:
    """(topic, partition, offset, value) rows per micro-batch, from a foreachBatch sink."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int, int, bytes]] = []
        self.lock = threading.Lock()

    def sink(self, frame, batch_id: int) -> None:
        rows = frame.select("topic", "partition", "offset", "value").collect()
        with self.lock:
            self.rows.extend(sorted((r.topic, r.partition, r.offset, r.value) for r in rows))

    def values(self, topic: str) -> list[bytes]:
        """``topic``'s values in the order the batches read them."""
        with self.lock:
            return [v for t, _, _, v in self.rows if t == topic]


def start_pattern_query(spark, options: dict[str, str], checkpoint: str, rows: TopicRows):
    reader = spark.readStream.format("kafka-group").options(**options)
    return (
        reader.load()
        .writeStream.foreachBatch(rows.sink)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="300 milliseconds")
        .start()
    )


def delete_topic(servers: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": servers, "log_level": 0})
    for future in admin.delete_topics([topic], operation_timeout=10).values():
        future.result(15)
    wait_until(lambda: topic not in admin.list_topics(timeout=5).topics, 30, f"{topic} to go")


def values(prefix: str, start: int, stop: int) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(start, stop)]


def write(servers: str, topic: str, prefix: str, start: int, stop: int) -> None:
    producer = Producer({"bootstrap.servers": servers, "log_level": 0})
    for value in values(prefix, start, stop):
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(30) == 0


@pytest.mark.spark
@pytest.mark.parametrize("fail_on_data_loss", [False, True])
def test_a_topic_deleted_under_a_pattern_query(
    spark, bootstrap_servers: str, group_store: str, tmp_path: Path, fail_on_data_loss: bool
) -> None:
    """failOnDataLoss=false: the query goes on with the other topic and reads the re-created
    topic from its earliest offset; true: it fails naming the deleted topic. No executor
    crashes either way."""
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        pytest.skip("deletes a topic: only on the suite's own broker")
    prefix = f"del-{uuid.uuid4().hex[:8]}-"
    doomed, other = f"{prefix}a", f"{prefix}b"
    for topic in (doomed, other):
        create_topic(bootstrap_servers, topic, 1)
        write(bootstrap_servers, topic, topic[-1], 0, 5)
    options = source_options(
        bootstrap_servers,
        "",
        "g-deleted",
        group_store,
        failOnDataLoss=str(fail_on_data_loss).lower(),
    )
    del options["subscribe"]
    options["subscribePattern"] = f"{prefix}.*"
    rows = TopicRows()
    query = start_pattern_query(spark, options, str(tmp_path / "ckpt"), rows)
    try:
        wait_until(
            lambda: (
                (
                    rows.values(doomed) == values("a", 0, 5)
                    and rows.values(other) == values("b", 0, 5)
                )
                or query.exception() is not None
            ),
            90,
            "both topics' records",
        )
        assert query.exception() is None, str(query.exception())[:3000]
        assert rows.values(doomed) == values("a", 0, 5), rows.rows
        delete_topic(bootstrap_servers, doomed)
        write(bootstrap_servers, other, "b", 5, 10)
        if fail_on_data_loss:
            with contextlib.suppress(Exception):  # awaitTermination raises the query's error
                query.awaitTermination(90)
            assert query.exception() is not None, "the query went on without the topic"
            error = str(query.exception())
            assert doomed in error, error[:3000]
            assert "Python worker exited unexpectedly" not in error, error[:3000]
            return
        wait_until(lambda: rows.values(other) == values("b", 0, 10), 60, "b's new records")
        assert query.isActive, query.exception()
        create_topic(bootstrap_servers, doomed, 1)
        write(bootstrap_servers, doomed, "A", 0, 3)
        write(bootstrap_servers, other, "b", 10, 12)
        wait_until(
            lambda: (
                rows.values(doomed) == values("a", 0, 5) + values("A", 0, 3)
                or query.exception() is not None
            ),
            90,
            "the re-created topic's records",
        )
        assert query.exception() is None, str(query.exception())[:3000]
        wait_until(lambda: rows.values(other) == values("b", 0, 12), 30, "b's last records")
        # The new topic's offsets 0-2 are read once, after the old topic's 0-4.
        assert rows.values(doomed) == values("a", 0, 5) + values("A", 0, 3)
    finally:
        query.stop()
