"""Exactly once into Delta across the group through Spark's own Delta sink
(``writeStream.format("delta")`` with the ``deltaSinkTable`` option), end to end with delta-spark:
two members write one table, the victim (a separate process) is killed right after one of its
batches landed there and before the batch's end reached the group log, and kept down until its
partitions moved; the survivor starts them after what the victim's query landed."""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

from spark_kafka_group.quickstart.sample_data import create_topic
from spark_kafka_group.store.paths import group_log_uri
from spark_kafka_group.store.sink_batches import SinkBatchFiles
from spark_kafka_group.testing.production import SteadyProducer
from spark_kafka_group.testing.waiting import wait_until
from tests.groups import stable_with
from tests.maven_spark import maven_spark_conf
from tests.processes import MemberProcess
from tests.streaming import source_options, stop_between_batches

pytestmark = [pytest.mark.maven_spark, pytest.mark.spark, pytest.mark.broker]

PARTITIONS = 4


def table_rows(uri: str) -> list[tuple[int, int, str]]:
    if not (Path(uri) / "_delta_log").is_dir():
        return []
    table = DeltaTable(uri).to_pyarrow_table(columns=["partition", "offset", "writer"])
    columns = (table[c].to_pylist() for c in ("partition", "offset", "writer"))
    return list(zip(*columns, strict=True))


def start_survivor(spark, options: dict[str, str], uri: str, checkpoint: str):
    """The member in the test's session, writing through Spark's Delta sink."""
    return (
        spark.readStream.format("kafka-group")
        .options(**options)
        .load()
        .select("partition", "offset")
        .withColumn("writer", F.lit("survivor"))
        .writeStream.format("delta")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="500 milliseconds")
        .start(uri)
    )


def count_records(uri: str, final: dict[int, int]) -> tuple[list, list, list]:
    """(lost, written twice, rows) of the table against what was produced."""
    rows = table_rows(uri)
    landed = Counter((p, o) for p, o, _ in rows)
    produced = {(p, o) for p, n in final.items() for o in range(n)}
    return sorted(produced - set(landed)), sorted(r for r, n in landed.items() if n > 1), rows


def run_two_members(
    delta_spark, servers: str, topic: str, store: str, tmp_path: Path, group: str,
    victim_args: list[str], during,
) -> tuple[MemberProcess, dict[int, int], str, str]:  # fmt: skip
    """The victim process and the survivor in one stable group, producing; ``during(victim,
    survivor)`` runs the scenario; then every record is waited for in the table. (victim,
    records produced per partition, table, survivor's query id)."""
    uri = str(tmp_path / "events-table")
    create_topic(servers, topic, PARTITIONS)
    # One task, not 50, per Delta snapshot: local[1] would spend seconds per commit on it.
    small = {"spark.databricks.delta.snapshotPartitions": "1"}
    delta_spark.conf.set(*next(iter(small.items())))
    # Created first: two queries creating the table at once, one fails on the other's protocol.
    schema = "partition INT, offset BIGINT, writer STRING"
    delta_spark.createDataFrame([], schema).write.format("delta").save(uri)
    conf = [f"{k}={v}" for k, v in {**maven_spark_conf(), **small}.items()]
    victim = MemberProcess(
        tmp_path, "victim", bootstrap_servers=servers, topic=topic, group_id=group,
        group_store=store,
        extra=[
            "--spark-delta-table", uri, "--option", f"deltaSinkTable={uri}",
            "--trigger-ms", "2000",
            *[a for c in conf for a in ("--spark-conf", c)],
            *victim_args,
        ],
    )  # fmt: skip
    producer = SteadyProducer(servers, topic, PARTITIONS)
    victim.start()
    options = source_options(servers, topic, group, store, deltaSinkTable=uri)
    survivor = start_survivor(delta_spark, options, uri, str(tmp_path / "survivor-checkpoint"))
    try:
        wait_until(lambda: stable_with(store, group, 2, PARTITIONS), 180, "two stable members")
        producer.start()
        wait_until(
            lambda: any(w != "survivor" for _, _, w in table_rows(uri)), 120, "victim's rows"
        )
        during(victim, survivor, uri)
        time.sleep(2)
        final = producer.stop()
        total = sum(final.values())
        wait_until(
            lambda: len({(p, o) for p, o, _ in table_rows(uri)}) >= total,
            120,
            "every record in the table",
        )
        time.sleep(3)  # anything landing twice would land now
    finally:
        producer.stop()
        if survivor.isActive:
            stop_between_batches(survivor)
        victim.signal(signal.SIGCONT)
        victim.stop()
        delta_spark.conf.unset("spark.databricks.delta.snapshotPartitions")
    assert survivor.exception() is None, survivor.exception()
    return victim, final, uri, str(survivor.id)


def test_a_member_killed_after_its_batch_landed_through_spark_s_delta_sink_leaves_no_duplicate(
    delta_spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    group = "g-spark-delta-kill"

    def kill_and_move(victim: MemberProcess, survivor, uri: str) -> None:
        process = victim.process
        assert process is not None
        wait_until(lambda: process.poll() is not None, 120, "the victim's self-kill")
        wait_until(lambda: stable_with(group_store, group, 1, PARTITIONS), 60, "its expiry")
        time.sleep(3)  # the survivor reads the moved partitions

    victim, final, uri, survivor_query = run_two_members(
        delta_spark, bootstrap_servers, topic_name, group_store, tmp_path, group,
        ["--kill-at-progress", "3"], kill_and_move,
    )  # fmt: skip
    assert "killing myself at the progress of batch" in victim.output(), victim.output()[-3000:]
    lost, twice, _ = count_records(uri, final)
    assert not lost, f"{len(lost)} records lost: {lost[:10]}"
    assert not twice, f"{len(twice)} records in the table twice: {twice[:10]}"
    # The kill point was hit: the victim's query landed a batch after the newest one its
    # group listener recorded (so the group's committed offset did not have its end).
    files = SinkBatchFiles(group_log_uri(group_store, group)).read_all()
    completed = [b.completed for b in files.values() if b.completed is not None]
    victims = [c for c in completed if c.query_id != survivor_query]
    assert len(victims) == 1, completed
    landed = DeltaTable(uri).transaction_version(victims[0].query_id)
    assert landed is not None and landed > victims[0].batch_id, (landed, victims[0])
    print(
        f"{sum(final.values())} records produced, each in the table once; the victim's query "
        f"landed batch {landed}, its listener had recorded batch {victims[0].batch_id}"
    )
