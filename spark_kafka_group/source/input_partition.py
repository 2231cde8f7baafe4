"""What one Spark task reads: a ``[from, until)`` range of one Kafka partition, with everything
an executor needs to fetch it (streams and batch reads alike). Spark pickles it to the executor,
which never talks to the group log."""

from __future__ import annotations

from pyspark.sql.datasource import InputPartition

from spark_kafka_group.fetcher import FetchSpec
from spark_kafka_group.options import SourceOptions
from spark_kafka_group.source.planning import OffsetRange


class KafkaInputPartition(InputPartition):
    """One Spark task: a [from, until) range of one Kafka partition."""

    def __init__(self, spec: FetchSpec) -> None:
        super().__init__(spec)
        self.spec = spec


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
