"""Executor-side fetching: one offset range of one partition into pyarrow RecordBatches."""

from spark_kafka_group.fetcher.fetch import DEFAULT_MAX_BATCH_ROWS, FetchSpec, fetch
from spark_kafka_group.fetcher.pool import ConsumerPool, consumer_pool
from spark_kafka_group.fetcher.schema import arrow_schema, spark_schema_ddl

__all__ = [
    "DEFAULT_MAX_BATCH_ROWS",
    "ConsumerPool",
    "FetchSpec",
    "arrow_schema",
    "consumer_pool",
    "fetch",
    "spark_schema_ddl",
]
