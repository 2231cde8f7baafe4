"""Ingest Kafka topics into a Delta table, exactly once across the whole consumer group.

The job reads with ``format("kafka-group")`` and writes each micro-batch with
``foreachBatch(ExactlyOnceDeltaWriter(...))``: the batch's rows and, per Kafka partition, the
offset they end at land in one Delta commit (delta-rs). So every record lands in the table
once whatever happens to the job: a crash and a restart on the same checkpoint (the batch run
again is dropped, logged), several copies with the same ``groupId`` splitting the partitions
between them, and a partition that moves from one copy to another after a copy was killed or
stopped (its new owner drops what the old one wrote). A copy paused past its session timeout,
whose partitions were written by another since, fails with ``PartitionMovedError`` instead of
writing them. Each batch's rows go through the driver: size batches with
``--max-offsets-per-trigger``.

With no arguments everything is local (an embedded Tansu broker with sample data, local
Spark, a temporary directory), and the job checks that the table holds every produced record
once:

    python jobs/kafka_to_delta.py
    spark-submit --properties-file conf/spark-defaults.conf jobs/kafka_to_delta.py \\
        --options-file conf/kafka-group-source.properties \\
        --table s3://bucket/tables/events --checkpoint s3a://bucket/checkpoints/events \\
        --trigger 30s

Several copies write one table with the same ``groupId`` and ``--table``, each with a
``--checkpoint`` of its own (the default, ``<table>_checkpoint``, is one per table). A SIGTERM
(or SIGINT) to the job's Python process stops a copy cleanly: its query stops, its member
leaves the group (or, when the stop cut a batch, stays until the copy restarts on its
checkpoint), and the job exits 0. Under spark-submit that process is the ``python``
spark-submit started; a signal to spark-submit itself, or Ctrl-C in its terminal, stops Spark
under the query (exit 143 or 130, errors logged), no worse than a kill: the restart writes
nothing twice.

The table is a delta-rs table URI (a local directory, ``s3://``, ``az://``/``abfss://``,
``gs://``), written with the same ``groupStore.<key>`` storage options as the group log; the
checkpoint is a Spark path (anything Spark's Hadoop file systems reach); the options file is
read on the driver's machine. Command-line flags override the options file.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import tempfile
import threading
import uuid

# Python workers must run this interpreter (docs/design.md, "Spark facts that shape the reader").
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from pyspark.sql import SparkSession

import spark_kafka_group
from spark_kafka_group.options import read_properties, storage_options_from
from spark_kafka_group.quickstart.embedded import bootstrap_or_embedded
from spark_kafka_group.sink.delta import ExactlyOnceDeltaWriter

_INTERVAL = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)\s*$")
_UNITS = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
#: Set by a SIGTERM or SIGINT (Ctrl-C) to this process: the job stops its query.
STOP = threading.Event()


def trigger_interval(text: str) -> str:
    """``--trigger``'s value in Spark's form: ``availableNow`` as is, ``30s`` as ``30 seconds``
    (ms, s, m, h, d), Spark's own interval strings (``30 seconds``) as given."""
    if text == "availableNow":
        return text
    short = _INTERVAL.match(text)
    if short:
        return f"{short.group(1)} {_UNITS[short.group(2)]}"
    if re.match(r"^\s*\d+\s+[a-z]+\s*$", text, flags=re.IGNORECASE):
        return text.strip()
    raise argparse.ArgumentTypeError(
        f"--trigger {text!r}: expected 'availableNow' or an interval such as 30s, 500ms, 5m, "
        "1h or '30 seconds'"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", help="Kafka cluster (default: embedded + sample)")
    parser.add_argument("--topic", action="append", help="topic to ingest (repeatable)")
    parser.add_argument("--group-id", help="the consumer group (default: kafka-to-delta)")
    parser.add_argument("--group-store", help="where group logs live (the groupStore option)")
    parser.add_argument("--options-file", help="source options, key=value lines (see conf/)")
    parser.add_argument(
        "--option", action="append", metavar="KEY=VALUE", help="a source option (repeatable)"
    )
    parser.add_argument(
        "--table", help="the Delta table's delta-rs URI (default: a temporary directory)"
    )
    parser.add_argument(
        "--checkpoint", help="checkpoint location (default: <table>_checkpoint beside the table)"
    )
    parser.add_argument(
        "--trigger",
        default="availableNow",
        type=trigger_interval,
        help="'availableNow' (default: read what is there, then stop) or an interval: 30s, "
        "500ms, 5m, 1h, or Spark's '30 seconds'",
    )
    parser.add_argument("--max-offsets-per-trigger", type=int)
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local[2])")
    parser.add_argument("--partitions", type=int, default=3, help="sample topic partitions")
    parser.add_argument("--records-per-partition", type=int, default=200, help="sample size")
    return parser.parse_args(argv)


def _spark(args: argparse.Namespace) -> SparkSession:
    builder = SparkSession.builder.appName("kafka-group kafka_to_delta")
    if args.master:
        builder = builder.master(args.master)
    if "PYSPARK_GATEWAY_PORT" not in os.environ and not args.master:  # plain `python`
        builder = builder.master("local[2]").config("spark.ui.enabled", "false")
        builder = builder.config("spark.sql.shuffle.partitions", "2")
        builder = builder.config("spark.ui.showConsoleProgress", "false")
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def _kv(items: list[str] | None) -> dict[str, str]:
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"expected KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


def main(argv: list[str] | None = None, *, spark: SparkSession | None = None) -> int:
    args = parse_args(argv)
    work = tempfile.mkdtemp(prefix="kafka-to-delta-")
    table = args.table or os.path.join(work, "table")
    checkpoint = args.checkpoint or table.rstrip("/") + "_checkpoint"
    options = read_properties(args.options_file) if args.options_file else {}
    options.update(_kv(args.option))
    embedded = not args.bootstrap_servers and "kafka.bootstrap.servers" not in options

    own_spark = spark is None
    spark = spark or _spark(args)
    with bootstrap_or_embedded(
        args.bootstrap_servers or options.get("kafka.bootstrap.servers")
    ) as servers:
        produced = 0
        topics = args.topic or ([] if "subscribe" in options else None)
        if embedded:
            topic = (args.topic or [f"ingest-{uuid.uuid4().hex[:6]}"])[0]
            from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample

            create_topic(servers, topic, args.partitions)
            counts = produce_sample(
                servers, topic, partitions=args.partitions, per_partition=args.records_per_partition
            )
            produced = sum(counts.values())
            print(f"Produced {produced} sample records to {topic}")
            topics = [topic]
        options["kafka.bootstrap.servers"] = servers
        if topics:
            options["subscribe"] = ",".join(topics)
        options.setdefault("groupId", args.group_id or "kafka-to-delta")
        if args.group_id:
            options["groupId"] = args.group_id
        if args.group_store:
            options["groupStore"] = args.group_store
        elif embedded:
            options.setdefault("groupStore", os.path.join(work, "groups"))
        if embedded:  # the sample was produced before the query started
            options.setdefault("startingOffsets", "earliest")
        if args.max_offsets_per_trigger:
            options["maxOffsetsPerTrigger"] = str(args.max_offsets_per_trigger)

        storage_options = storage_options_from(options)
        spark_kafka_group.register(spark, storage_options=storage_options)
        reader = spark.readStream.format("kafka-group")
        for key, value in options.items():
            reader = reader.option(key, value)
        sink = ExactlyOnceDeltaWriter(
            table, group=options["groupId"], storage_options=storage_options or None
        )
        writer = (
            reader.load()
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", checkpoint)
            .queryName("kafka_to_delta")
        )
        if args.trigger == "availableNow":
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=args.trigger)
        query = writer.start()
        print(f"Sink: ExactlyOnceDeltaWriter -> {table}")
        print(f"Query {query.id} started (group {options['groupId']}, checkpoint {checkpoint})")
        failed = None
        try:
            # Wait in short calls: a stop signal is noticed between two of them, never inside
            # one (an interrupted Py4J call leaves the connection to the JVM unusable).
            while not query.awaitTermination(1):
                if STOP.is_set():
                    print("Stopping the query", flush=True)
                    query.stop()
                    break
        except KeyboardInterrupt:  # a second stop signal
            query.stop()
        except Exception as exc:  # the query failed: report it (its member left the group)
            failed = exc
        if failed is not None:
            print(f"error: the query failed: {str(failed).splitlines()[0]}", file=sys.stderr)
            if own_spark:
                spark.stop()
            return 1
        try:
            rows = DeltaTable(table, storage_options=storage_options or None).count()
        except TableNotFoundError:  # no batch had rows: the writer made no table
            rows = 0
            print(f"No records were read: there is no Delta table at {table} yet")
        else:
            print(f"The Delta table {table} holds {rows} records")
        if own_spark:
            spark.stop()
        if embedded and rows != produced:
            print(f"error: expected {produced} records, the table has {rows}", file=sys.stderr)
            return 1
    return 0


def request_stop(signum: int, frame: object) -> None:
    """SIGTERM or SIGINT: stop the query (a second one stops waiting for it)."""
    if STOP.is_set():
        raise KeyboardInterrupt
    STOP.set()


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    sys.exit(main())
