"""Driver-side cluster access against a real broker (the suite's Apache Kafka, or
$KAFKA_BOOTSTRAP_SERVERS)."""

from __future__ import annotations

import time

import pytest

from spark_kafka_group.errors import BrokerUnavailableError, OptionError, TopicNotFoundError
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.kafka import KafkaCluster
from spark_kafka_group.kafka.cluster import UNREACHABLE_FAST_FAIL_S, cluster_for_source
from spark_kafka_group.kafka.config import OffsetFetchRetry
from spark_kafka_group.options import parse_options
from spark_kafka_group.quickstart.sample_data import create_topic, produce

pytestmark = pytest.mark.broker


def test_unreachable_fails_fast_with_fix() -> None:
    started = time.monotonic()
    one_attempt = OffsetFetchRetry(num_retries=1)
    with (
        pytest.raises(BrokerUnavailableError) as info,
        KafkaCluster("127.0.0.1:1", retry=one_attempt) as cluster,
    ):
        cluster.topic_partitions(subscribe=["anything"])
    # An attempt ends once every server has been down for UNREACHABLE_FAST_FAIL_S.
    assert time.monotonic() - started < UNREACHABLE_FAST_FAIL_S + 3
    message = str(info.value)
    assert "127.0.0.1:1" in message
    assert "kafka.bootstrap.servers" in message and "security" in message
    assert "Connection refused" in message


def _source_options(servers: str, topic: str, retries: str, interval_ms: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": servers,
        "subscribe": topic,
        "groupId": "g",
        "groupStore": "/unused",
        "fetchOffset.numRetries": retries,
        "fetchOffset.retryIntervalMs": interval_ms,
    }


def test_fetch_offset_retries_bound_an_unreachable_cluster(
    bootstrap_servers: str, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    create_topic(bootstrap_servers, topic_name, 1)
    counts = produce(bootstrap_servers, topic_name, ((0, None, b"x%d" % i) for i in range(5)))
    # The options as a query gives them: against the real broker they just work ...
    opts = parse_options(_source_options(bootstrap_servers, topic_name, "2", "700"))
    with cluster_for_source(opts) as cluster:
        assert cluster.latest_offsets([TopicPartition(topic_name, 0)]) == {
            TopicPartition(topic_name, 0): counts[0]
        }
    # ... and a cluster that never answers fails after exactly that many attempts (the test
    # of the defaults above has one attempt and no retry).
    opts = parse_options(_source_options("127.0.0.1:1", topic_name, "2", "700"))
    caplog.set_level("WARNING", logger="spark_kafka_group.kafka.cluster")
    started = time.monotonic()
    with cluster_for_source(opts) as cluster, pytest.raises(BrokerUnavailableError) as info:
        cluster.latest_offsets([TopicPartition(topic_name, 0)])
    elapsed = time.monotonic() - started
    assert 0.7 <= elapsed < 2 * UNREACHABLE_FAST_FAIL_S + 0.7 + 3
    message = str(info.value)
    assert "127.0.0.1:1" in message and "Connection refused" in message
    assert "ListOffsets: 2 attempt(s)" in message
    assert "fetchOffset.numRetries=2" in message and "fetchOffset.retryIntervalMs=700" in message
    retries = [r.getMessage() for r in caplog.records if "got no answer" in r.getMessage()]
    assert len(retries) == 1 and "attempt 1 of 2" in retries[0], retries


def test_subscribe_missing_topic(bootstrap_servers: str, topic_name: str) -> None:
    with KafkaCluster(bootstrap_servers) as cluster, pytest.raises(TopicNotFoundError) as info:
        cluster.topic_partitions(subscribe=[topic_name])
    assert topic_name in str(info.value) and bootstrap_servers in str(info.value)
    assert "Create the topic" in str(info.value)


def test_subscribe_pattern_and_assign(bootstrap_servers: str, topic_name: str) -> None:
    a, b, other = f"{topic_name}-a", f"{topic_name}-b", f"x{topic_name}"
    create_topic(bootstrap_servers, a, 2)
    create_topic(bootstrap_servers, b, 3)
    create_topic(bootstrap_servers, other, 1)
    with KafkaCluster(bootstrap_servers) as cluster:
        assert cluster.topic_partitions(subscribe=[a, b]) == {a: 2, b: 3}
        assert cluster.topic_partitions(pattern=f"{topic_name}-.*") == {a: 2, b: 3}
        # Full match: a prefix is not enough, and no match is not an error.
        assert cluster.topic_partitions(pattern=topic_name) == {}
        assert cluster.topic_partitions(assign={b: [0, 2]}) == {b: 3}
        with pytest.raises(TopicNotFoundError) as info:
            cluster.topic_partitions(assign={b: [1, 3, 7]})
        message = str(info.value)
        assert "[3, 7]" in message and "3 partition(s)" in message and b in message
        with pytest.raises(TopicNotFoundError):
            cluster.topic_partitions(assign={f"{topic_name}-missing": [0]})
        with pytest.raises(OptionError):
            cluster.topic_partitions(pattern="(")
        with pytest.raises(OptionError):
            cluster.topic_partitions(subscribe=[a], pattern=".*")


def test_offsets(bootstrap_servers: str, topic_name: str) -> None:
    create_topic(bootstrap_servers, topic_name, 2)
    counts = produce(bootstrap_servers, topic_name, ((0, None, b"x%d" % i) for i in range(30)))
    tps = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
    with KafkaCluster(bootstrap_servers) as cluster:
        assert cluster.earliest_offsets(tps) == {tps[0]: 0, tps[1]: 0}
        assert cluster.latest_offsets(tps) == {tps[0]: counts[0], tps[1]: 0}
        # Both in one round trip, in that order (a trigger's bounds).
        assert cluster.earliest_and_latest_offsets(tps) == (
            {tps[0]: 0, tps[1]: 0},
            {tps[0]: counts[0], tps[1]: 0},
        )
        # Every record is newer than the epoch; partition 1 has none; none is in the future.
        assert cluster.offsets_for_timestamp(tps, 0) == {tps[0]: 0, tps[1]: None}
        future = cluster.offsets_for_timestamp(tps, int(time.time() * 1000) + 3_600_000)
        assert future == {tps[0]: None, tps[1]: None}
        with pytest.raises(TopicNotFoundError):
            cluster.latest_offsets([TopicPartition(topic_name, 5)])
        with pytest.raises(TopicNotFoundError):
            cluster.earliest_offsets([TopicPartition(f"{topic_name}-missing", 0)])
        with pytest.raises(TopicNotFoundError):
            cluster.earliest_and_latest_offsets([TopicPartition(topic_name, 5)])
        assert cluster.latest_offsets([]) == {}
        assert cluster.earliest_and_latest_offsets([]) == ({}, {})
    with KafkaCluster(bootstrap_servers, client_conf={"isolation.level": "read_committed"}) as rc:
        assert rc.latest_offsets(tps) == {tps[0]: counts[0], tps[1]: 0}


def test_invalid_options() -> None:
    with pytest.raises(OptionError):
        KafkaCluster("")
    with pytest.raises(OptionError):
        KafkaCluster("127.0.0.1:1", client_conf={"isolation.level": "sometimes"})
    with pytest.raises(OptionError):
        KafkaCluster("127.0.0.1:1", client_conf={"no.such.property": "1"})
