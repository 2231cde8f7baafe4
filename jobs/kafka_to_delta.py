"""Ingest Kafka topics into a Delta table with ``format("kafka-group")``, exactly once.

Two sinks, chosen at start and printed:

* **Spark's Delta sink** (``writeStream.format("delta")``) when Delta's JVM classes are on the
  classpath (Databricks, or ``--packages io.delta:delta-spark_2.13:4.0.0`` with the Delta
  session extension). Delta's sink is idempotent per query id and batch id by itself.
* Otherwise **delta-rs in foreachBatch**: each micro-batch is appended with a Delta
  transaction identifier ``(app id = kafka-group-ingest-<query id>, version = batch id)``;
  a batch whose id the table already recorded for this query is skipped (Spark re-runs the
  last batch after a crash with the same batch id). Records the table already holds (same
  topic, partition, offset) are dropped too: after a restart or a partition move the group
  resumes from its last committed offset, which may re-read the previous owner's last batch
  under a new batch id. So a restart writes nothing twice.

With no arguments everything is embedded (a Tansu broker with sample data, local Spark, a
temporary directory) and the job checks that the table holds every produced record once:

    python jobs/kafka_to_delta.py
    spark-submit jobs/kafka_to_delta.py --bootstrap-servers broker:9092 --topic events \\
        --group-id events-ingest --group-store s3://bucket/kafka-groups \\
        --table s3://bucket/tables/events --checkpoint s3://bucket/checkpoints/events
    spark-submit jobs/kafka_to_delta.py --options-file conf/kafka-group-source.properties \\
        --table /data/events --checkpoint /data/checkpoints/events --trigger 30s
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import uuid
from collections.abc import Mapping
from typing import Any

# Python workers must run this interpreter (docs/design.md, "Spark facts that shape the reader").
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from pyspark.sql import DataFrame, SparkSession

import spark_kafka_group
from spark_kafka_group.embedded import bootstrap_or_embedded
from spark_kafka_group.options import read_properties, storage_options_from

DELTA_JVM_CLASSES = (
    "io.delta.sql.DeltaSparkSessionExtension",
    "org.apache.spark.sql.delta.sources.DeltaDataSource",
)


def delta_jvm_available(spark: SparkSession) -> bool:
    """Whether Spark's own Delta data source is on the JVM classpath (py4j class lookup)."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:  # Spark Connect: ask the server by trying the format instead
        return False
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        for name in DELTA_JVM_CLASSES:
            loader.loadClass(name)
        return True
    except Exception:
        return False


class DeltaRsBatchWriter:
    """foreachBatch function appending each batch with delta-rs, idempotently.

    The Delta transaction identifier (app id, version) is the query id and the batch id: the
    app id is only known once the query started, so :meth:`set_query_id` is called right
    after ``start()`` (the first batch waits for it), with the checkpoint's ``metadata`` file
    as fallback (the query id is stable across restarts of one checkpoint).
    """

    def __init__(
        self,
        table_uri: str,
        *,
        checkpoint: str,
        storage_options: Mapping[str, str] | None = None,
        fail_after_batch: int | None = None,
    ) -> None:
        self.table_uri = table_uri
        self.checkpoint = checkpoint
        self.storage_options = dict(storage_options or {}) or None
        self.fail_after_batch = fail_after_batch
        self._query_id: str | None = None
        self._known = threading.Event()
        self.written = 0
        self.skipped = 0

    def set_query_id(self, query_id: str) -> None:
        self._query_id = str(query_id)
        self._known.set()

    @property
    def app_id(self) -> str:
        if not self._known.wait(60) and self._query_id is None:
            path = os.path.join(self.checkpoint, "metadata")
            with open(path, encoding="utf-8") as f:
                self._query_id = json.loads(f.readline())["id"]
        return f"kafka-group-ingest-{self._query_id}"

    def _table(self) -> Any:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            return DeltaTable(self.table_uri, storage_options=self.storage_options)
        except TableNotFoundError:
            return None

    def _already_written(self, table: Any, data: Any) -> Any:
        """Rows of ``data`` the table already has (same topic, partition and offset): a
        partition that moved between members, or a query restarted on another member id,
        may re-read the previous owner's last uncommitted batch."""
        import pyarrow.compute as pc

        from spark_kafka_group.store.files import query_table

        lo, hi = pc.min_max(data["offset"]).values()
        topics = ", ".join(
            "'" + str(t).replace("'", "''") + "'" for t in pc.unique(data["topic"]).to_pylist()
        )
        existing = query_table(
            table,
            'SELECT topic, "partition", "offset" FROM t '
            f'WHERE "offset" BETWEEN {int(lo.as_py())} AND {int(hi.as_py())} '
            f"AND topic IN ({topics})",
        )
        # DataFusion answers strings as string_view; the join needs the batch's own types
        return existing.cast(data.select(existing.column_names).schema)

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        from deltalake import CommitProperties, Transaction, write_deltalake

        app_id = self.app_id
        table = self._table()
        done = None if table is None else table.transaction_version(app_id)
        if done is not None and done >= batch_id:
            self.skipped += 1
            print(f"batch {batch_id}: already in the table (txn {app_id} v{done}); skipped")
            return
        data = frame.toArrow()
        duplicates = 0
        if table is not None and data.num_rows:
            existing = self._already_written(table, data)
            if existing.num_rows:
                keys = ["topic", "partition", "offset"]
                fresh = data.join(existing, keys=keys, join_type="left anti")
                duplicates = data.num_rows - fresh.num_rows
                data = fresh.select(frame.columns)
        if data.num_rows:
            write_deltalake(
                self.table_uri,
                data,
                mode="append",
                storage_options=self.storage_options,
                commit_properties=CommitProperties(
                    app_transactions=[Transaction(app_id=app_id, version=int(batch_id))]
                ),
            )
            self.written += data.num_rows
        note = f" ({duplicates} re-read records were already in the table)" if duplicates else ""
        print(f"batch {batch_id}: wrote {data.num_rows} records{note}")
        if self.fail_after_batch is not None and batch_id >= self.fail_after_batch:
            raise RuntimeError(f"simulated crash after writing batch {batch_id} (a test hook)")


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
    parser.add_argument("--table", help="the Delta table (default: a temporary directory)")
    parser.add_argument("--checkpoint", help="checkpoint location (default: beside the table)")
    parser.add_argument(
        "--table-option",
        action="append",
        metavar="KEY=VALUE",
        help="delta-rs storage option for the table (e.g. AWS_REGION=...)",
    )
    parser.add_argument(
        "--trigger",
        default="availableNow",
        help="'availableNow' (default: read what is there, then stop) or an interval, e.g. 30s",
    )
    parser.add_argument("--max-offsets-per-trigger", type=int)
    parser.add_argument("--sink", choices=("auto", "delta", "delta-rs"), default="auto")
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local[2])")
    parser.add_argument("--partitions", type=int, default=3, help="sample topic partitions")
    parser.add_argument("--records-per-partition", type=int, default=200, help="sample size")
    parser.add_argument("--fail-after-batch", type=int, help=argparse.SUPPRESS)  # test hook
    return parser.parse_args(argv)


def _spark(args: argparse.Namespace) -> SparkSession:
    builder = SparkSession.builder.appName("kafka-group kafka_to_delta")
    if args.master:
        builder = builder.master(args.master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # plain `python`, not spark-submit
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


def table_rows(table_uri: str, storage_options: Mapping[str, str] | None = None) -> Any:
    """The ingested table as a pyarrow Table (delta-rs, no Spark needed)."""
    from deltalake import DeltaTable

    from spark_kafka_group.store.files import query_table

    table = DeltaTable(table_uri, storage_options=dict(storage_options or {}) or None)
    return query_table(table, "SELECT * FROM t")


def main(argv: list[str] | None = None, *, spark: SparkSession | None = None) -> int:
    args = parse_args(argv)
    work = tempfile.mkdtemp(prefix="kafka-to-delta-")
    table = args.table or os.path.join(work, "table")
    checkpoint = args.checkpoint or (
        os.path.join(work, "checkpoint") if not args.table else table.rstrip("/") + "_checkpoint"
    )
    options = read_properties(args.options_file) if args.options_file else {}
    options.update(_kv(args.option))
    embedded = not args.bootstrap_servers and "kafka.bootstrap.servers" not in options
    with bootstrap_or_embedded(
        args.bootstrap_servers or options.get("kafka.bootstrap.servers")
    ) as servers:
        produced = 0
        topics = args.topic or ([] if "subscribe" in options else None)
        if embedded:
            topic = (args.topic or [f"ingest-{uuid.uuid4().hex[:6]}"])[0]
            from spark_kafka_group.sample_data import create_topic, produce_sample

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
        options.setdefault("startingOffsets", "earliest")
        if args.max_offsets_per_trigger:
            options["maxOffsetsPerTrigger"] = str(args.max_offsets_per_trigger)

        own_spark = spark is None
        spark = spark or _spark(args)
        store_options = storage_options_from(options)
        spark_kafka_group.register(spark, storage_options=store_options)
        use_delta = args.sink == "delta" or (args.sink == "auto" and delta_jvm_available(spark))
        reader = spark.readStream.format("kafka-group")
        for key, value in options.items():
            reader = reader.option(key, value)
        stream = reader.load()
        writer: Any
        batch_writer = None
        if use_delta:
            print(f"Sink: Spark's Delta sink (Delta JVM classes found) -> {table}")
            writer = stream.writeStream.format("delta").option("path", table)
        else:
            print(
                "Sink: delta-rs in foreachBatch, idempotent by (query id, batch id) "
                f"(no Delta JVM classes) -> {table}"
            )
            batch_writer = DeltaRsBatchWriter(
                table,
                checkpoint=checkpoint,
                storage_options=_kv(args.table_option),
                fail_after_batch=args.fail_after_batch,
            )
            writer = stream.writeStream.foreachBatch(batch_writer)
        writer = writer.option("checkpointLocation", checkpoint).queryName("kafka_to_delta")
        if args.trigger == "availableNow":
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=args.trigger)
        query = writer.start()
        if batch_writer is not None:
            batch_writer.set_query_id(query.id)
        print(f"Query {query.id} started (group {options['groupId']}, checkpoint {checkpoint})")
        failed = None
        try:
            query.awaitTermination()
        except KeyboardInterrupt:
            query.stop()
        except Exception as exc:  # the query failed: report it (its member left the group)
            failed = exc
        if failed is not None:
            print(f"error: the query failed: {str(failed).splitlines()[0]}", file=sys.stderr)
            if own_spark:
                spark.stop()
            return 1
        if use_delta:
            rows = spark.read.format("delta").load(table).count()
        else:
            rows = table_rows(table, _kv(args.table_option)).num_rows
        print(f"The Delta table {table} holds {rows} records")
        if own_spark:
            spark.stop()
        if embedded and rows != produced:
            print(f"error: expected {produced} records, the table has {rows}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
