"""One member end to end: real local Spark, real broker, real Delta group log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

import spark_kafka_group
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.quickstart.sample_data import create_topic, produce, produce_sample
from spark_kafka_group.source.pyspark_features import HAS_ADMISSION_CONTROL
from spark_kafka_group.testing.waiting import wait_until
from tests.groups import committed
from tests.streaming import (
    Collected,
    expected_records,
    run_available_now,
    source_options,
    start_query,
)

# The whole module is the smoke suite that also runs on the oldest supported pyspark.
pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.smoke]


def committed_soon(store: str, group: str, expected: dict[tuple[str, int], int]) -> None:
    """The last batch of an AvailableNow run is committed asynchronously: on pyspark 4.0 / 4.1
    by the progress listener, which can land just after ``awaitTermination`` returns (seen on
    local-cluster: 0.2 s after); on 4.2+ recorded by the last ``latestOffset`` and written by
    the member's background step (or the listener) moments later."""
    wait_until(lambda: committed(store, group) == expected, 30, f"commits of {expected}")


def _stream_until(spark, options: dict[str, str], checkpoint: str, total: int) -> Collected:
    """Run a query with a processing-time trigger until it has read ``total`` records."""
    collected = Collected()
    query = start_query(spark, options, checkpoint, collected, available_now=False)
    try:
        wait_until(lambda: collected.count() >= total, 120, f"{total} records")
    finally:
        query.stop()
    return collected


def test_reads_every_record_exactly_once_and_resumes(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    create_topic(bootstrap_servers, topic_name, 3)
    first = produce_sample(bootstrap_servers, topic_name, partitions=3, per_partition=200)
    options = source_options(bootstrap_servers, topic_name, "g-e2e", group_store)
    checkpoint = str(tmp_path / "ckpt")

    run1 = run_available_now(spark, options, checkpoint)
    assert run1.records == expected_records(first)
    # The final batch's offsets reach the group log on every supported pyspark version.
    committed_soon(group_store, "g-e2e", {(topic_name, p): n for p, n in first.items()})

    # Same checkpoint, more records: only the new ones.
    second = produce_sample(
        bootstrap_servers, topic_name, partitions=3, per_partition=50, start=200
    )
    run2 = run_available_now(spark, options, checkpoint)
    assert run2.records == expected_records(second, start=first)

    # New checkpoint, same group: resumes from the group's committed offsets.
    third = produce_sample(bootstrap_servers, topic_name, partitions=3, per_partition=30, start=250)
    resumed_from = {p: first[p] + second[p] for p in first}
    run3 = run_available_now(spark, options, str(tmp_path / "ckpt-new"))
    assert run3.records == expected_records(third, start=resumed_from)


def test_ranges_cut_between_tasks_are_read_exactly_once(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    # 600 records in four tasks of 150: each partition's range is cut between two tasks.
    create_topic(bootstrap_servers, topic_name, 3)
    produced = produce_sample(bootstrap_servers, topic_name, partitions=3, per_partition=200)
    options = source_options(
        bootstrap_servers, topic_name, "g-cut", group_store, parallelism="2", minPartitions="4"
    )
    run = run_available_now(spark, options, str(tmp_path / "ckpt"))
    assert run.records == expected_records(produced)


def test_max_offsets_per_trigger_bounds_every_batch(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    create_topic(bootstrap_servers, topic_name, 3)
    counts = produce_sample(bootstrap_servers, topic_name, partitions=3, per_partition=100)
    total = sum(counts.values())
    options = source_options(
        bootstrap_servers, topic_name, "g-limit", group_store, maxOffsetsPerTrigger=70
    )
    collected = _stream_until(spark, options, str(tmp_path / "ckpt"), total)
    sizes = [len(rows) for _, rows in sorted(collected.batches.items())]
    assert collected.records == expected_records(counts)
    assert max(sizes) <= 70
    assert len([s for s in sizes if s]) >= -(-total // 70)


def test_max_bytes_per_trigger_bounds_every_batch_by_the_sizes_of_its_records(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    """Partition 0 holds records of 1,000 bytes, partition 1 of 10 bytes: a batch of about
    50 KiB takes as many records of each (their backlogs are equal), about 50."""
    create_topic(bootstrap_servers, topic_name, 2)
    records = [(0, None, b"x" * 1000)] * 300 + [(1, None, b"y" * 10)] * 300
    counts = produce(bootstrap_servers, topic_name, records)
    total = sum(counts.values())
    options = source_options(
        bootstrap_servers, topic_name, "g-bytes", group_store, maxBytesPerTrigger="50k"
    )
    collected = _stream_until(spark, options, str(tmp_path / "ckpt"), total)
    assert collected.records == expected_records(counts)
    batches = [rows for _, rows in sorted(collected.batches.items()) if rows]
    sizes = [sum(len(value or b"") for _, _, value in rows) for rows in batches]
    # 51,200 bytes, give or take one record of each partition (the split's rounding).
    assert max(sizes) <= 51_200 + 1_010, sizes
    assert len(batches) >= sum(sizes) // (51_200 + 1_010), sizes
    for rows in batches[:-1]:  # every batch but the last, whose backlog ran out, is full
        per_partition = [sum(1 for p, _, _ in rows if p == q) for q in (0, 1)]
        assert abs(per_partition[0] - per_partition[1]) <= 1, per_partition


@pytest.mark.skipif(
    not HAS_ADMISSION_CONTROL, reason="pyspark < 4.2 runs AvailableNow as one batch"
)
def test_available_now_with_a_read_limit_runs_several_batches_until_caught_up(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    create_topic(bootstrap_servers, topic_name, 3)
    counts = produce_sample(bootstrap_servers, topic_name, partitions=3, per_partition=100)
    options = source_options(
        bootstrap_servers, topic_name, "g-limit-now", group_store, maxOffsetsPerTrigger=70
    )
    run = run_available_now(spark, options, str(tmp_path / "ckpt"))
    sizes = [len(rows) for _, rows in sorted(run.batches.items())]
    assert run.records == expected_records(counts)
    assert max(sizes) <= 70
    # The final batch's commit is recorded by the last latestOffset; it becomes visible within
    # moments (the member's commit object, the progress listener's commit), not by the time
    # awaitTermination returns.
    committed_soon(group_store, "g-limit-now", {(topic_name, p): n for p, n in counts.items()})


def test_starting_offsets_latest_and_json(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    create_topic(bootstrap_servers, topic_name, 3)
    counts = produce_sample(bootstrap_servers, topic_name, partitions=3, per_partition=20)

    latest = source_options(
        bootstrap_servers, topic_name, "g-latest", group_store, startingOffsets="latest"
    )
    assert run_available_now(spark, latest, str(tmp_path / "c1")).records == []

    per_partition = json.dumps({topic_name: {"0": 5, "1": -2, "2": -1}})
    explicit = source_options(
        bootstrap_servers, topic_name, "g-json", group_store, startingOffsets=per_partition
    )
    run = run_available_now(spark, explicit, str(tmp_path / "c2"))
    assert run.records == sorted(
        [(0, o) for o in range(5, counts[0])] + [(1, o) for o in range(counts[1])]
    )


def test_starting_offsets_none_names_the_partitions(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    create_topic(bootstrap_servers, topic_name, 2)
    produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=5)
    options = source_options(
        bootstrap_servers, topic_name, "g-none", group_store, startingOffsets="none"
    )
    query = start_query(spark, options, str(tmp_path / "c"), Collected())
    with pytest.raises(StreamingQueryException) as raised:
        query.awaitTermination(120)
    message = str(raised.value)
    assert "NoOffsetForPartitionError" in message
    assert f"{topic_name}-0" in message and f"{topic_name}-1" in message
    assert "startingOffsets" in message


def test_out_of_range_committed_offset(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    create_topic(bootstrap_servers, topic_name, 1)
    counts = produce_sample(bootstrap_servers, topic_name, partitions=1, per_partition=10)
    # An operator set the group's offset beyond the end of the log (e.g. the topic was
    # recreated): the committed offset is out of range.
    spark_kafka_group.reset_offsets(
        group_store, "g-oor", {TopicPartition(topic_name, 0): counts[0] + 1000}, execute=True
    )
    strict = source_options(bootstrap_servers, topic_name, "g-oor", group_store)
    query = start_query(spark, strict, str(tmp_path / "c1"), Collected())
    with pytest.raises(StreamingQueryException) as raised:
        query.awaitTermination(120)
    assert "out of range" in str(raised.value)
    assert "failOnDataLoss=false" in str(raised.value)
    assert committed(group_store, "g-oor") == {(topic_name, 0): counts[0] + 1000}

    lenient = source_options(
        bootstrap_servers, topic_name, "g-oor", group_store, failOnDataLoss="false"
    )
    more = produce_sample(bootstrap_servers, topic_name, partitions=1, per_partition=3, start=10)
    run = run_available_now(spark, lenient, str(tmp_path / "c2"))
    # Past the end (as after a recreated topic): continues at the earliest offset, as Spark
    # does, so everything is read from the log start and the committed offset is valid again.
    assert run.records == expected_records({0: counts[0] + more[0]})
    committed_soon(group_store, "g-oor", {(topic_name, 0): counts[0] + more[0]})


def test_schema_headers_and_tombstones(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    from spark_kafka_group.quickstart.sample_data import produce

    create_topic(bootstrap_servers, topic_name, 1)
    produce(
        bootstrap_servers,
        topic_name,
        [(0, b"k1", b"v1"), (0, b"k2", None), (0, None, b"v3")],
        headers=[("h", b"x")],
    )
    options = source_options(
        bootstrap_servers, topic_name, "g-h", group_store, includeHeaders="true"
    )
    frame = spark.readStream.format("kafka-group").options(**options).load()
    assert frame.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    rows: list = []
    query = (
        frame.writeStream.foreachBatch(lambda df, _: rows.extend(df.collect()))
        .option("checkpointLocation", str(tmp_path / "c"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    rows.sort(key=lambda r: r.offset)
    assert [(r.key, r.value) for r in rows[:3]] == [(b"k1", b"v1"), (b"k2", None), (None, b"v3")]
    assert all(r.topic == topic_name and r.partition == 0 for r in rows)
    assert [(h.key, h.value) for h in rows[0].headers] == [("h", b"x")]
    assert rows[0].timestamp is not None
    assert rows[0].timestampType == 0


def test_without_starting_offsets_a_stream_starts_at_latest_and_a_batch_read_at_earliest(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    """Spark's Kafka source defaults: a new stream reads only what arrives after it joined (a
    user switching from format("kafka") does not replay the topic); a batch read everything."""
    create_topic(bootstrap_servers, topic_name, 2)
    before = produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=20)
    options = source_options(bootstrap_servers, topic_name, "g-default-start", group_store)
    del options["startingOffsets"]
    checkpoint = str(tmp_path / "ckpt")

    assert run_available_now(spark, options, checkpoint).records == []
    after = produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=5, start=20)
    assert run_available_now(spark, options, checkpoint).records == expected_records(
        after, start=before
    )

    batch = spark.read.format("kafka-group").options(**options).load()
    rows = sorted((r.partition, r.offset) for r in batch.select("partition", "offset").collect())
    assert rows == expected_records({p: before[p] + after[p] for p in before})


def test_a_query_without_group_store_is_refused_naming_the_group(
    spark, bootstrap_servers, topic_name
) -> None:
    """The same groupId in two stores would be two groups each reading every partition: no
    store is implied, and the error names the group and the fix."""
    options = source_options(bootstrap_servers, topic_name, "g-no-store", "unused")
    del options["groupStore"]
    with pytest.raises(Exception) as raised:
        spark.readStream.format("kafka-group").options(**options).load()
    message = str(raised.value)
    assert "Option 'groupStore' is required for group 'g-no-store'" in message, message
    assert "each reads every partition" in message
