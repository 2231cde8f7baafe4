"""Transactions on a broker that filters them (Apache Kafka): committed, aborted and still-open
transactions interleaved on every partition, read by a running query under read_committed,
and by a batch read under both isolation levels."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

import spark_kafka_group
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.kafka import KafkaCluster
from spark_kafka_group.ops.lag import describe_with_lag
from spark_kafka_group.quickstart.sample_data import create_topic
from spark_kafka_group.testing.waiting import wait_until
from tests.streaming import Collected, source_options, start_query

pytestmark = [pytest.mark.broker, pytest.mark.spark]

PARTITIONS = (0, 1)


class Transactions:
    """One transactional producer per ``transactional.id``; each call writes ``values`` to
    every partition in one transaction and commits it, aborts it or leaves it open."""

    def __init__(self, servers: str, topic: str) -> None:
        self.servers = servers
        self.topic = topic
        self.producers: dict[str, Producer] = {}

    def producer(self, name: str) -> Producer:
        if name not in self.producers:
            producer = Producer(
                {
                    "bootstrap.servers": self.servers,
                    "transactional.id": f"{self.topic}-{name}",
                    "linger.ms": 0,
                    "log_level": 0,
                }
            )
            producer.init_transactions(30)
            self.producers[name] = producer
        return self.producers[name]

    def write(self, name: str, values: list[str], end: str) -> None:
        producer = self.producer(name)
        producer.begin_transaction()
        for partition in PARTITIONS:
            for value in values:
                producer.produce(self.topic, value=value.encode(), partition=partition)
        producer.flush(30)
        if end == "commit":
            producer.commit_transaction(30)
        elif end == "abort":
            producer.abort_transaction(30)

    def commit_open(self, name: str) -> None:
        self.producers[name].commit_transaction(30)


def values_by_partition(collected: Collected) -> dict[int, list[bytes | None]]:
    with collected.lock:
        rows = sorted((p, o, v) for batch in collected.batches.values() for p, o, v in batch)
    return {p: [v for q, _, v in rows if q == p] for p in PARTITIONS}


def committed_offsets(group_store: str, group: str, topic: str) -> dict[int, int]:
    committed = spark_kafka_group.describe_group(group_store, group).committed
    return {p: committed.get(TopicPartition(topic, p), -1) for p in PARTITIONS}


def latest(servers: str, topic: str, isolation: str) -> dict[int, int]:
    tps = [TopicPartition(topic, p) for p in PARTITIONS]
    with KafkaCluster(servers, client_conf={"isolation.level": isolation}) as cluster:
        return {tp.partition: offset for tp, offset in cluster.latest_offsets(tps).items()}


def test_read_committed_reads_exactly_the_committed_records_and_waits_at_an_open_one(
    spark, bootstrap_servers: str, topic_name: str, group_store: str, tmp_path: Path
) -> None:
    create_topic(bootstrap_servers, topic_name, len(PARTITIONS))
    txn = Transactions(bootstrap_servers, topic_name)
    # Offsets of each partition: a0-a2 | marker 3 | b0-b1 (open) 4-5 | x0-x1 6-7, abort 8 |
    # a3-a4 9-10 | marker 11.
    txn.write("a", ["a0", "a1", "a2"], "commit")
    txn.write("b", ["b0", "b1"], "open")
    txn.write("a", ["x0", "x1"], "abort")
    txn.write("a", ["a3", "a4"], "commit")
    assert latest(bootstrap_servers, topic_name, "read_committed") == {0: 4, 1: 4}
    assert latest(bootstrap_servers, topic_name, "read_uncommitted") == {0: 12, 1: 12}

    group = "g-txn"
    options = source_options(
        bootstrap_servers,
        topic_name,
        group,
        group_store,
        **{"kafka.isolation.level": "read_committed"},
    )
    collected = Collected()
    query = start_query(
        spark,
        options,
        str(tmp_path / "ckpt"),
        collected,
        available_now=False,
        processing_time="300 milliseconds",
    )
    try:
        first = [b"a0", b"a1", b"a2"]
        wait_until(lambda: values_by_partition(collected) == {0: first, 1: first}, 90, "a0-a2")
        # The open transaction holds every partition at its last stable offset: the query
        # commits up to it and keeps triggering, and reads nothing past it (not a3-a4).
        wait_until(
            lambda: committed_offsets(group_store, group, topic_name) == {0: 4, 1: 4},
            60,
            "the commit at the last stable offset",
        )
        time.sleep(2.0)  # about six more triggers
        assert values_by_partition(collected) == {0: first, 1: first}
        assert query.isActive

        # Once it commits, its records and everything committed after it arrive, and no
        # aborted record does; a trailing abort (x2, its marker) is passed over.
        txn.commit_open("b")  # marker 12
        txn.write("a", ["x2"], "abort")  # 13, marker 14
        everything = [*first, b"b0", b"b1", b"a3", b"a4"]
        wait_until(
            lambda: values_by_partition(collected) == {0: everything, 1: everything},
            60,
            "the records committed after the open transaction",
        )
        wait_until(
            lambda: committed_offsets(group_store, group, topic_name) == {0: 15, 1: 15},
            60,
            "the committed offset past the trailing markers",
        )
        lag = describe_with_lag(group_store, group, bootstrap_servers=bootstrap_servers)
        assert lag.total_lag == 0, lag.partitions
        assert values_by_partition(collected) == {0: everything, 1: everything}
    finally:
        query.stop()

    # read_uncommitted reads everything, aborted records included; read_committed (a batch
    # read up to the last stable offset) exactly the committed ones.
    base = {
        k: v for k, v in options.items() if k not in ("startingOffsets", "kafka.isolation.level")
    }
    for isolation, expected in (
        (
            "read_uncommitted",
            [b"a0", b"a1", b"a2", b"b0", b"b1", b"x0", b"x1", b"a3", b"a4", b"x2"],
        ),
        ("read_committed", everything),
    ):
        rows = (
            spark.read.format("kafka-group")
            .options(**base, **{"kafka.isolation.level": isolation})
            .load()
            .select("partition", "offset", "value")
            .collect()
        )
        for partition in PARTITIONS:
            got = [
                r.value for r in sorted(rows, key=lambda r: r.offset) if r.partition == partition
            ]
            assert got == expected, (isolation, partition, got)
