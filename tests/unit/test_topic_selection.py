"""The topics a query reads, chosen over the cluster's metadata: subscribe, subscribePattern
and assign, and errors that name the topic or partition, the cluster and the fix."""

from __future__ import annotations

import pytest

from spark_kafka_group.errors import OptionError, TopicNotFoundError
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.kafka.topics import check_partitions_exist, select_topics

COUNTS = {"events": 4, "events-dlq": 1, "orders": 2, "__consumer_offsets": 50}
SERVERS = "broker:9092"


def test_subscribe_keeps_the_listed_order_once_and_refuses_a_missing_topic() -> None:
    assert select_topics(COUNTS, SERVERS, subscribe=["orders", "events", "orders"]) == {
        "orders": 2,
        "events": 4,
    }
    with pytest.raises(TopicNotFoundError, match=r"'nope' not found on Kafka cluster 'broker"):
        select_topics(COUNTS, SERVERS, subscribe=["events", "nope"])


def test_a_pattern_matches_whole_names_never_internal_topics_and_may_match_none() -> None:
    assert select_topics(COUNTS, SERVERS, pattern="events.*") == {"events": 4, "events-dlq": 1}
    assert select_topics(COUNTS, SERVERS, pattern="vents") == {}
    assert select_topics(COUNTS, SERVERS, pattern=".*") == {
        "events": 4,
        "events-dlq": 1,
        "orders": 2,
    }
    with pytest.raises(OptionError, match=r"subscribePattern '\(' is not a valid regular"):
        select_topics(COUNTS, SERVERS, pattern="(")


def test_assign_refuses_a_partition_past_the_topic_s_count_naming_the_range() -> None:
    assert select_topics(COUNTS, SERVERS, assign={"orders": [0, 1]}) == {"orders": 2}
    with pytest.raises(TopicNotFoundError, match=r"partition\(s\) \[2\] of topic 'orders'.*0\.\.1"):
        select_topics(COUNTS, SERVERS, assign={"orders": [1, 2]})


def test_exactly_one_way_to_name_topics() -> None:
    with pytest.raises(OptionError, match="Exactly one of"):
        select_topics(COUNTS, SERVERS, subscribe=["events"], pattern="e.*")
    with pytest.raises(OptionError, match="Exactly one of"):
        select_topics(COUNTS, SERVERS)


def test_a_partition_of_a_shrunk_or_deleted_topic_is_named() -> None:
    check_partitions_exist([TopicPartition("events", 3)], COUNTS, SERVERS)
    with pytest.raises(TopicNotFoundError, match=r"Partition 5 of topic 'events'.*4 partition"):
        check_partitions_exist([TopicPartition("events", 5)], COUNTS, SERVERS)
    with pytest.raises(TopicNotFoundError, match=r"'gone' not found.*visible topics: events,"):
        check_partitions_exist([TopicPartition("gone", 0)], COUNTS, SERVERS)
