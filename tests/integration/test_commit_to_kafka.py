"""``commitToKafka``: every commit the group log accepts is copied to the Kafka consumer group,
whichever path wrote it: the member's own commits, the progress listener's (the only path for an
AvailableNow run's single batch on pyspark 4.0 / 4.1), and the final batch's commit when the
query stops; and ``importFromKafkaGroup`` starts a new group at a Kafka group's offsets. All of
it against Apache Kafka's own group coordinator, read back with Kafka's own
``kafka-consumer-groups`` (from the Maven jars); with both ``kafka-group`` directions
(``export-to-kafka`` / ``import-from-kafka``), and a Kafka group whose own consumers are live,
which Kafka refuses to let anyone else commit to."""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.kafka.cluster import KafkaCluster
from spark_kafka_group.kafka.consumer_group_offsets import (
    KafkaGroupOffsetsError,
    KafkaOffsetMirror,
    commit_to_kafka_group,
    kafka_group_offsets,
)
from spark_kafka_group.ops.admin import describe_group
from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from spark_kafka_group.testing.kafka_broker import kafka_tool
from spark_kafka_group.testing.waiting import wait_until
from tests.integration.cli_support import run_cli
from tests.streaming import (
    Collected,
    expected_records,
    run_available_now,
    source_options,
    start_query,
    stop_between_batches,
)

pytestmark = [pytest.mark.broker, pytest.mark.spark]


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


def _kafka_offsets(bootstrap_servers: str, group: str) -> dict[TopicPartition, int]:
    with KafkaCluster(bootstrap_servers) as cluster:
        return dict(kafka_group_offsets(cluster, group))


def _wait_for_kafka_group(
    bootstrap_servers: str, group: str, offsets: dict[tuple[str, int], int], what: str
) -> None:
    wait_until(lambda: _kafka_offsets(bootstrap_servers, group) == offsets, 30, what)


def kafka_consumer_groups_describe(
    bootstrap_servers: str, group: str
) -> tuple[dict[tuple[str, int], dict[str, str]], str]:
    """Kafka's own ``kafka-consumer-groups --describe --group``: its rows by partition (column
    name -> cell: GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST
    CLIENT-ID), and what it printed on stderr."""
    result = kafka_tool(
        "kafka-consumer-groups", "--bootstrap-server", bootstrap_servers,
        "--describe", "--group", group,
    )  # fmt: skip
    lines = [line.split() for line in result.stdout.splitlines() if line.strip()]
    at = next(i for i, cells in enumerate(lines) if cells[:3] == ["GROUP", "TOPIC", "PARTITION"])
    header = lines[at]
    rows = {}
    for cells in lines[at + 1 :]:
        row = dict(zip(header, cells, strict=False))
        rows[(row["TOPIC"], int(row["PARTITION"]))] = row
    return rows, result.stderr


class LiveKafkaConsumer:
    """A plain Kafka consumer application in Kafka group ``group``: subscribed, assigned its
    partitions by Kafka's coordinator, with its own offsets committed."""

    def __init__(
        self, bootstrap_servers: str, group: str, topic: str, committed: dict[int, int]
    ) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap_servers,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self.closed = False
        self.consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while not self.consumer.assignment():
            assert time.monotonic() < deadline, f"Kafka never assigned {topic} to {group}"
            self.consumer.poll(0.2)
        self.consumer.commit(
            offsets=[KafkaTopicPartition(topic, p, o) for p, o in committed.items()],
            asynchronous=False,
        )

    def close(self) -> None:
        """Leave the group (Kafka's coordinator then holds it Empty)."""
        if not self.closed:
            self.closed = True
            self.consumer.close()


@pytest.mark.smoke
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
    # Kafka's own tool reads the mirrored group: at the log end, lag 0, and no member of its
    # own (the copy is an admin commit, not a consumer joining the group).
    rows, said = kafka_consumer_groups_describe(bootstrap_servers, group)
    assert sorted(rows) == sorted(_ends(topic_name, produced))
    for (_, partition), row in rows.items():
        assert row["GROUP"] == group
        assert int(row["CURRENT-OFFSET"]) == int(row["LOG-END-OFFSET"]) == produced[partition]
        assert row["LAG"] == "0" and row["CONSUMER-ID"] == "-"
    assert f"Consumer group '{group}' has no active members" in said


@pytest.mark.smoke
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
        # Between batches: a stop that interrupts a batch after its sink ran leaves that batch
        # out of Spark's commit log, and so uncommitted.
        stop_between_batches(query)
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


def test_a_kafka_group_with_live_consumers_refuses_the_copy_and_nothing_is_lost(
    spark,
    bootstrap_servers: str,
    topic_name: str,
    group_store: str,
    produced,
    tmp_path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    group, options = _committing_to_kafka(bootstrap_servers, topic_name, group_store)
    tp0 = TopicPartition(topic_name, 0)
    # A Kafka consumer application that happens to use the same group name, live in it.
    app = LiveKafkaConsumer(bootstrap_servers, group, topic_name, {0: 3})
    try:
        # Kafka refuses an admin's commit to a group with live consumers; the product says
        # so, naming the group, what is wrong and the fix.
        with KafkaCluster(bootstrap_servers) as cluster:
            with pytest.raises(KafkaGroupOffsetsError) as refused:
                commit_to_kafka_group(cluster, group, {tp0: 5})
            assert f"Kafka consumer group {group!r} has active consumers" in str(refused.value)
            assert "Stop those consumers" in str(refused.value)
            mirror = KafkaOffsetMirror(cluster, group)
            with caplog.at_level(logging.WARNING, "spark_kafka_group.kafka.consumer_group_offsets"):
                mirror.commit({tp0: 5})  # commitToKafka's path: never raises
                assert mirror.flush(30)
            assert mirror.failures == 1 and mirror.commits == 0
            [warning] = [r.getMessage() for r in caplog.records if "commitToKafka" in r.msg]
            assert f"Kafka consumer group {group!r} has active consumers" in warning
            assert "The query goes on, and the group log keeps every committed offset" in warning

        # A query with commitToKafka into that group reads everything and keeps running; the
        # group log holds every commit, and the application's own Kafka offsets are untouched.
        collected = Collected()
        query = start_query(
            spark, options, str(tmp_path / "checkpoint"), collected, available_now=False
        )
        try:
            total = sum(produced.values())
            wait_until(lambda: collected.count() >= total, 120, "every record")
            wait_until(
                lambda: describe_group(group_store, group).committed == _ends(topic_name, produced),
                60,
                "the group log to hold every offset read",
            )
            assert query.isActive and query.exception() is None
            assert _kafka_offsets(bootstrap_servers, group) == {tp0: 3}
            assert collected.records == expected_records(produced)

            # Once the application leaves, the next commits reach the Kafka group.
            app.close()
            more = produce_sample(
                bootstrap_servers, topic_name, partitions=2, per_partition=5, start=10
            )
            ends = {(topic_name, p): produced[p] + more[p] for p in produced}
            wait_until(lambda: collected.count() >= sum(ends.values()), 120, "the new records")
            _wait_for_kafka_group(
                bootstrap_servers, group, ends, "the Kafka group to take the copies again"
            )
            assert query.isActive and query.exception() is None
        finally:
            query.stop()
    finally:
        app.close()
    assert describe_group(group_store, group).committed == ends
    assert collected.records == expected_records({p: ends[(topic_name, p)] for p in produced})


def test_both_cli_directions_with_kafkas_coordinator_and_its_own_tool(
    bootstrap_servers: str, topic_name: str, group_store: str, produced, tmp_path: Path
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    legacy, exported, busy = (
        f"{name}-{uuid.uuid4().hex[:8]}" for name in ("legacy", "exp", "busy")
    )
    kafka = ["--bootstrap-server", bootstrap_servers]
    base = ["--store", group_store, "--group", group, *kafka]

    # import-from-kafka: offsets that Kafka's own tool set in a Kafka group.
    plan = tmp_path / "offsets.csv"
    plan.write_text(f"{topic_name},0,4\n{topic_name},1,7\n")
    kafka_tool(
        "kafka-consumer-groups", *kafka, "--reset-offsets", "--group", legacy,
        "--from-file", str(plan), "--execute",
    )  # fmt: skip
    imported = run_cli("import-from-kafka", *base, "--kafka-group", legacy, "--json")
    assert imported.code == 0, imported.err
    assert describe_group(group_store, group).committed == {(topic_name, 0): 4, (topic_name, 1): 7}

    # export-to-kafka: Kafka's own tool reads the group it wrote, with the lag to the log end.
    done = run_cli("export-to-kafka", *base, "--kafka-group", exported, "--json")
    assert done.code == 0, done.err
    rows, _ = kafka_consumer_groups_describe(bootstrap_servers, exported)
    assert {tp: int(row["CURRENT-OFFSET"]) for tp, row in rows.items()} == {
        (topic_name, 0): 4,
        (topic_name, 1): 7,
    }
    assert {tp: int(row["LAG"]) for tp, row in rows.items()} == {
        (topic_name, 0): produced[0] - 4,
        (topic_name, 1): produced[1] - 7,
    }

    # export-to-kafka into a Kafka group with a live consumer: Kafka refuses it, the command
    # fails naming the group and the fix, and neither side loses an offset.
    app = LiveKafkaConsumer(bootstrap_servers, busy, topic_name, {0: 2})
    try:
        refused = run_cli("export-to-kafka", *base, "--kafka-group", busy)
        assert refused.code != 0
        assert f"Kafka consumer group {busy!r} has active consumers" in refused.err
        assert "Stop those consumers" in refused.err
        assert _kafka_offsets(bootstrap_servers, busy) == {TopicPartition(topic_name, 0): 2}
    finally:
        app.close()
    assert describe_group(group_store, group).committed == {(topic_name, 0): 4, (topic_name, 1): 7}
