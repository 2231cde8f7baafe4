"""Quickstart: read a Kafka topic with ``format("kafka-group")`` and show the group's offsets.

With no arguments everything is embedded: a Tansu broker on a free port, local Spark and a
group store in a temporary directory. With ``--bootstrap-servers`` it uses a real cluster.

    python jobs/quickstart.py
    spark-submit jobs/quickstart.py --bootstrap-servers broker:9092 --group-store s3://bucket/groups
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import uuid

# Python workers must run this interpreter (DESIGN section 6).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from pyspark.sql import SparkSession

import spark_kafka_group
from spark_kafka_group.embedded import bootstrap_or_embedded
from spark_kafka_group.sample_data import create_topic, produce_sample


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", help="a real Kafka cluster (default: embedded)")
    parser.add_argument("--topic", default=f"quickstart-{uuid.uuid4().hex[:6]}")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--records-per-partition", type=int, default=1000)
    parser.add_argument("--group-id", default="quickstart")
    parser.add_argument("--group-store", help="group store (default: a temporary directory)")
    args = parser.parse_args(argv)

    work = tempfile.mkdtemp(prefix="kafka-group-quickstart-")
    store = args.group_store or os.path.join(work, "groups")
    with bootstrap_or_embedded(args.bootstrap_servers) as servers:
        create_topic(servers, args.topic, args.partitions)
        produced = produce_sample(
            servers,
            args.topic,
            partitions=args.partitions,
            per_partition=args.records_per_partition,
        )
        total = sum(produced.values())
        print(f"Produced {total} records to {args.topic} ({args.partitions} partitions)")

        spark = (
            SparkSession.builder.master("local[2]")
            .appName("kafka-group quickstart")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.ui.enabled", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("WARN")
        spark_kafka_group.register(spark)

        stream = (
            spark.readStream.format("kafka-group")
            .option("kafka.bootstrap.servers", servers)
            .option("subscribe", args.topic)
            .option("groupId", args.group_id)
            .option("groupStore", store)
            .option("startingOffsets", "earliest")
            .load()
        )
        query = (
            stream.selectExpr(
                "partition",
                "offset",
                "CAST(key AS STRING) AS key",
                "CAST(value AS STRING) AS value",
            )
            .writeStream.format("memory")
            .queryName("quickstart")
            .option("checkpointLocation", os.path.join(work, "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

        rows = spark.sql("SELECT * FROM quickstart")
        read = rows.count()
        print(f"Read {read} records with format('kafka-group'); a sample:")
        rows.orderBy("partition", "offset").show(5, truncate=False)

        group = spark_kafka_group.describe_group(store, args.group_id)
        print(f"Committed offsets of group {args.group_id!r} in the Delta group log {group.uri}:")
        for (topic, partition), offset in sorted(group.committed.items()):
            print(f"  {topic}-{partition}: {offset}")
        spark.stop()
        if read != total:
            print(f"error: expected {total} records, read {read}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
