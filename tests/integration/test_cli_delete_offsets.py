"""``kafka-group delete-offsets`` on the real Apache Kafka broker: a group's queries stop
reading a topic, its committed offsets (and their stale lag) leave ``describe``, the exporter
and the committed-offsets query; refused while a live member subscribes to the topic; and the
output is what Kafka's own ``kafka-consumer-groups --delete-offsets`` prints."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from spark_kafka_group.group import TopicPartition
from spark_kafka_group.ops.admin import describe_group, reset_offsets
from spark_kafka_group.ops.committed import committed_offsets_table
from spark_kafka_group.ops.exporter import GroupLagCollector
from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from spark_kafka_group.store import group_log_uri
from spark_kafka_group.testing.kafka_broker import kafka_tool
from spark_kafka_group.testing.waiting import wait_until
from tests.integration.cli_support import GroupDriver, run_cli

SUBSCRIBED = (
    "Error: org.apache.kafka.common.errors.GroupSubscribedToTopicException: Deleting offsets "
    "of a topic is forbidden while the consumer group is actively subscribed to it."
)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _lines(text: str, group: str) -> list[str]:
    """Printed lines, trailing blanks dropped, the group's name as ``G``."""
    return [line.rstrip().replace(group, "G") for line in text.strip("\n").splitlines()]


def _succeeded(topic: str, partitions: int) -> list[str]:
    """What Kafka prints when every partition of ``topic`` went (its TOPIC column is as wide
    as the longest topic, at least 15)."""
    width = max(15, len(topic))
    rows = [f"{topic:<{width}} {p:<10} Successful" for p in range(partitions)]
    return [
        "Request succeeded for deleting offsets from group G.",
        "",
        f"{'TOPIC':<{width}} PARTITION  STATUS",
        *rows,
    ]


def _scrape(store: str, group: str, servers: str) -> dict[tuple[str, tuple], float]:
    """One scrape of ``kafka-group exporter``'s collector for ``group`` (no cache)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(
        GroupLagCollector(store, groups=[group], bootstrap_servers=servers, cache_s=0)
    )
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _topics_in(samples: dict[tuple[str, tuple], float]) -> set[str]:
    return {value for (_, labels) in samples for key, value in labels if key == "topic"}


@pytest.mark.broker
def test_delete_offsets_prints_what_kafka_consumer_groups_prints(
    bootstrap_servers: str, group_store: str
) -> None:
    """The same situation in a Kafka consumer group and in a kafka-group group: offsets of
    topics A and B committed, one live member subscribed to B only. Both tools print the same
    lines for the refused request (A deleted, B refused), an unknown topic, and B once the
    member is gone."""
    topic_a, topic_b = _name("delete-a"), _name("delete-b")
    for topic in (topic_a, topic_b):
        create_topic(bootstrap_servers, topic, 2)
        produce_sample(bootstrap_servers, topic, partitions=2, per_partition=5)
    offsets = {(topic_a, 0): 3, (topic_a, 1): 2, (topic_b, 0): 4, (topic_b, 1): 1}

    kafka_group = _name("kafka")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": kafka_group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic_b])
    deadline = time.monotonic() + 60
    while not consumer.assignment():
        assert time.monotonic() < deadline, "Kafka never assigned the topic to the consumer"
        consumer.poll(0.2)
    consumer.commit(
        offsets=[KafkaTopicPartition(t, p, o) for (t, p), o in offsets.items()],
        asynchronous=False,
    )

    group = _name("ours")
    reset_offsets(group_store, group, {TopicPartition(*tp): o for tp, o in offsets.items()},
                  execute=True)  # fmt: skip
    driver = GroupDriver(group_store, group, {topic_b: 2})  # its member subscribes to B only
    driver.rebalance(["reader-b"])
    driver.commit("reader-b", {(topic_b, 0): 4, (topic_b, 1): 1})

    def both(*topics: str) -> tuple[list[str], list[str], int, str]:
        args = [a for t in topics for a in ("--topic", t)]
        ours = run_cli("delete-offsets", "--store", group_store, "--group", group,
                       "--bootstrap-server", bootstrap_servers, *args)  # fmt: skip
        theirs = kafka_tool("kafka-consumer-groups", "--bootstrap-server", bootstrap_servers,
                            "--delete-offsets", "--group", kafka_group, *args)  # fmt: skip
        return _lines(ours.out, group), _lines(theirs.stdout, kafka_group), ours.code, ours.err

    ours, theirs, code, err = both(topic_a, topic_b)
    assert ours == theirs
    assert theirs[0] == "Error: Encountered some partition-level error, see the follow-up details."
    assert sorted(line.split()[:2] for line in theirs[3:]) == [
        [topic_a, "0"], [topic_a, "1"], [topic_b, "0"], [topic_b, "1"],
    ]  # fmt: skip
    assert [line.endswith(SUBSCRIBED) for line in ours[3:]] == [False, False, True, True]
    assert code == 1
    for part in (repr(group), repr(topic_b), "reader-b", "Stop those queries"):
        assert part in err, part
    assert describe_group(group_store, group).committed == {
        (topic_b, 0): 4,
        (topic_b, 1): 1,
    }

    ours, theirs, code, _ = both("no-such-topic-for-delete")
    assert ours == theirs and code == 1
    assert "UnknownTopicOrPartitionException" in ours[-1]

    consumer.close()
    driver.leave("reader-b")
    ours, theirs, code, err = both(topic_b)
    assert ours == theirs == _succeeded(topic_b, 2)
    assert code == 0, err
    assert describe_group(group_store, group).committed == {}


@pytest.mark.spark
@pytest.mark.broker
def test_a_topic_the_group_stopped_reading_leaves_describe_and_the_exporter(
    spark, bootstrap_servers: str, group_store: str, tmp_path: Path
) -> None:
    """Two queries of one group read two topics; the one reading ``legacy`` is replaced by a
    query reading ``orders`` (the subscription changed). The legacy offsets stay, with a lag
    that grows; delete-offsets is refused while a query reads the topic, and afterwards drops
    them from describe, the exporter and the committed-offsets query, while the group goes on
    reading ``orders``."""
    from tests.streaming import Collected, source_options, start_query, stop_between_batches

    orders, legacy = _name("orders"), _name("legacy")
    for topic in (orders, legacy):
        create_topic(bootstrap_servers, topic, 2)
        produce_sample(bootstrap_servers, topic, partitions=2, per_partition=10)
    group = _name("two-topics")
    queries = {
        topic: start_query(
            spark,
            source_options(bootstrap_servers, topic, group, group_store),
            str(tmp_path / topic),
            Collected(),
            available_now=False,
        )
        for topic in (orders, legacy)
    }
    cli = ["--store", group_store, "--group", group, "--bootstrap-server", bootstrap_servers]

    def described() -> dict:
        result = run_cli("describe", *cli, "--json")
        assert result.code == 0, result.err
        return result.json()

    def caught_up() -> bool:
        result = run_cli("describe", *cli, "--json")
        if result.code != 0:  # the queries have not created the group log yet
            return False
        rows = result.json()["partitions"]
        topics = {(r["topic"], r["lag"]) for r in rows}
        return len(rows) == 4 and topics == {(orders, 0), (legacy, 0)}

    try:
        wait_until(caught_up, 120, "both queries to commit both topics to their end")
        members = described()["members"]
        [legacy_member] = [
            m["member_id"] for m in members if any(a.startswith(legacy) for a in m["assigned"])
        ]

        refused = run_cli("delete-offsets", *cli, "--topic", legacy)
        assert refused.code == 1
        assert [line.split()[:2] for line in _lines(refused.out, group)[3:]] == [
            [legacy, "0"],
            [legacy, "1"],
        ]
        assert all(line.endswith(SUBSCRIBED) for line in _lines(refused.out, group)[3:])
        for part in (repr(group), repr(legacy), legacy_member, "Stop those queries"):
            assert part in refused.err, part
        assert {r["topic"] for r in described()["partitions"]} == {orders, legacy}

        # The legacy query is replaced by one reading orders (its subscription changed).
        stop_between_batches(queries.pop(legacy))
        queries["orders-2"] = start_query(
            spark,
            source_options(bootstrap_servers, orders, group, group_store),
            str(tmp_path / "orders-2"),
            Collected(),
            available_now=False,
        )
        produce_sample(bootstrap_servers, legacy, partitions=2, per_partition=7, start=10)

        def two_orders_members() -> bool:
            group_now = described()
            members = group_now["members"]
            return (
                group_now["state"] == "Stable"
                and len(members) == 2
                and legacy_member not in {m["member_id"] for m in members}
                and sorted(a for m in members for a in m["assigned"])
                == [f"{orders}-0", f"{orders}-1"]
            )

        wait_until(two_orders_members, 90, "the group to be two members reading orders")
        stale = {
            labels: value
            for (name, labels), value in _scrape(group_store, group, bootstrap_servers).items()
            if name == "kafka_consumergroup_lag" and ("topic", legacy) in labels
        }
        assert len(stale) == 2 and all(v >= 7 for v in stale.values()), stale

        deleted = run_cli("delete-offsets", *cli, "--topic", legacy)
        assert deleted.code == 0, deleted.err
        assert _lines(deleted.out, group) == _succeeded(legacy, 2)

        after = described()
        assert {r["topic"] for r in after["partitions"]} == {orders}
        assert after["state"] == "Stable" and len(after["members"]) == 2
        text = run_cli("describe", *cli)
        assert legacy not in text.out and orders in text.out
        samples = _scrape(group_store, group, bootstrap_servers)
        assert _topics_in(samples) == {orders}
        table = committed_offsets_table(group_log_uri(group_store, group)).to_pylist()
        assert {row["topic"] for row in table} == {orders}

        # The other query reads on, and its commits still land.
        before = {r["partition"]: r["committed"] for r in after["partitions"]}
        produce_sample(bootstrap_servers, orders, partitions=2, per_partition=3, start=10)

        def orders_moved_on() -> bool:
            rows = described()["partitions"]
            return {r["topic"] for r in rows} == {orders} and all(
                r["lag"] == 0 and r["committed"] > before[r["partition"]] for r in rows
            )

        wait_until(orders_moved_on, 60, "the orders query to commit the new records")
    finally:
        for query in queries.values():
            query.stop()
