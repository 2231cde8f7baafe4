"""The stream reader driven in this process in the order pyspark 4.0 and 4.1 call it (real
broker, real group log): there ``latestOffset()`` takes no start, so the reader itself keeps
where the next batch continues, and Spark may ask for the initial offset after planning the
first batch from it (while running that batch)."""

from __future__ import annotations

import pytest

from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.options import parse_options
from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from spark_kafka_group.source.offsets import SourceOffset
from spark_kafka_group.source.reader import KafkaGroupStreamReader
from spark_kafka_group.testing.waiting import wait_until
from tests.streaming import source_options

pytestmark = pytest.mark.broker


def first_plan(reader: KafkaGroupStreamReader) -> SourceOffset:
    """The first batch planned with the partitions, as pyspark 4.0 plans (``latestOffset()``
    with no start); the plans before it, while the member joins, hold none."""
    plans: list[SourceOffset] = []

    def planned_with_partitions() -> bool:
        plans.append(SourceOffset.from_json(reader.latestOffset()))
        return bool(plans[-1].offsets)

    wait_until(planned_with_partitions, 30, "the first batch to hold the partitions")
    return plans[-1]


def test_an_initial_offset_asked_after_the_first_plan_does_not_move_the_next_batch(
    bootstrap_servers: str, topic_name: str, group_store: str
) -> None:
    create_topic(bootstrap_servers, topic_name, 2)
    first = produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=5)
    tps = [TopicPartition(topic_name, p) for p in (0, 1)]
    reader = KafkaGroupStreamReader(parse_options(source_options(
        bootstrap_servers, topic_name, "g-call-order", group_store
    )))  # fmt: skip
    try:
        end0 = first_plan(reader)  # before the initial offset was asked for
        assert end0.offsets == {tp: first[tp.partition] for tp in tps}
        # Asked while running batch 0: where batch 0 started, whatever was committed since.
        start = reader.initialOffset()
        assert SourceOffset.from_json(start).offsets == {tp: 0 for tp in tps}
        reader.partitions(start, end0.to_json())
        reader.commit(end0.to_json())
        assert reader.initialOffset() == start  # the same answer each time

        more = produce_sample(
            bootstrap_servers, topic_name, partitions=2, per_partition=3, start=first[0]
        )
        end1 = SourceOffset.from_json(reader.latestOffset())
        # Batch 1 continues where batch 0 ended, not from the initial offset again.
        assert end1.offsets == {tp: first[tp.partition] + more[tp.partition] for tp in tps}
        assert {tp: end1.start_of(tp, end0) for tp in tps} == end0.offsets
    finally:
        reader.stop()


def test_the_initial_offset_is_where_the_first_plan_started_though_the_log_grew_since(
    bootstrap_servers: str, topic_name: str, group_store: str
) -> None:
    """startingOffsets=latest: the first plan starts at the log's end then; asked later, after
    more records arrived, the initial offset is still that start, not the end it has now."""
    create_topic(bootstrap_servers, topic_name, 1)
    first = produce_sample(bootstrap_servers, topic_name, partitions=1, per_partition=5)
    tp = TopicPartition(topic_name, 0)
    options = source_options(
        bootstrap_servers, topic_name, "g-call-order-latest", group_store, startingOffsets="latest"
    )
    reader = KafkaGroupStreamReader(parse_options(options))
    try:
        assert first_plan(reader).starts == {tp: first[0]}
        produce_sample(bootstrap_servers, topic_name, partitions=1, per_partition=3, start=5)
        assert SourceOffset.from_json(reader.initialOffset()).offsets == {tp: first[0]}
    finally:
        reader.stop()
