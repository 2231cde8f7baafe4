"""Exactly once into Delta across the group through Spark's own Delta sink
(``writeStream.format("delta")`` with the ``deltaSinkTable`` option), end to end with delta-spark:
two members write one table; the victim (a separate process) is killed at each point of a
batch's life in turn (tests/kill_points.py), then restarted at once on its checkpoint or kept
down until its partitions moved, and no record lands twice. Then the zombie this path cannot
fence: a member paused mid-batch past its session timeout, resumed after its partitions moved,
lands its batch although the new owner wrote those records too."""

from __future__ import annotations

import json
import re
import signal
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

from spark_kafka_group.quickstart.sample_data import create_topic
from spark_kafka_group.store.paths import group_log_uri
from spark_kafka_group.store.sink_batches import SinkBatchFiles
from spark_kafka_group.testing.production import SteadyProducer
from spark_kafka_group.testing.waiting import wait_until
from tests import kill_points
from tests.delta_kills import kill_in_turn, table_rows
from tests.groups import stable_with
from tests.maven_spark import maven_spark_conf
from tests.processes import MemberProcess
from tests.streaming import source_options, stop_between_batches

pytestmark = [pytest.mark.maven_spark, pytest.mark.spark, pytest.mark.broker]

PARTITIONS = 4
#: The victim is killed at its kill point in the KILL_BATCH-th batch with rows of each start:
#: the one before completed, so the takeover knows where its query's batches begin.
KILL_BATCH = 2
#: The suite's kills on this path: every point of kill_points.POINTS once. Three are moves,
#: for what is this path's own, the new owner's position from the table: before the sink
#: (nothing landed: nothing may be skipped), after the sink's commit (landed, in neither Spark's
#: commit log nor the group log), during the group commit (the end in a commit object, not in
#: the log). After Spark's commit log and before the group commit, the member restarts on its
#: checkpoint: Spark's own per-query idempotence, with the group's commit still to come. A
#: delta-spark application takes about a minute to start and reach its kill on two cores;
#: KILL_POINTS_BOTH_WAYS=1 runs all eight (each point with a move and with a restart).
SCHEDULE = (
    kill_points.KILLS
    if kill_points.BOTH_WAYS
    else [
        ("before-sink", "moves"),
        ("after-sink", "moves"),
        ("before-group-commit", "restarts"),
        ("during-group-commit", "moves"),
    ]
)


def landed(uri: str, app_id: str) -> int:
    """The table's version of the application transaction ``app_id`` (-1: none)."""
    version = DeltaTable(uri).transaction_version(app_id)
    return -1 if version is None else version


def committed_rows(uri: str, app_id: str, version: int) -> set[tuple[int, int]]:
    """The (partition, offset) rows of the table's commit that set the application transaction
    ``app_id`` to ``version`` (Spark's Delta sink: the query's batch ``version``)."""
    for commit in sorted((Path(uri) / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line]
        txns = [a["txn"] for a in actions if "txn" in a]
        if any(t["appId"] == app_id and t["version"] == version for t in txns):
            files = [Path(uri) / a["add"]["path"] for a in actions if "add" in a]
            rows = [pq.read_table(f, columns=["partition", "offset"]).to_pylist() for f in files]
            return {(r["partition"], r["offset"]) for part in rows for r in part}
    raise AssertionError(f"no commit of {uri} sets transaction {app_id} to {version}")


def query_id(victim: MemberProcess) -> str:
    """The query id the victim's running incarnation prints once its query started."""
    assert victim.process is not None
    started = re.compile(rf"member started: pid {victim.process.pid} query (\S+)")
    wait_until(lambda: started.search(victim.output()), 120, "the victim's query to start")
    match = started.search(victim.output())
    assert match is not None
    return match.group(1)


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


def pause_resume(victim: MemberProcess, uri: str, store: str, group: str, pause: Path, producer):
    """The zombie: the victim's new incarnation completes a batch, is paused in its next batch
    with rows until its partitions moved and the survivor wrote every record produced before
    the pause, then resumed. (query id, paused batch id)."""
    victim.env = {}
    victim.set_arg("--session-timeout-ms", "6000")
    victim.set_arg("--checkpoint", str(pause.parent / "victim-checkpoint-zombie"))
    victim.start()
    query = query_id(victim)
    wait_until(lambda: stable_with(store, group, 2, PARTITIONS), 120, "the zombie-to-be's join")
    files = SinkBatchFiles(group_log_uri(store, group))
    wait_until(
        lambda: any(
            b.completed is not None and b.completed.query_id == query
            for b in files.read_all().values()
        ),
        120,
        "a completed batch of the zombie-to-be",
    )
    pause.touch()
    paused = pause.with_name(pause.name + ".paused")
    wait_until(paused.exists, 120, "the victim's pause in a batch")
    produced = dict(producer.produced)
    wait_until(lambda: stable_with(store, group, 1, PARTITIONS), 60, "the paused victim's expiry")
    before = {(p, o) for p, n in produced.items() for o in range(n)}
    wait_until(
        lambda: before <= {(p, o) for p, o, _ in table_rows(uri)},
        120,
        "the survivor's rows of every record produced before the pause",
    )
    victim.signal(signal.SIGCONT)
    batch = int(paused.read_text())
    return query, batch


# About seven minutes on two cores: four Spark applications with delta-spark started one after
# the other (50 to 115 s each from start to kill) and the zombie (110 s); all eight kills
# (KILL_POINTS_BOTH_WAYS=1) take past pytest's 600 s default.
@pytest.mark.long
@pytest.mark.timeout(900)
def test_a_member_killed_at_each_point_through_spark_s_delta_sink_leaves_no_duplicate(
    delta_spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    """The victim is killed (SIGKILL) at points of a batch's life (tests/kill_points.py):
    before the sink (a task of the batch), after the sink's Delta commit (Spark's commit log
    entry blocked), after Spark's commit log (before the group commit), during the group
    commit; then its partitions move (the survivor starts after what the victim's query landed,
    ``deltaSinkTable``), or it restarts on its checkpoint (Spark's Delta sink skips a batch the
    table has for its query): :data:`SCHEDULE`. After every kill no (partition, offset) is in
    the table twice.

    Then a new incarnation is paused (SIGSTOP) in a batch past its session timeout, its
    partitions move and the survivor writes them, and it is resumed: Spark's Delta sink
    commits under the query's own transaction, which nothing of the survivor's conflicts
    with, so that batch lands although the survivor wrote its records too. At the end every
    produced record is in the table; the records in it twice are exactly the zombie's batch."""
    group = "g-spark-delta-kill"
    uri = str(tmp_path / "events-table")
    pause = tmp_path / "pause-now"
    create_topic(bootstrap_servers, topic_name, PARTITIONS)
    # One task, not 50, per Delta snapshot: local[1] would spend seconds per commit on it.
    small = {"spark.databricks.delta.snapshotPartitions": "1"}
    delta_spark.conf.set(*next(iter(small.items())))
    # Created first: two queries creating the table at once, one fails on the other's protocol.
    schema = "partition INT, offset BIGINT, writer STRING"
    delta_spark.createDataFrame([], schema).write.format("delta").save(uri)
    conf = [f"{k}={v}" for k, v in {**maven_spark_conf(), **small}.items()]
    victim = MemberProcess(
        tmp_path, "victim", bootstrap_servers=bootstrap_servers, topic=topic_name,
        group_id=group, group_store=group_store,
        extra=[
            "--spark-delta-table", uri, "--option", f"deltaSinkTable={uri}",
            "--trigger-ms", "2000", "--kill-batch", str(KILL_BATCH), "--pause-file", str(pause),
            *[a for c in conf for a in ("--spark-conf", c)],
        ],
        **kill_points.first_incarnation(tmp_path, "victim", SCHEDULE),  # type: ignore[arg-type]
    )  # fmt: skip
    producer = SteadyProducer(bootstrap_servers, topic_name, PARTITIONS)
    victim.start()
    options = source_options(bootstrap_servers, topic_name, group, group_store, deltaSinkTable=uri)
    survivor = start_survivor(delta_spark, options, uri, str(tmp_path / "survivor-checkpoint"))
    try:
        wait_until(lambda: stable_with(group_store, group, 2, PARTITIONS), 180, "two members")
        producer.start()
        kill_in_turn(victim, tmp_path, uri, store=group_store, group=group,
                     partitions=PARTITIONS, schedule=SCHEDULE)  # fmt: skip
        started = time.monotonic()
        zombie, batch = pause_resume(victim, uri, group_store, group, pause, producer)
        process = victim.process
        assert process is not None
        wait_until(
            lambda: landed(uri, zombie) >= batch or process.poll() is not None,
            60,
            "the zombie's batch to land or its query to end",
        )
        print(f"the zombie: {time.monotonic() - started:.1f}s")
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

    rows = table_rows(uri)
    in_table = Counter((p, o) for p, o, _ in rows)
    produced = {(p, o) for p, n in final.items() for o in range(n)}
    lost = sorted(produced - set(in_table))
    assert not lost, f"{len(lost)} records lost: {lost[:10]}"
    assert set(in_table) == produced, sorted(set(in_table) - produced)[:10]
    # The zombie's batch landed (not fenced) and is exactly what is in the table twice.
    assert landed(uri, zombie) >= batch, victim.output()[-3000:]
    zombie_rows = committed_rows(uri, zombie, batch)
    twice = {r for r, n in in_table.items() if n > 1}
    assert twice == zombie_rows, (
        f"in the table twice: {len(twice)}, the zombie's batch {batch}: {len(zombie_rows)}; "
        f"twice but not the zombie's: {sorted(twice - zombie_rows)[:10]}, the zombie's but "
        f"once: {sorted(zombie_rows - twice)[:10]}"
    )
    writers = Counter((p, o, w == "survivor") for p, o, w in rows if (p, o) in twice)
    assert set(writers.values()) == {1} and len(writers) == 2 * len(twice), writers
    kills = [
        f"{k['point']}: {k['where']} (batch {k['batch']})"
        for k in kill_points.kills(tmp_path, "victim")
    ]
    print(
        f"killed at {'; '.join(kills)}; {len(produced)} produced, each in the table, "
        f"{len(twice)} of them twice: exactly the zombie's batch {batch}, which the survivor "
        "also wrote"
    )
