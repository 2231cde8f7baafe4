"""What one Spark task reads: ``[from, until)`` ranges of Kafka partitions, with everything an
executor needs to fetch them (streams and batch reads alike). Spark pickles it to the executor,
which never talks to the group log."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql.datasource import InputPartition

from spark_kafka_group.fetcher import FetchSpec
from spark_kafka_group.options import SourceOptions
from spark_kafka_group.source.planning import OffsetRange, plan_tasks


class KafkaInputPartition(InputPartition):
    """One Spark task: [from, until) ranges of Kafka partitions, fetched together
    (a batch's ranges are balanced by records over about ``parallelism`` tasks:
    :func:`~spark_kafka_group.source.planning.plan_tasks`)."""

    def __init__(self, specs: Sequence[FetchSpec]) -> None:
        super().__init__(tuple(specs))
        self.specs = tuple(specs)


def input_partitions(
    options: SourceOptions, ranges: list[OffsetRange]
) -> list[KafkaInputPartition]:
    """The Spark tasks of a batch: about ``parallelism`` of them (``minPartitions`` and
    ``maxRecordsPerPartition`` raise the count), each reading several ranges."""
    tasks = plan_tasks(
        ranges,
        parallelism=options.parallelism,
        min_partitions=options.min_partitions,
        max_records_per_partition=options.max_records_per_partition,
    )
    return [KafkaInputPartition([fetch_spec(options, r) for r in task]) for task in tasks]


def fetch_spec(options: SourceOptions, offset_range: OffsetRange) -> FetchSpec:
    """What an executor needs to fetch one range."""
    return FetchSpec(
        topic=offset_range.topic,
        partition=offset_range.partition,
        from_offset=offset_range.from_offset,
        until_offset=offset_range.until_offset,
        bootstrap_servers=options.bootstrap_servers,
        client_conf=FetchSpec.conf(options.kafka_params),
        include_headers=options.include_headers,
        fail_on_data_loss=options.fail_on_data_loss,
        fetch_timeout_s=options.poll_timeout_ms / 1000.0,
    )
