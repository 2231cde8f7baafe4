"""A Spark Connect client application, as on Databricks serverless or a shared cluster:
``SparkSession.builder.remote("local[2]")`` starts a local Spark Connect server in this
process's JVM and talks to it over gRPC. The streaming source, its Python stream reader and
the progress listener all run on the server side. Started by
tests/integration/test_spark_connect.py; one JSON argument (see there).

Events (tests/spark_apps.py ``emit``): ``read`` once the memory sink holds ``expected``
rows (with the rows and the query's member), then, after a ``stop`` line on stdin,
``stopped``.
"""

from __future__ import annotations

import json
import sys
import time

from pyspark.sql import SparkSession

import spark_kafka_group
from spark_kafka_group.listener.progress import group_offsets
from tests.spark_apps import emit


def main(config: dict) -> int:
    spark = (
        SparkSession.builder.remote("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
    spark_kafka_group.register(spark)
    query = (
        spark.readStream.format("kafka-group")
        .options(**config["options"])
        .load()
        .selectExpr("partition", "offset")
        .writeStream.format("memory")
        .queryName("kafka_group_rows")
        .option("checkpointLocation", config["checkpoint"])
        .trigger(processingTime=config["trigger"])
        .start()
    )
    deadline = time.monotonic() + config["timeout_s"]
    rows = spark.table("kafka_group_rows")
    members: list[str] = []
    while rows.count() < config["expected"] or not members:
        if query.exception() is not None or time.monotonic() > deadline:
            raise SystemExit(f"query: {query.exception()}; read {rows.count()} rows")
        time.sleep(0.5)
        members = [o.member for o in group_offsets(query.lastProgress) if o.member]
    member = members[0]
    emit("read", records=[[r.partition, r.offset] for r in rows.collect()], member=member)
    sys.stdin.readline()  # the test reads the group log while the query still runs
    query.stop()
    emit("stopped")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
