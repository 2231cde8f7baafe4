"""spark-kafka-group: a Kafka streaming source for PySpark with consumer-group coordination.

Use::

    import spark_kafka_group
    spark_kafka_group.register(spark)      # or rely on automatic registration (pyspark 4.0+)
    df = (spark.readStream.format("kafka-group")
          .option("kafka.bootstrap.servers", "broker:9092")
          .option("subscribe", "events")
          .option("groupId", "ingest")
          .option("groupStore", "s3://my-bucket/kafka-groups")  # shared by the group's queries
          .load())
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from spark_kafka_group._version import __version__
from spark_kafka_group.source.format_name import FORMAT_NAME

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_kafka_group.listener.lag import lag

    # What __getattr__ loads on first use, typed for the type checker.
    from spark_kafka_group.ops.admin import describe_group, reset_offsets
    from spark_kafka_group.ops.leave import leave_group
    from spark_kafka_group.sink.delta import ExactlyOnceDeltaWriter

__all__ = [
    "FORMAT_NAME",
    "ExactlyOnceDeltaWriter",
    "__version__",
    "describe_group",
    "lag",
    "leave_group",
    "register",
    "reset_offsets",
]


def register(spark: SparkSession, *, storage_options: Mapping[str, str] | None = None) -> None:
    """Register the ``kafka-group`` data source with ``spark`` and add the listener that
    commits each completed batch from the query progress (idempotent).

    ``storage_options``: the delta-rs storage options of the queries' group store (their
    ``groupStore.*`` options without the prefix) when it needs any: the listener runs in the
    driver, not where the source reads its options, and offsets never carry credentials.
    """
    from spark_kafka_group.listener.progress import GroupProgressListener
    from spark_kafka_group.source.datasource import KafkaGroupDataSource

    try:
        spark.dataSource.register(KafkaGroupDataSource)
    except Exception as exc:
        # pyspark 4.0 refuses to register a name twice, and it may already have registered
        # ours automatically (pyspark_kafka_group.DefaultSource).
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
            raise
    options = dict(storage_options or {}) or None
    current = getattr(spark, "_kafka_group_listener", None)
    if current is not None and (options is None or current._storage_options == options):
        return  # a later register(spark) keeps the options given before
    if current is not None:
        spark.streams.removeListener(current)
    listener = GroupProgressListener(options)
    spark.streams.addListener(listener)
    # Kept on the session itself: one listener per session, whoever calls register().
    spark._kafka_group_listener = listener  # type: ignore[attr-defined]  # our own attribute


def __getattr__(name: str) -> object:
    # The group operations and the Delta writer import pyspark / deltalake: loaded on first use.
    if name in ("describe_group", "reset_offsets"):
        from spark_kafka_group.ops import admin

        return getattr(admin, name)
    if name == "lag":
        from spark_kafka_group.listener.lag import lag

        return lag
    if name == "ExactlyOnceDeltaWriter":
        from spark_kafka_group.sink.delta import ExactlyOnceDeltaWriter

        return ExactlyOnceDeltaWriter
    if name == "leave_group":
        from spark_kafka_group.ops.leave import leave_group

        return leave_group
    raise AttributeError(f"module 'spark_kafka_group' has no attribute {name!r}")
