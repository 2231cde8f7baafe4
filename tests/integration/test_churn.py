"""Clean stops and restarts under churn read every record exactly once.

Three queries of one group write parquet (Spark's file sink: a batch it already has is skipped
by batch id), and three of another group on the same topic write one Delta table through
``ExactlyOnceDeltaWriter``. Under a steady producer, one query of each group is stopped with
``query.stop()`` (wherever its batch is: a stop that lands after the sink ran and before
Spark's commit log leaves that batch uncommitted) and restarted on its own checkpoint: one
group's restart, then the other's, at least 6 s apart (about 10 s on two busy cores, where a
restart takes that long to run its first batch). The sinks, read back (the parquet through its
``_spark_metadata``), hold every produced (partition, offset) exactly once.

``CHURN_SECONDS`` sets how long the queries are churned (default 60: three restarts of each
group on two busy cores; the test takes about 3 minutes there, Spark's start included).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from spark_kafka_group import ExactlyOnceDeltaWriter
from spark_kafka_group.quickstart.sample_data import create_topic
from spark_kafka_group.testing.group_log import group_records
from spark_kafka_group.testing.production import SteadyProducer
from spark_kafka_group.testing.waiting import wait_until
from tests.delivery import check_landed
from tests.groups import stable_with
from tests.streaming import source_options, stop_between_batches

pytestmark = [pytest.mark.spark, pytest.mark.broker]

PARTITIONS = 6
QUERIES = 3
#: Six queries on two cores: a slower trigger leaves CPU to the restarts.
TRIGGER = "2 seconds"
SCHEMA = "topic STRING, partition INT, offset BIGINT"


@dataclass
class Churned:
    """One group's queries, each restartable on its own checkpoint."""

    group: str
    start: Callable[[int], StreamingQuery]
    #: Query ``i``'s checkpoint, which ``start(i)`` uses.
    checkpoint: Callable[[int], Path]
    queries: list[StreamingQuery] = field(default_factory=list)
    #: Stops that found a batch planned (in the checkpoint's offsets) and not committed.
    interrupted: int = 0
    #: The longest restart, stop to first batch: above the session timeout, a cut batch moves.
    slowest_restart_s: float = 0.0

    def restart(self, i: int) -> None:
        began = time.monotonic()
        self.queries[i].stop()  # wherever its batch is
        offsets, commits = (_batch_ids(self.checkpoint(i) / d) for d in ("offsets", "commits"))
        self.interrupted += bool(offsets - commits)
        self.queries[i] = self.started(i)
        self.slowest_restart_s = max(self.slowest_restart_s, time.monotonic() - began)

    def started(self, i: int) -> StreamingQuery:
        """Query ``i`` started on its checkpoint and through its first batch. On a saturated
        machine Spark may give up on the new streaming-source process (it waits 10 s for it
        to connect back) before it ran anything: it is started again then (up to 5 times)."""
        for _ in range(5):
            query = self.start(i)
            wait_until(lambda q=query: q.lastProgress or not q.isActive, 60, "a first batch")
            if query.isActive or "connect back" not in str(query.exception()):
                return query
            print(f"{self.group} query {i}: its Python worker did not start; starting it again")
        return query

    def alive(self) -> bool:
        for q in self.queries:
            assert q.isActive or q.exception() is None, f"{self.group}: {q.exception()}"
        return True


def _batch_ids(directory: Path) -> set[int]:
    if not directory.is_dir():
        return set()
    return {int(p.name) for p in directory.iterdir() if p.name.isdigit()}


def _parquet_group(spark: SparkSession, options: dict[str, str], root: Path) -> Churned:
    def checkpoint(i: int) -> Path:
        return root / f"parquet-{i}-checkpoint"

    def start(i: int) -> StreamingQuery:
        return (
            _stream(spark, options)
            .writeStream.format("parquet")
            .option("path", str(root / f"parquet-{i}"))
            .option("checkpointLocation", str(checkpoint(i)))
            .trigger(processingTime=TRIGGER)
            .start()
        )

    return Churned(options["groupId"], start, checkpoint)


def _delta_group(spark: SparkSession, options: dict[str, str], root: Path, uri: str) -> Churned:
    def checkpoint(i: int) -> Path:
        return root / f"delta-{i}-checkpoint"

    def start(i: int) -> StreamingQuery:
        writer = ExactlyOnceDeltaWriter(uri, group=options["groupId"])
        return (
            _stream(spark, options)
            .writeStream.foreachBatch(writer)
            .option("checkpointLocation", str(checkpoint(i)))
            .trigger(processingTime=TRIGGER)
            .start()
        )

    return Churned(options["groupId"], start, checkpoint)


def _stream(spark: SparkSession, options: dict[str, str]) -> DataFrame:
    reader = spark.readStream.format("kafka-group")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load().select("topic", "partition", "offset")


def parquet_records(spark: SparkSession, root: Path) -> list[tuple[int, int]]:
    """Every row of the three parquet sinks, each read through its ``_spark_metadata``."""
    rows: list[tuple[int, int]] = []
    for i in range(QUERIES):
        path = root / f"parquet-{i}"
        if (path / "_spark_metadata").exists():
            # A schema: a sink whose batches were all empty has no file to infer it from.
            frame = spark.read.schema(SCHEMA).parquet(str(path)).select("partition", "offset")
            rows += [(r.partition, r.offset) for r in frame.collect()]
    return rows


def delta_records(uri: str) -> list[tuple[int, int]]:
    if not Path(uri).exists():
        return []
    table = DeltaTable(uri).to_pyarrow_table(columns=["partition", "offset"])
    return list(zip(table["partition"].to_pylist(), table["offset"].to_pylist(), strict=True))


#: A query stopped before its last batch's end reached the group (a cut batch, or a stop
#: between Spark's commit log and the batch's progress event) stays in its group until its
#: restart replaces it, for at most the session timeout: a deploy that wants no record read
#: twice sets it above its restart time. Here a restart may need five tries when Spark's
#: streaming-source process does not connect back within Spark's 10 s: 90 s and more.
TIMEOUTS = {"sessionTimeoutMs": "150000", "rebalanceTimeoutMs": "20000"}


def churn(
    groups: list[Churned],
    landed: dict[str, Callable[[], list[tuple[int, int]]]],
    *,
    bootstrap_servers: str,
    topic: str,
    group_store: str,
) -> None:
    """Each group's three queries started, then, under a steady producer, one query of each
    group stopped and restarted every ``interval_s`` for ``CHURN_SECONDS``; every produced
    record in each group's sink (``landed``, by group id) exactly once."""
    duration_s = float(os.environ.get("CHURN_SECONDS", "60"))
    interval_s = 12.0
    producer = SteadyProducer(bootstrap_servers, topic, PARTITIONS, per_round=10)
    began = time.monotonic()
    try:
        for g in groups:  # one group at a time: six Python workers at once start slowly
            g.queries = [g.start(i) for i in range(QUERIES)]
            wait_until(
                lambda g=g: g.alive() and stable_with(group_store, g.group, QUERIES, PARTITIONS),
                240, f"three stable members of {g.group}",
            )  # fmt: skip
        producer.start()
        wait_until(lambda: all(read() for read in landed.values()), 120, "reading", poll_s=2)
        churn_began, restarts = time.monotonic(), 0
        while time.monotonic() - churn_began < duration_s:
            for g in groups:  # one group's restart, then the next's, spread over an interval
                began_at = time.monotonic()
                g.restart(restarts % QUERIES)
                time.sleep(max(0.0, interval_s / len(groups) - (time.monotonic() - began_at)))
            restarts += 1
        final = producer.stop()
        total = sum(final.values())
        wait_until(
            lambda: all(g.alive() for g in groups)
            and all(len(set(read())) >= total for read in landed.values()),
            180, "every record in every sink", poll_s=3,
        )  # fmt: skip
        time.sleep(3)  # anything landing twice would land now
    finally:
        producer.stop()
        for g in groups:
            for q in g.queries:
                if q.isActive:
                    stop_between_batches(q)
    print(
        f"churn: {duration_s:.0f} s, {restarts} restarts of each group's queries; "
        + "; ".join(
            f"{g.group}: {g.interrupted} stops with a batch in flight, slowest restart "
            f"{g.slowest_restart_s:.0f} s" for g in groups
        )
        + f"; {time.monotonic() - began:.0f} s in all"
    )  # fmt: skip
    for g in groups:
        assert all(q.exception() is None for q in g.queries), [q.exception() for q in g.queries]
        result = check_landed(
            final, landed[g.group](), group_records(group_store, g.group), topic=topic,
            sink=g.group,
        )  # fmt: skip
        assert result.duplicated == 0, result.details()
        result.assert_ok()


def test_queries_stopped_and_restarted_under_churn_read_every_record_once(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    create_topic(bootstrap_servers, topic_name, PARTITIONS)
    uri = str(tmp_path / "events-table")

    def options(group: str) -> dict[str, str]:
        return source_options(bootstrap_servers, topic_name, group, group_store, **TIMEOUTS)

    parquet = _parquet_group(spark, options("g-churn-parquet"), tmp_path)
    delta = _delta_group(spark, options("g-churn-delta"), tmp_path, uri)
    landed = {
        parquet.group: lambda: parquet_records(spark, tmp_path),
        delta.group: lambda: delta_records(uri),
    }
    churn(
        [parquet, delta], landed,
        bootstrap_servers=bootstrap_servers, topic=topic_name, group_store=group_store,
    )  # fmt: skip
