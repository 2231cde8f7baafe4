"""Automatic registration hook: pyspark imports top-level ``pyspark_*`` modules and registers
their ``DefaultSource``, so ``format("kafka-group")`` works without calling ``register()``."""

from spark_kafka_group.source.datasource import KafkaGroupDataSource as DefaultSource

__all__ = ["DefaultSource"]
