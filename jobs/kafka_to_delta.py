"""Ingest Kafka topics into a Delta table with ``format("kafka-group")`` and Spark's Delta sink.

The micro-batches go from the executors straight into the table through Spark's Delta sink
(``writeStream.format("delta")``, from delta-spark): nothing is collected on the driver. The
sink records each batch in the table with the query's id and the batch id, and skips a batch
the table already has, so a job that crashes and restarts on the same checkpoint writes every
record exactly once: Spark re-runs the batch it had not finished with the same offset range,
and the sink drops it if it got into the table before the crash. (Several copies of the job
with the same ``groupId`` split the partitions between them; when a partition moves from one
copy to another, the new owner starts at the old owner's last commit, so the old owner's last
uncommitted batch may be written a second time by the new one.)

The job needs delta-spark: its Python package (``pip install delta-spark``, the package's
``spark-delta`` extra) and its jars for your Spark line with Delta's session extension and
catalog (``conf/spark-defaults.conf``; on Databricks Delta is built in). Without them it stops
at once with an error that says so.

With no arguments everything is local (an embedded Tansu broker with sample data, local
Spark, a temporary directory), and the job checks that the table holds every produced record
once. Run with ``python``, it puts on ``spark.jars`` the delta-spark jars that the checkout's
``scripts/setup`` fetched into ``.jvm/delta-spark`` (or ``$SPARK_KAFKA_GROUP_JVM/delta-spark``);
without them it says how to get them:

    python jobs/kafka_to_delta.py
    spark-submit --properties-file conf/spark-defaults.conf jobs/kafka_to_delta.py \\
        --options-file conf/kafka-group-source.properties \\
        --table s3a://bucket/tables/events --checkpoint s3a://bucket/checkpoints/events \\
        --trigger 30s

The table and the checkpoint are Spark paths (anything Spark's Hadoop file systems reach:
``s3a://``, ``abfss://``, ``gs://``, HDFS, a local directory); the options file is read on the
driver's machine. Command-line flags override the options file.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import re
import sys
import tempfile
import uuid

# Python workers must run this interpreter (docs/design.md, "Spark facts that shape the reader").
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

import pyspark
from pyspark.sql import SparkSession

import spark_kafka_group
from spark_kafka_group.options import read_properties, storage_options_from
from spark_kafka_group.quickstart.embedded import bootstrap_or_embedded

#: Spark's Delta data source (the sink) and Delta's session extension, from delta-spark's jars.
DELTA_JVM_CLASSES = (
    "org.apache.spark.sql.delta.sources.DeltaDataSource",
    "io.delta.sql.DeltaSparkSessionExtension",
)
#: Where scripts/setup puts the jars of jvm/pom.xml (delta-spark's in its delta-spark folder).
JVM_DIR = os.environ.get("SPARK_KAFKA_GROUP_JVM") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".jvm"
)
DELTA_SQL_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
NO_DELTA = (
    "Spark's Delta sink (delta-spark) is not on this Spark session's classpath ({missing}). "
    "This job writes through it: install the Python package with `pip install delta-spark` "
    "(the package's spark-delta extra) and give Spark the jars of delta-spark "
    "for its Spark line with Delta's session extension and catalog: run with `python`, it "
    "uses those that the checkout's scripts/setup fetched into .jvm/delta-spark; or "
    "`spark-submit --properties-file conf/spark-defaults.conf` (spark.jars.packages "
    "io.delta:delta-spark_<spark line>_2.13:<delta version>, such as "
    "io.delta:delta-spark_4.2_2.13:4.4.0 for Spark 4.2), or run on Databricks, where Delta is "
    "built in."
)


_INTERVAL = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)\s*$")
_UNITS = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


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


def delta_jars(jvm_dir: str = JVM_DIR) -> list[str]:
    """The delta-spark jars scripts/setup fetched (jvm/pom.xml), or [] when there are none."""
    return sorted(glob.glob(os.path.join(jvm_dir, "delta-spark", "*.jar")))


def jars_spark_line(jars: list[str]) -> str | None:
    """The Spark line the delta-spark jar is built for (``delta-spark_4.2_2.13-4.4.0.jar``)."""
    for jar in jars:
        found = re.match(r"delta-spark_(\d+\.\d+)_", os.path.basename(jar))
        if found:
            return found.group(1)
    return None


class DeltaSparkMissing(RuntimeError):
    """delta-spark is not available to this job's Spark session."""


def missing_delta_classes(spark: SparkSession) -> list[str]:
    """The classes of :data:`DELTA_JVM_CLASSES` the driver's JVM cannot load (py4j). Empty on
    Spark Connect, where the server has its own classpath and the sink reports for itself."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return []
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    missing = []
    for name in DELTA_JVM_CLASSES:
        try:
            loader.loadClass(name)
        except Exception:  # py4j's Py4JJavaError wrapping ClassNotFoundException
            missing.append(name)
    return missing


def require_delta(spark: SparkSession) -> None:
    """Raise :class:`DeltaSparkMissing` naming the fix unless Spark's Delta sink is there."""
    missing = missing_delta_classes(spark)
    if missing:
        jars = delta_jars()
        line = jars_spark_line(jars)
        found = (
            f"; {JVM_DIR}/delta-spark holds jars for Spark {line}, this is pyspark "
            f"{pyspark.__version__}"
            if line
            else f"; no delta-spark jars in {JVM_DIR}/delta-spark"
        )
        raise DeltaSparkMissing(NO_DELTA.format(missing="no " + ", no ".join(missing) + found))


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
    parser.add_argument("--table", help="the Delta table's path (default: a temporary directory)")
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
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # plain `python`, not spark-submit
        if not args.master:
            builder = builder.master("local[2]").config("spark.ui.enabled", "false")
            builder = builder.config("spark.sql.shuffle.partitions", "2")
            builder = builder.config("spark.ui.showConsoleProgress", "false")
        jars = delta_jars()
        spark_line = ".".join(pyspark.__version__.split(".")[:2])
        if jars_spark_line(jars) == spark_line and importlib.util.find_spec("delta") is not None:
            # scripts/setup's jars, not spark.jars.packages: no Ivy resolution (its cache
            # may hold a pom without its jar, and two jobs would race on it)
            builder = builder.config("spark.jars", ",".join(jars))
            for key, value in DELTA_SQL_CONF.items():
                builder = builder.config(key, value)
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
    try:
        require_delta(spark)
    except DeltaSparkMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        if own_spark:
            spark.stop()
        return 2

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

        spark_kafka_group.register(spark, storage_options=storage_options_from(options))
        reader = spark.readStream.format("kafka-group")
        for key, value in options.items():
            reader = reader.option(key, value)
        writer = (
            reader.load()
            .writeStream.format("delta")
            .option("checkpointLocation", checkpoint)
            .queryName("kafka_to_delta")
        )
        if args.trigger == "availableNow":
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=args.trigger)
        query = writer.start(table)
        print(f"Sink: Spark's Delta sink -> {table}")
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
        rows = spark.read.format("delta").load(table).count()
        print(f"The Delta table {table} holds {rows} records")
        if own_spark:
            spark.stop()
        if embedded and rows != produced:
            print(f"error: expected {produced} records, the table has {rows}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
