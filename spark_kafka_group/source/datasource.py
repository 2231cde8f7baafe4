"""``spark.readStream.format("kafka-group")`` (and ``spark.read``): the DataSource Spark
instantiates by name."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from spark_kafka_group.fetcher import spark_schema_ddl
from spark_kafka_group.options import (
    SourceOptions,
    check_batch_options,
    check_stream_options,
    parse_options,
)
from spark_kafka_group.source.format_name import FORMAT_NAME


class KafkaGroupDataSource(DataSource):
    """Kafka topics read as one member of a consumer group whose log is a Delta table.

    Options are validated here, when the query is defined, so a typo fails fast with a
    message naming the option (see :mod:`spark_kafka_group.options`).
    """

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.parsed: SourceOptions = parse_options(options)

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> str:
        return spark_schema_ddl(self.parsed.include_headers)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from spark_kafka_group.source.reader import KafkaGroupStreamReader

        check_stream_options(self.parsed)
        return KafkaGroupStreamReader(self.parsed)

    def reader(self, schema: StructType) -> DataSourceReader:
        """``spark.read.format("kafka-group")``: a fixed range, read without joining the group."""
        from spark_kafka_group.source.batch import KafkaGroupBatchReader

        # Parsed again: a batch read starts elsewhere by default (earliest, as in Spark).
        parsed = parse_options(self.options, read="batch")
        check_batch_options(parsed)
        return KafkaGroupBatchReader(parsed)
