"""Where reading starts and stops, end to end: new partitions, data loss, timestamps, batch
reads and trigger minimums (real Spark, real broker, real group log)."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

import spark_kafka_group
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.kafka import KafkaCluster
from spark_kafka_group.listener.progress import group_offsets
from spark_kafka_group.quickstart.sample_data import create_topic
from spark_kafka_group.source.positions import LogBounds
from spark_kafka_group.source.timestamps import offsets_for_timestamps
from spark_kafka_group.testing.waiting import wait_until
from tests.streaming import (
    Collected,
    run_available_now,
    source_options,
    start_query,
    stop_between_batches,
)

pytestmark = [pytest.mark.broker]

# Ten minutes ago, on a whole second: well within the broker's retention (records older than
# retention.ms are deleted within a second or two on the suite's broker).
BASE_MS = (int(time.time()) - 600) * 1000


def produce(
    servers: str, topic: str, partitions: int, count: int, *, timestamps: list[int] | None = None
) -> None:
    """``count`` records to each partition, values ``v<i>``, with explicit CreateTimes if given.
    One record per produce batch; idempotent, so that a batch sent again (a topic just created
    may refuse the first ones) keeps its place instead of landing after the next ones."""
    producer = Producer(
        {
            "bootstrap.servers": servers,
            "linger.ms": 0,
            "batch.num.messages": 1,
            "enable.idempotence": True,
        }
    )
    for partition in range(partitions):
        for i in range(count):
            ts = timestamps[i] if timestamps else 0
            producer.produce(topic, value=f"v{i}".encode(), partition=partition, timestamp=ts)
    assert producer.flush(30) == 0


def batch_read(spark, options: dict[str, str]):
    reader = spark.read.format("kafka-group")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def query_error(spark, options: dict[str, str], checkpoint: str) -> str:
    """The error a stream with ``options`` fails with, at start or when it runs."""
    try:
        query = start_query(spark, options, checkpoint, Collected())
    except Exception as exc:
        return str(exc)
    try:
        with contextlib.suppress(Exception):
            query.awaitTermination(60)
        assert query.exception() is not None, "the query did not fail"
        return str(query.exception())
    finally:
        query.stop()


def offsets_of(frame) -> list[tuple[str, int, int]]:
    return sorted((r.topic, r.partition, r.offset) for r in frame.collect())


# -- 1. a partition that appears under a running query loses nothing ------------------------


@pytest.mark.spark
@pytest.mark.smoke
def test_new_topic_under_a_running_pattern_query_is_read_from_earliest(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    first, later = f"{topic_name}-a", f"{topic_name}-b"
    create_topic(bootstrap_servers, first, 1)
    produce(bootstrap_servers, first, 1, 5)  # before the query: skipped (latest)
    options = source_options(bootstrap_servers, "", "g-new-part", group_store)
    del options["subscribe"]
    options.update(subscribePattern=f"{topic_name}-.*", startingOffsets="latest")
    seen: list[tuple[str, int, int]] = []
    lock = threading.Lock()

    def sink(frame, _batch_id: int) -> None:
        rows = frame.select("topic", "partition", "offset").collect()
        with lock:
            seen.extend((r.topic, r.partition, r.offset) for r in rows)

    reader = spark.readStream.format("kafka-group")
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        wait_until(lambda: query.lastProgress is not None, 120, "the query's first trigger")
        produce(bootstrap_servers, first, 1, 5)
        create_topic(bootstrap_servers, later, 2)
        produce(bootstrap_servers, later, 2, 10)  # right away, before the query discovers it
        expected = [(first, 0, o) for o in range(5, 10)]
        expected += [(later, p, o) for p in (0, 1) for o in range(10)]
        wait_until(lambda: len(seen) >= len(expected), 120, f"{len(expected)} records")
        time.sleep(1.5)  # nothing more may arrive
    finally:
        query.stop()
        spark_kafka_group.leave_group(query)
    assert sorted(seen) == sorted(expected)


@pytest.mark.spark
@pytest.mark.smoke
def test_topic_created_while_the_pattern_query_was_stopped_is_read_from_earliest(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    """Not in the group's last assignment, so discovered on restart (as Spark and Flink treat
    a partition missing from a restarted query's checkpoint): earliest, not startingOffsets."""
    first, later = f"{topic_name}-a", f"{topic_name}-b"
    create_topic(bootstrap_servers, first, 1)
    produce(bootstrap_servers, first, 1, 5)  # before the query: skipped (latest)
    options = source_options(bootstrap_servers, "", "g-stopped-new", group_store)
    del options["subscribe"]
    options.update(subscribePattern=f"{topic_name}-.*", startingOffsets="latest")
    checkpoint = str(tmp_path / "ckpt")
    seen: list[tuple[str, int, int]] = []
    lock = threading.Lock()

    def sink(frame, _batch_id: int) -> None:
        rows = frame.select("topic", "partition", "offset").collect()
        with lock:
            seen.extend((r.topic, r.partition, r.offset) for r in rows)

    def start():
        reader = spark.readStream.format("kafka-group")
        for key, value in options.items():
            reader = reader.option(key, value)
        return (
            reader.load()
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="500 milliseconds")
            .start()
        )

    query = start()
    try:
        wait_until(lambda: query.lastProgress is not None, 120, "the query's first trigger")
        produce(bootstrap_servers, first, 1, 5)
        wait_until(lambda: len(seen) >= 5, 120, "5 records of the first topic")
        stop_between_batches(query)  # a stop inside the batch: the restart reads it again
    finally:
        query.stop()
    assert sorted(seen) == [(first, 0, o) for o in range(5, 10)]

    create_topic(bootstrap_servers, later, 1)
    produce(bootstrap_servers, later, 1, 30)  # while no member of the group runs
    query = start()
    try:
        wait_until(lambda: len(seen) >= 35, 120, "the 30 records of the new topic")
        time.sleep(1.5)  # nothing more may arrive
    finally:
        query.stop()
        spark_kafka_group.leave_group(query)
    assert sorted(seen) == [(first, 0, o) for o in range(5, 10)] + [
        (later, 0, o) for o in range(30)
    ]


# -- 2. failOnDataLoss=false skips exactly what is gone -------------------------------------


@pytest.mark.spark
def test_recreated_topic_fails_or_continues_at_earliest_by_fail_on_data_loss(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        pytest.skip("deletes a topic: only on the suite's own broker")
    create_topic(bootstrap_servers, topic_name, 2)
    produce(bootstrap_servers, topic_name, 2, 10)
    # The group consumed all 10 records of each partition.
    consumed = {TopicPartition(topic_name, 0): 10, TopicPartition(topic_name, 1): 10}
    spark_kafka_group.reset_offsets(group_store, "g-loss", consumed, execute=True)
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    for future in admin.delete_topics([topic_name], operation_timeout=10).values():
        future.result(15)
    wait_until(lambda: topic_name not in admin.list_topics(timeout=5).topics, 30, "the topic to go")
    create_topic(bootstrap_servers, topic_name, 2)
    produce(bootstrap_servers, topic_name, 2, 3)
    options = source_options(bootstrap_servers, topic_name, "g-loss", group_store)

    with pytest.raises(Exception, match=r"is 10, out of range.*7 offset\(s\) past the end"):
        run_available_now(spark, options, str(tmp_path / "c1"))
    # failOnDataLoss=false: every record of the recreated topic is read, nothing that exists
    # is skipped (with the old rule, 'latest' would have skipped all three).
    lenient = {**options, "failOnDataLoss": "false", "startingOffsets": "latest"}
    run = Collected()
    query = start_query(spark, lenient, str(tmp_path / "c2"), run)
    assert query.awaitTermination(180) and query.exception() is None
    assert run.records == [(p, o) for p in (0, 1) for o in range(3)]
    # The batch says where it began: whoever commits it (the member, or the progress listener
    # before the member's own rewind to 0 reached the log) lowers the offset from 10 to 3.
    [first] = [p for p in query.recentProgress if p.numInputRows > 0]
    [end] = group_offsets(first)
    assert end.starts == {TopicPartition(topic_name, 0): 0, TopicPartition(topic_name, 1): 0}
    # The final commit lands shortly after the query ends (docs/design.md, "Spark facts").
    wait_until(
        lambda: (
            spark_kafka_group.describe_group(group_store, "g-loss").committed
            == {(topic_name, 0): 3, (topic_name, 1): 3}
        ),
        30,
        "the group log to hold the batch's end, 3, as the committed offsets",
    )


# -- 3. timestamps: the first record at or after the time -----------------------------------


def test_offsets_for_timestamps_are_checked_against_the_records(
    bootstrap_servers, topic_name
) -> None:
    create_topic(bootstrap_servers, topic_name, 1)
    produce(
        bootstrap_servers, topic_name, 1, 40, timestamps=[BASE_MS + 1000 * i for i in range(40)]
    )
    tp = TopicPartition(topic_name, 0)
    with KafkaCluster(bootstrap_servers) as cluster:
        bounds = LogBounds(earliest=cluster.earliest_offsets([tp]), latest={tp: 40})
        for ms, expected in [
            (BASE_MS - 5, 0),
            (BASE_MS, 0),
            (BASE_MS + 1, 1),
            (BASE_MS + 17_500, 18),
            (BASE_MS + 39_000, 39),
            (BASE_MS + 39_001, None),
        ]:
            assert offsets_for_timestamps(cluster, {tp: ms}, bounds=bounds) == {tp: expected}


@pytest.mark.spark
def test_timestamp_starts_land_on_the_first_record_at_or_after_the_timestamp(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    create_topic(bootstrap_servers, topic_name, 2)
    produce(
        bootstrap_servers, topic_name, 2, 20, timestamps=[BASE_MS + 1000 * i for i in range(20)]
    )
    base = source_options(bootstrap_servers, topic_name, "g-ts", group_store)
    base.pop("startingOffsets")

    # A stream: every partition the group never committed starts at the timestamp.
    run = run_available_now(
        spark, {**base, "startingTimestamp": str(BASE_MS + 7_500)}, str(tmp_path / "c1")
    )
    assert run.records == [(p, o) for p in (0, 1) for o in range(8, 20)]

    # A batch read, per partition, with an ending timestamp.
    by_partition = {topic_name: {"0": BASE_MS + 3_000, "1": BASE_MS + 12_001}}
    frame = batch_read(
        spark,
        {
            **base,
            "startingOffsetsByTimestamp": json.dumps(by_partition),
            "endingTimestamp": str(BASE_MS + 15_000),
        },
    )
    expected = [(topic_name, 0, o) for o in range(3, 15)]
    expected += [(topic_name, 1, o) for o in range(13, 15)]
    assert offsets_of(frame) == expected

    # After the last record: an error by default, the latest offset with strategy latest.
    after = {**base, "startingTimestamp": str(BASE_MS + 60_000)}
    with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy=latest"):
        batch_read(spark, after).collect()
    assert batch_read(spark, {**after, "startingOffsetsByTimestampStrategy": "latest"}).count() == 0


# -- 4. batch reads -------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.smoke
def test_batch_read_returns_exactly_the_range_with_the_stream_schema(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    create_topic(bootstrap_servers, topic_name, 2)
    produce(bootstrap_servers, topic_name, 2, 20)
    base = source_options(bootstrap_servers, topic_name, "g-batch", group_store)
    base.pop("startingOffsets")

    everything = batch_read(spark, {**base, "maxOffsetsPerTrigger": "5"})  # ignored, as Spark
    stream_schema = spark.readStream.format("kafka-group").options(**base).load().schema
    assert everything.schema == stream_schema
    assert offsets_of(everything) == [(topic_name, p, o) for p in (0, 1) for o in range(20)]

    ranged = batch_read(
        spark,
        {
            **base,
            "startingOffsets": json.dumps({topic_name: {"0": 3, "1": -2}}),
            "endingOffsets": json.dumps({topic_name: {"0": 15, "1": -1}}),
        },
    )
    expected = [(topic_name, 0, o) for o in range(3, 15)]
    expected += [(topic_name, 1, o) for o in range(20)]
    assert offsets_of(ranged) == expected
    row = ranged.filter("partition = 0 and offset = 3").collect()[0]
    assert row.value.startswith(b"v3") and row.topic == topic_name

    # What the group has not consumed yet; the read neither joins nor commits.
    spark_kafka_group.reset_offsets(
        group_store, "g-batch", {TopicPartition(topic_name, 0): 12}, execute=True
    )
    before = spark_kafka_group.describe_group(group_store, "g-batch")
    pending = batch_read(spark, {**base, "startingOffsets": "group"})
    expected = [(topic_name, 0, o) for o in range(12, 20)]
    expected += [(topic_name, 1, o) for o in range(20)]
    assert offsets_of(pending) == expected
    after = spark_kafka_group.describe_group(group_store, "g-batch")
    assert (after.version, after.members, after.committed) == (
        before.version,
        (),
        {(topic_name, 0): 12},
    )

    with pytest.raises(Exception, match="after its end"):
        batch_read(
            spark,
            {**base, "startingOffsets": json.dumps({topic_name: {"0": 9, "1": 9}}),
             "endingOffsets": json.dumps({topic_name: {"0": 5, "1": -1}})},
        ).collect()  # fmt: skip
    refused = query_error(spark, {**base, "endingOffsets": "latest"}, str(tmp_path / "ckpt"))
    assert "'endingOffsets'" in refused and "not valid in streaming queries" in refused


# -- 5. minOffsetsPerTrigger / maxTriggerDelay ---------------------------------------------


@pytest.mark.spark
def test_trigger_minimum_holds_batch_by_batch_and_the_delay_flushes_the_rest(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    create_topic(bootstrap_servers, topic_name, 2)
    options = source_options(
        bootstrap_servers,
        topic_name,
        "g-min",
        group_store,
        minOffsetsPerTrigger=30,
        maxOffsetsPerTrigger=50,
        # Counted from the query's first (empty) trigger, before production begins: long enough
        # that slow production on busy cores still reaches the minimum within it.
        maxTriggerDelay="10s",
    )
    collected = Collected()
    query = start_query(spark, options, str(tmp_path / "ckpt"), collected, available_now=False)
    try:
        wait_until(lambda: query.lastProgress is not None, 120, "the query's first trigger")
        produced = 0
        while produced < 150:  # slow production: 8 records every 0.3 s
            produce(bootstrap_servers, topic_name, 2, 4)
            produced += 8
            time.sleep(0.3)
        produce(bootstrap_servers, topic_name, 2, 5)
        produced += 10  # a tail below the minimum: only the delay lets it through
        wait_until(lambda: collected.count() >= produced, 120, f"{produced} records")
    finally:
        query.stop()
        spark_kafka_group.leave_group(query)
    sizes = [len(rows) for _, rows in sorted(collected.batches.items()) if rows]
    print(f"batch sizes: {sizes}")
    assert collected.count() == produced
    assert all(30 <= n <= 50 for n in sizes[:-1]), sizes
    assert sizes[-1] <= 50, sizes
