"""The two members of the tests of exactly once through Spark's own Delta sink
(tests/integration/test_exactly_once_spark_delta*.py) and their kill chain: the victim, a
separate process writing the table through Spark's Delta sink with ``deltaSinkTable``, and the
survivor, a query of the test's delta-spark session writing the same table
(:func:`spark_sink_chain`)."""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
from deltalake import DeltaTable
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from spark_kafka_group.quickstart.sample_data import create_topic
from spark_kafka_group.testing.production import SteadyProducer
from spark_kafka_group.testing.waiting import wait_until
from tests import kill_points
from tests.delta_kills import SURVIVOR_TRIGGER, kill_in_turn, table_rows
from tests.groups import stable_with
from tests.maven_spark import maven_spark_conf
from tests.processes import MemberProcess
from tests.streaming import source_options, stop_between_batches

PARTITIONS = 4
#: The victim is killed at its kill point in the KILL_BATCH-th batch with rows of each start:
#: the one before completed, so the takeover knows where its query's batches begin.
KILL_BATCH = 2

#: The kills of the chain (test_exactly_once_spark_delta.py): every point of kill_points.POINTS
#: once. Three are moves, for what is this path's own, the new owner's position from the
#: table: before the sink (nothing landed: nothing may be skipped), after the sink's commit
#: (landed, in neither Spark's commit log nor the group log), during the group commit (the end
#: in a commit object, not in the log). After Spark's commit log and before the group commit,
#: the member restarts on its checkpoint: Spark's own per-query idempotence, with the group's
#: commit still to come. Each point the other way: test_exactly_once_spark_delta_other_way.py's
#: chain (``kill_points.other_way(SCHEDULE)``), in a file of its own that runs beside this one.
SCHEDULE = [
    ("before-sink", "moves"),
    ("after-sink", "moves"),
    ("before-group-commit", "restarts"),
    ("during-group-commit", "moves"),
]


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
        .trigger(processingTime=SURVIVOR_TRIGGER)
        .start(uri)
    )


@dataclass
class SinkChain:
    victim: MemberProcess
    survivor: StreamingQuery
    producer: SteadyProducer
    uri: str
    group: str
    #: Created, it pauses the victim in its next batch with rows (member_app's --pause-file)
    pause: Path


@contextmanager
def spark_sink_chain(
    delta_spark, servers: str, topic: str, store: str, tmp_path: Path, schedule: kill_points.Kills
) -> Iterator[SinkChain]:
    """The victim and the survivor in one stable group under steady production; the victim
    killed at each point of ``schedule`` in turn, restarted at once or kept down until its
    partitions moved; after every kill no (partition, offset) is in the table twice. Yields
    once the chain is done; everything stopped on the way out."""
    group = "g-spark-delta-kill"
    uri = str(tmp_path / "events-table")
    pause = tmp_path / "pause-now"
    create_topic(servers, topic, PARTITIONS)
    # Created first: two queries creating the table at once, one fails on the other's protocol.
    schema = "partition INT, offset BIGINT, writer STRING"
    delta_spark.createDataFrame([], schema).write.format("delta").save(uri)
    conf = [f"{k}={v}" for k, v in maven_spark_conf().items()]
    victim = MemberProcess(
        tmp_path, "victim", bootstrap_servers=servers, topic=topic,
        group_id=group, group_store=store,
        extra=[
            "--spark-delta-table", uri, "--option", f"deltaSinkTable={uri}",
            "--trigger-ms", "2000", "--kill-batch", str(KILL_BATCH), "--pause-file", str(pause),
            *[a for c in conf for a in ("--spark-conf", c)],
        ],
        **kill_points.first_incarnation(tmp_path, "victim", schedule),  # type: ignore[arg-type]
    )  # fmt: skip
    producer = SteadyProducer(servers, topic, PARTITIONS)
    victim.start()
    options = source_options(servers, topic, group, store, deltaSinkTable=uri)
    survivor = start_survivor(delta_spark, options, uri, str(tmp_path / "survivor-checkpoint"))
    try:
        wait_until(lambda: stable_with(store, group, 2, PARTITIONS), 180, "two members")
        producer.start()
        kill_in_turn(victim, tmp_path, uri, store=store, group=group,
                     partitions=PARTITIONS, schedule=schedule)  # fmt: skip
        yield SinkChain(victim, survivor, producer, uri, group, pause)
    finally:
        producer.stop()
        if survivor.isActive:
            stop_between_batches(survivor)
        victim.signal(signal.SIGCONT)
        victim.stop()
    assert survivor.exception() is None, survivor.exception()


def every_record_in_the_table(chain: SinkChain) -> dict[int, int]:
    """Stop producing; once the table holds as many distinct records as were produced (and
    a little longer, for anything landing twice), what was produced to each partition."""
    time.sleep(2)
    final = chain.producer.stop()
    total = sum(final.values())
    wait_until(
        lambda: len({(p, o) for p, o, _ in table_rows(chain.uri)}) >= total,
        120,
        "every record in the table",
    )
    time.sleep(3)  # anything landing twice would land now
    return final
