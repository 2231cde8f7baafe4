"""Executor-side fetching: a task's offset ranges, fetched together, into pyarrow RecordBatches."""

from spark_kafka_group.fetcher.fetch import fetch
from spark_kafka_group.fetcher.pool import ConsumerPool, consumer_pool
from spark_kafka_group.fetcher.schema import arrow_schema, spark_schema_ddl
from spark_kafka_group.fetcher.spec import DEFAULT_MAX_BATCH_ROWS, FetchSpec

__all__ = [
    "DEFAULT_MAX_BATCH_ROWS",
    "ConsumerPool",
    "FetchSpec",
    "arrow_schema",
    "consumer_pool",
    "fetch",
    "spark_schema_ddl",
]
