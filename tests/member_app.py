"""Run one ``kafka-group`` query as a group member and journal what each batch read.

Every micro-batch appends one JSON line to ``--journal``: the batch id, the process id, the
``--instance-id``, the wall-clock time, and the (partition, offset) pairs it read. The process
tests (:class:`tests.processes.MemberProcess`) start several of these as separate applications,
kill, pause and restart them, and check the journals against what was produced and against
the group log. From the repository root:

    python -m tests.member_app --bootstrap-servers B --topic T --group-id G --group-store S \\
        --journal /tmp/m1.jsonl --checkpoint /tmp/m1-ckpt [--instance-id m1]

SIGTERM stops the query; its member commits its last batch and leaves the group as the query
ends (static members stay; so does a member whose last batch the stop cut before Spark
committed it, until its restart or its session timeout). With ``--stop-between-batches`` the
stop waits for the query to be between two batches first, so that it never cuts a batch whose
sink already ran. With ``--available-now`` it reads what is available and exits.

With ``--delta-table URI`` each batch is also written into that Delta table through
``ExactlyOnceDeltaWriter`` (a ``writer`` column names this member), and with ``--kill-batch N``
and ``$KILL_POINT`` set the whole process group kills itself with SIGKILL at that point of the
N-th batch with rows (tests/kill_points.py: before the sink, after the sink's commit, after
Spark's commit log and before the group commit, during the group commit).
With ``--pause-before-delta-batch N`` it stops itself
(SIGSTOP, whole process group) with the N-th batch with rows in hand, before writing it: resumed
with SIGCONT after its partitions moved, it is a zombie in the middle of a batch.

With ``--spark-delta-table URI`` the query writes (partition, offset, writer) into that table
through Spark's own Delta sink (``writeStream.format("delta")``; ``--spark-conf`` puts
delta-spark on the session) instead of journaling. A task of each batch then counts the batches
with rows; with ``--kill-batch N`` and ``$KILL_POINT`` set, the N-th of them is killed at that
point: before the sink (by its task), after the sink's commit (Spark's commit log entry of the
batch blocked, the driver kills once the table has the batch), or at the group commit (armed by
its task). With ``--pause-file PATH``, once PATH exists a task of the next batch with rows
deletes it, writes the batch id to ``PATH.paused`` and stops the driver's process group (SIGSTOP:
the JVM, the member's heartbeat): the batch's plan is written, its rows are not in the table.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group-id", required=True)
    parser.add_argument("--group-store", required=True)
    parser.add_argument("--journal", required=True, help="JSONL file, one line per batch")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--instance-id", help="groupInstanceId (static membership)")
    parser.add_argument("--trigger-ms", type=int, default=1000)
    parser.add_argument("--heartbeat-ms", type=int, default=500)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--strategy", default="cooperative-sticky")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--available-now", action="store_true", help="one Trigger.AvailableNow run, then exit"
    )
    parser.add_argument("--delta-table", help="also write each batch into this Delta table")
    parser.add_argument("--kill-batch", type=int, default=0, help="with $KILL_POINT")
    parser.add_argument("--pause-before-delta-batch", type=int, default=0)
    parser.add_argument("--stop-between-batches", action="store_true")
    parser.add_argument("--spark-delta-table", help="write through Spark's Delta sink")
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--pause-file")
    args = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_kafka_group
    from spark_kafka_group.options import storage_options_from
    from tests import kill_points

    if kill_points.point() is not None:
        kill_points.start_member()
        kill_points.unblock_commit_log(args.checkpoint)

    builder = (
        SparkSession.builder.master("local[1]")
        .appName(f"kafka-group member {args.instance_id or os.getpid()}")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
    )
    for item in args.spark_conf:
        builder = builder.config(*item.split("=", 1))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    extra = dict(item.partition("=")[::2] for item in args.option)
    store_options = storage_options_from(extra)
    spark_kafka_group.register(spark, storage_options=store_options)

    reader = (
        spark.readStream.format("kafka-group")
        .option("kafka.bootstrap.servers", args.bootstrap_servers)
        .option("subscribe", args.topic)
        .option("groupId", args.group_id)
        .option("groupStore", args.group_store)
        .option("startingOffsets", "earliest")
        .option("heartbeatIntervalMs", str(args.heartbeat_ms))
        .option("sessionTimeoutMs", str(args.session_timeout_ms))
        .option("rebalanceTimeoutMs", str(max(10_000, 2 * args.session_timeout_ms)))
        .option("assignmentStrategy", args.strategy)
    )
    if args.instance_id:
        reader = reader.option("groupInstanceId", args.instance_id)
    for key, value in extra.items():
        reader = reader.option(key, value)

    journal = open(args.journal, "a", buffering=1)  # noqa: SIM115 - closed on exit
    lock = threading.Lock()

    delta = delta_writer(args.delta_table, args.group_id, args.instance_id or str(os.getpid()))
    landed_batches = 0

    def record_batch(frame, batch_id: int) -> None:
        nonlocal landed_batches
        if delta is None:
            rows = frame.select("partition", "offset").collect()
            records = [[r.partition, r.offset] for r in rows]
        else:
            table = frame.toArrow()
            kill_batch = bool(table.num_rows) and landed_batches + 1 == args.kill_batch
            if kill_batch and kill_points.point() == "before-sink":
                kill_points.kill("foreachBatch, before the sink", batch=batch_id)
            if table.num_rows and landed_batches + 1 == args.pause_before_delta_batch:
                print(f"pausing before writing batch {batch_id}", flush=True)
                os.killpg(os.getpgrp(), signal.SIGSTOP)  # a zombie until the test's SIGCONT
            delta.write(table, batch_id)
            records = [list(r) for r in zip(table["partition"].to_pylist(),
                                             table["offset"].to_pylist(), strict=True)]  # fmt: skip
        line = {
            "batch": batch_id,
            "pid": os.getpid(),
            "instance": args.instance_id,
            "time": time.time(),
            "records": records,
        }
        with lock:
            journal.write(json.dumps(line) + "\n")
            journal.flush()
            os.fsync(journal.fileno())
        landed_batches += bool(records) and delta is not None
        if delta is not None and records and landed_batches == args.kill_batch:
            if kill_points.point() == "after-sink":
                kill_points.kill("foreachBatch, after the sink's commit", batch=batch_id)
            elif kill_points.point() is not None:
                kill_points.arm(batch_id, batch_ends(table))

    if args.spark_delta_table:
        writer = spark_delta_writer(reader.load(), args)
    else:
        writer = (
            reader.load()
            .writeStream.foreachBatch(record_batch)
            .option("checkpointLocation", args.checkpoint)
        )
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{args.trigger_ms} milliseconds")
    query = writer.start()
    print(f"member started: pid {os.getpid()} query {query.id}", flush=True)
    if args.spark_delta_table and kill_points.point() == "after-sink":
        kill_points.kill_after_sink_commit(
            args.checkpoint, lambda: table_version(args.spark_delta_table, str(query.id))
        )

    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    while not stopping.is_set() and query.isActive:
        stopping.wait(0.5)
    if query.isActive:
        if args.stop_between_batches:
            from tests.streaming import stop_between_batches

            stop_between_batches(query)
        else:
            query.stop()
    error = query.exception()
    spark.stop()
    if error is not None:
        print(f"query failed: {error}", file=sys.stderr)
        return 1
    return 0


def batch_ends(table) -> dict[tuple[str, int], int]:
    """One past the highest offset of each (topic, partition) of a batch's Arrow table."""
    ends: dict[tuple[str, int], int] = {}
    for topic, partition, offset in zip(table["topic"].to_pylist(),
                                        table["partition"].to_pylist(),
                                        table["offset"].to_pylist(), strict=True):  # fmt: skip
        ends[(topic, partition)] = max(ends.get((topic, partition), 0), offset + 1)
    return ends


def spark_delta_writer(frame, args):
    """(partition, offset, writer) into ``--spark-delta-table`` through Spark's Delta sink, a
    task of each batch in the kill point's and ``--pause-file``'s place before the sink."""
    from pyspark.sql import functions as F

    rows = frame.select("topic", "partition", "offset")
    rows = rows.mapInArrow(in_batch_task(args, os.getpid()), rows.schema).drop("topic")
    name = args.instance_id or str(os.getpid())
    return (
        rows.withColumn("writer", F.lit(name))
        .writeStream.format("delta")
        .option("checkpointLocation", args.checkpoint)
        .option("path", args.spark_delta_table)
    )


def in_batch_task(args, driver: int):
    """The function of ``mapInArrow`` in each task of a batch bound for Spark's Delta sink: on
    the ``--kill-batch``-th batch with rows, the kill point's part (tests/kill_points.py); while
    ``--pause-file`` exists, SIGSTOP of the process group (a zombie until SIGCONT)."""
    from pyspark import TaskContext

    from tests import kill_points

    checkpoint, pause_file, kill_batch = args.checkpoint, args.pause_file, args.kill_batch

    def task(batches):
        for batch in batches:
            if batch.num_rows:
                context = TaskContext.get()
                assert context is not None
                batch_id = int(context.getLocalProperty("streaming.sql.batchId") or -1)
                if pause_file and os.path.exists(pause_file):
                    # A file, not a print: the JVM copies the workers' output, and it stops.
                    with open(f"{pause_file}.paused", "w") as paused:
                        paused.write(str(batch_id))
                    os.remove(pause_file)
                    # The driver's group: the JVM and the member's heartbeat stop; this task
                    # (in Spark's Python daemon's group) hands its rows to the stopped JVM.
                    os.killpg(os.getpgid(driver), signal.SIGSTOP)
                point = kill_points.point()
                if point and kill_points.batch_number(batch_id) == kill_batch:
                    if point == "before-sink":
                        kill_points.kill("a task of the batch, before the sink", batch=batch_id)
                    elif point == "after-sink":
                        kill_points.block_commit_log(checkpoint, batch_id)
                    else:
                        kill_points.arm(batch_id, batch_ends(batch), by=driver)
            yield batch

    return task


def table_version(uri: str, app_id: str) -> int | None:
    """The Delta table's version of the application transaction ``app_id``."""
    from deltalake import DeltaTable

    return DeltaTable(uri).transaction_version(app_id)


def delta_writer(table_uri: str | None, group: str, name: str):
    """The member's ExactlyOnceDeltaWriter (None without a table): each row it lands names
    the member in a ``writer`` column."""
    if table_uri is None:
        return None
    import pyarrow as pa

    from spark_kafka_group import ExactlyOnceDeltaWriter

    def with_writer(rows: pa.Table) -> pa.Table:
        return rows.append_column("writer", pa.array([name] * rows.num_rows, pa.string()))

    return ExactlyOnceDeltaWriter(table_uri, group=group, transform=with_writer)


if __name__ == "__main__":
    sys.exit(main())
