"""spark_kafka_group.lag on a real query's progress, checked against the broker's end offsets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import spark_kafka_group
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.kafka import KafkaCluster
from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from spark_kafka_group.source.pyspark_features import HAS_ADMISSION_CONTROL
from tests.streaming import Collected, source_options, start_query

# Also in the smoke suite: on pyspark 4.0 the figures must be None (no log end in the progress).
pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.smoke]


def test_lag_figures_match_the_broker_end_offsets(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    create_topic(bootstrap_servers, topic_name, 3)
    produce_sample(bootstrap_servers, topic_name, partitions=3, per_partition=100)
    tps = [TopicPartition(topic_name, p) for p in range(3)]
    with KafkaCluster(bootstrap_servers) as cluster:
        log_end = cluster.latest_offsets(tps)
    options = source_options(
        bootstrap_servers, topic_name, "g-lag", group_store, maxOffsetsPerTrigger=70
    )
    collected = Collected()
    query = start_query(spark, options, str(tmp_path / "ckpt"), collected)
    try:
        assert query.awaitTermination(180), "query did not finish within 180 s"
        progresses = [p for p in query.recentProgress if p.numInputRows > 0]
    finally:
        spark_kafka_group.leave_group(query)
        query.stop()
    assert progresses

    checked = []
    for progress in progresses:
        (figures,) = spark_kafka_group.lag(progress)
        # The same figures from the progress's JSON as a dict.
        assert spark_kafka_group.lag(json.loads(progress.json)) == [figures]
        assert figures.group == "g-lag" and figures.source_index == 0
        if not HAS_ADMISSION_CONTROL:
            # pyspark 4.0 / 4.1 report the batch's end as latestOffset: no figures.
            assert figures.min_offsets_behind_latest is None
            assert figures.as_spark_metrics() == {}
            continue
        # Where this query stood after the batch, from the records it actually read.
        read = [
            (p, o)
            for b, rows in collected.batches.items()
            if b <= progress.batchId
            for p, o, _ in rows
        ]
        position = {
            (topic_name, p): max((o + 1 for q, o in read if q == p), default=0) for p in range(3)
        }
        behind = [log_end[tp] - position[tp] for tp in tps]
        assert figures.partitions == 3
        assert figures.min_offsets_behind_latest == min(behind)
        assert figures.max_offsets_behind_latest == max(behind)
        assert figures.avg_offsets_behind_latest == pytest.approx(sum(behind) / 3)
        checked.append(behind)
    if HAS_ADMISSION_CONTROL:
        # Several bounded batches: behind at first, caught up at the end.
        assert len(checked) >= 3 and max(checked[0]) > 0 and checked[-1] == [0, 0, 0], checked
        assert spark_kafka_group.lag(progresses[-1])[0].as_spark_metrics() == {
            "minOffsetsBehindLatest": "0",
            "maxOffsetsBehindLatest": "0",
            "avgOffsetsBehindLatest": "0.0",
        }
