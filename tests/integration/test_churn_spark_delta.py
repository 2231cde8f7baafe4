"""Clean stops and restarts under churn through Spark's own Delta sink, with delta-spark: three
queries of one group write one Delta table with ``writeStream.format("delta")`` and the
``deltaSinkTable`` option; under a steady producer one of them is stopped with
``query.stop()`` (wherever its batch is) and restarted on its own checkpoint every 12 s
(test_churn.py's :func:`churn`). The table holds every produced (partition, offset) exactly
once. test_churn.py runs the same churn with Spark's file sink and with the project's
``ExactlyOnceDeltaWriter``."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from spark_kafka_group.quickstart.sample_data import create_topic
from tests.integration.test_churn import (
    PARTITIONS,
    TIMEOUTS,
    TRIGGER,
    Churned,
    _stream,
    churn,
    delta_records,
)
from tests.streaming import source_options

pytestmark = [pytest.mark.maven_spark, pytest.mark.spark, pytest.mark.broker]


def spark_delta_group(
    spark: SparkSession, options: dict[str, str], root: Path, uri: str
) -> Churned:
    def checkpoint(i: int) -> Path:
        return root / f"spark-delta-{i}-checkpoint"

    def start(i: int) -> StreamingQuery:
        return (
            _stream(spark, {**options, "deltaSinkTable": uri})
            .writeStream.format("delta")
            .option("checkpointLocation", str(checkpoint(i)))
            .trigger(processingTime=TRIGGER)
            .start(uri)
        )

    return Churned(options["groupId"], start, checkpoint)


def test_queries_stopped_and_restarted_under_churn_write_spark_s_delta_sink_once(
    delta_spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    create_topic(bootstrap_servers, topic_name, PARTITIONS)
    uri = str(tmp_path / "events-table")
    # Created first: three queries creating the table at once, two fail on the first's protocol.
    delta_spark.createDataFrame([], "topic STRING, partition INT, offset BIGINT").write.format(
        "delta"
    ).save(uri)
    options = source_options(
        bootstrap_servers, topic_name, "g-churn-spark-delta", group_store, **TIMEOUTS
    )
    group = spark_delta_group(delta_spark, options, tmp_path, uri)
    churn(
        [group], {group.group: lambda: delta_records(uri)},
        bootstrap_servers=bootstrap_servers, topic=topic_name, group_store=group_store,
    )  # fmt: skip
