"""spark-kafka-group: a Kafka streaming source for PySpark with consumer-group coordination.

Use::

    import spark_kafka_group
    spark_kafka_group.register(spark)      # or rely on automatic registration (pyspark 4.0+)
    df = (spark.readStream.format("kafka-group")
          .option("kafka.bootstrap.servers", "broker:9092")
          .option("subscribe", "events")
          .option("groupId", "ingest")
          .load())
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_kafka_group._version import __version__

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["FORMAT_NAME", "__version__", "register"]

#: The name passed to ``spark.readStream.format(...)``.
FORMAT_NAME = "kafka-group"


def register(spark: SparkSession) -> None:
    """Register the ``kafka-group`` data source with ``spark`` (idempotent)."""
    from spark_kafka_group.source.datasource import KafkaGroupDataSource

    spark.dataSource.register(KafkaGroupDataSource)
