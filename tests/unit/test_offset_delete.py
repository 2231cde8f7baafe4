"""OffsetDelete (``kafka-group delete-offsets``): the protocol's handler
(:func:`spark_kafka_group.group.offsets.delete_offsets`, Kafka's rule), the OFFSET_DELETE
record's replay, and the partitions and output of the command (pure parts)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_kafka_group.group import (
    GroupConfig,
    GroupCoordinator,
    GroupError,
    GroupMetadata,
    GroupProtocolBug,
    GroupRecord,
    GroupState,
    JoinRequest,
    ManualClock,
    RecordKind,
    TopicPartition,
    replay,
)
from spark_kafka_group.group.offsets import delete_offsets, reset
from spark_kafka_group.group.payloads import PAYLOAD_TYPES, OffsetDeletePayload, payload_of
from spark_kafka_group.group.record_helpers import offset_delete_record
from spark_kafka_group.ops.delete_offsets import (
    NO_PARTITION,
    UNKNOWN_TOPIC_OR_PARTITION,
    partitions_to_delete,
)
from spark_kafka_group.ops.kafka_views import delete_offsets_view
from spark_kafka_group.ops.lag import partitions_of
from spark_kafka_group.ops.reset import TopicSpec

E = GroupError
CFG = GroupConfig(min_session_timeout_ms=1_000, initial_rebalance_delay_ms=0)
TOPICS = ("orders", "orders-eu", "old")


def tps(topic: str, *partitions: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in partitions]


class Log:
    """A coordinator and the records it accepted, on an injected clock."""

    def __init__(self) -> None:
        self.coord = GroupCoordinator("g", CFG)
        self.records: list[GroupRecord] = []
        self.clock = ManualClock(1_700_000_000_000)

    def do(self, result):
        records, response = result
        self.coord.apply_all(records)
        self.records.extend(records)
        self.clock.advance(100)
        return response

    def now(self) -> int:
        return self.clock.now_ms()

    def commit_while_empty(self, offsets: dict[TopicPartition, int]) -> None:
        records, response = reset(self.coord.group, offsets, self.now())
        assert response.accepted == set(offsets)
        self.do((records, response))

    def join(self, member: str, **kw) -> None:
        kw.setdefault("topics", ())
        kw.setdefault("session_timeout_ms", 10_000)
        request = JoinRequest(member, ("cooperative-sticky",), client_host="host-" + member, **kw)
        self.do(self.coord.join(request, self.now()))

    def stable(self, metadata: dict[str, int]) -> None:
        g = self.coord.group
        assert g.state is GroupState.COMPLETING_REBALANCE and g.leader is not None
        self.do(self.coord.sync(g.leader, g.generation, self.now(), metadata=metadata))
        assert self.coord.group.state is GroupState.STABLE

    def delete(self, partitions: list[TopicPartition]):
        work = self.coord.fork()
        records, response = delete_offsets(work.group, partitions, self.now())
        work.apply_all(records)
        assert work.group.offsets == replay([*self.records, *records], "g").offsets
        return self.do((records, response)), records


def committed_group() -> Log:
    log = Log()
    log.commit_while_empty(
        {**dict.fromkeys(tps("orders", 0, 1), 5), **dict.fromkeys(tps("old", 0, 1, 2), 7)}
    )
    return log


def test_an_empty_group_may_delete_any_topics_offsets_and_only_committed_ones_are_written() -> None:
    log = committed_group()
    response, records = log.delete(tps("old", 0, 2, 9))  # 9: never committed
    assert response.error is E.NONE
    assert response.partition_errors == dict.fromkeys(tps("old", 0, 2, 9), E.NONE)
    assert [(r.kind, r.topic, r.partition, r.member_id) for r in records] == [
        (RecordKind.OFFSET_DELETE.value, "old", 0, None),
        (RecordKind.OFFSET_DELETE.value, "old", 2, None),
    ]
    assert set(log.coord.group.offsets) == {*tps("orders", 0, 1), *tps("old", 1)}
    again, rewritten = log.delete(tps("old", 0))
    assert again.partition_errors == {TopicPartition("old", 0): E.NONE} and rewritten == []


def test_a_topic_a_live_member_subscribes_to_is_refused_naming_it_and_the_fix() -> None:
    log = committed_group()
    log.join("reader-1", topics=("orders",))
    log.stable({"orders": 2})
    response, records = log.delete([*tps("orders", 0, 1), *tps("old", 0)])
    assert response.partition_errors == {
        TopicPartition("orders", 0): E.GROUP_SUBSCRIBED_TO_TOPIC,
        TopicPartition("orders", 1): E.GROUP_SUBSCRIBED_TO_TOPIC,
        TopicPartition("old", 0): E.NONE,
    }
    assert [(r.topic, r.partition) for r in records] == [("old", 0)]
    assert set(log.coord.group.offsets) == {*tps("orders", 0, 1), *tps("old", 1, 2)}
    message = response.refusals["orders"]
    for part in ("'g'", "'orders'", "reader-1", "host-reader-1", "Stop those queries"):
        assert part in message, part
    assert list(response.refusals) == ["orders"]


def test_a_pattern_subscription_reads_every_topic_it_matches() -> None:
    log = Log()
    log.commit_while_empty(dict.fromkeys([*tps("orders-eu", 0), *tps("old", 0)], 3))
    log.join("pattern-reader", pattern="orders.*")
    log.stable({"orders-eu": 1, "old": 1})
    response, _ = log.delete([*tps("orders-eu", 0), *tps("old", 0)])
    assert response.partition_errors == {
        TopicPartition("orders-eu", 0): E.GROUP_SUBSCRIBED_TO_TOPIC,
        TopicPartition("old", 0): E.NONE,
    }


def test_a_member_still_holding_a_topic_after_changing_its_subscription_reads_it() -> None:
    """Its old partitions stay with it until the rebalance takes them (it may still commit
    their final offsets), so they are in use as Kafka's generation subscription says."""
    log = committed_group()
    log.join("m", topics=("old",))
    log.stable({"old": 3})
    log.join("m", topics=("orders",))  # restarted with a new subscription: a rebalance starts
    member = log.coord.group.members["m"]
    assert not member.profile.subscription.matches("old") and member.held
    response, records = log.delete(tps("old", 0))
    assert response.partition_errors == {TopicPartition("old", 0): E.GROUP_SUBSCRIBED_TO_TOPIC}
    assert records == [] and "'old'" in response.refusals["old"]


def test_a_dead_group_is_not_found_and_another_protocol_type_must_be_empty() -> None:
    dead = GroupCoordinator("g", CFG, GroupMetadata("g", state=GroupState.DEAD))
    records, response = delete_offsets(dead.group, tps("old", 0), 0)
    assert records == [] and response.error is E.GROUP_ID_NOT_FOUND
    assert response.partition_errors == {TopicPartition("old", 0): E.GROUP_ID_NOT_FOUND}

    log = committed_group()
    log.join("connector", topics=("orders",), protocol_type="connect")
    records, response = delete_offsets(log.coord.group, tps("old", 0), 0)
    assert records == [] and response.error is E.NON_EMPTY_GROUP


def test_the_record_names_its_partition_in_the_envelope_and_has_an_empty_payload() -> None:
    record = offset_delete_record(now_ms=5, partition=TopicPartition("old", 2))
    assert (record.kind, record.topic, record.partition, record.offset) == (
        "OFFSET_DELETE",
        "old",
        2,
        None,
    )
    assert record.payload == {} and payload_of(record) == OffsetDeletePayload()
    assert PAYLOAD_TYPES["OFFSET_DELETE"] is OffsetDeletePayload


def test_replay_refuses_an_offset_delete_of_a_topic_a_member_reads() -> None:
    log = committed_group()
    log.join("reader", topics=("old",))
    log.stable({"old": 3})
    bad = offset_delete_record(now_ms=log.now(), partition=TopicPartition("old", 0))
    with pytest.raises(
        GroupProtocolBug, match=r"OFFSET_DELETE of old-0 while members \['reader'\]"
    ):
        replay([*log.records, bad], "g")
    with pytest.raises(GroupProtocolBug, match="without topic and partition"):
        replay([*log.records, replace(bad, partition=None)], "g")


def test_a_deletion_survives_a_snapshot_and_a_later_commit_brings_the_offset_back() -> None:
    log = committed_group()
    log.delete(tps("old", 0, 1, 2))
    snapshot = log.coord.snapshot_record(log.now())
    assert replay([snapshot], "g").offsets == log.coord.group.offsets
    log.commit_while_empty({TopicPartition("old", 1): 2})
    assert log.coord.group.offsets[TopicPartition("old", 1)].offset == 2


@given(
    committed=st.dictionaries(
        st.tuples(st.sampled_from(TOPICS), st.integers(0, 3)), st.integers(0, 100), max_size=10
    ),
    subscribed=st.sets(st.sampled_from(TOPICS), max_size=2),
    asked=st.lists(st.tuples(st.sampled_from(TOPICS), st.integers(0, 3)), max_size=8),
    step_ms=st.integers(0, 10_000),
)
def test_only_the_asked_partitions_of_unread_topics_lose_their_offsets(
    committed: dict[tuple[str, int], int],
    subscribed: set[str],
    asked: list[tuple[str, int]],
    step_ms: int,
) -> None:
    log = Log()
    if committed:
        log.commit_while_empty({TopicPartition(*tp): o for tp, o in committed.items()})
    if subscribed:
        log.join("m", topics=tuple(sorted(subscribed)))
        log.stable({t: 4 for t in TOPICS})
    log.clock.advance(step_ms)
    before = dict(log.coord.group.offsets)
    asked_tps = [TopicPartition(*tp) for tp in asked]
    response, records = log.delete(asked_tps)

    # The members of the group read exactly the topics they subscribe to (a cooperative
    # assignment of only subscribed topics).
    gone = {tp for tp in asked_tps if tp.topic not in subscribed and tp in before}
    assert set(log.coord.group.offsets) == set(before) - gone
    assert {(r.topic, r.partition) for r in records} == {(tp.topic, tp.partition) for tp in gone}
    assert all(r.timestamp_ms == log.now() - 100 for r in records)  # the injected clock
    for tp in asked_tps:
        expected = E.GROUP_SUBSCRIBED_TO_TOPIC if tp.topic in subscribed else E.NONE
        assert response.partition_errors[tp] is expected
    assert set(response.refusals) == {tp.topic for tp in asked_tps} & subscribed
    assert replay(log.records, "g") == log.coord.group


# ------------------------------------------------------------------ the command's pure parts


def test_describe_drops_a_deleted_topic_of_an_empty_group_though_it_was_last_assigned() -> None:
    log = committed_group()
    log.join("m", topics=("orders", "old"))
    log.stable({"orders": 2, "old": 3})
    log.do(log.coord.leave("m", log.now(), reason="query stopped"))
    assert log.coord.group.state is GroupState.EMPTY
    assert log.coord.group.assignment_snapshot == {"orders": 2, "old": 3}
    assert partitions_of(log.coord.describe(log.now())) == [
        *tps("old", 0, 1, 2),
        *tps("orders", 0, 1),
    ]
    log.delete(tps("old", 0, 1, 2))
    assert partitions_of(log.coord.describe(log.now())) == tps("orders", 0, 1)


def test_the_partitions_are_the_clusters_plus_the_committed_ones_else_unknown() -> None:
    specs = [TopicSpec("live", None), TopicSpec("gone", None), TopicSpec("never", None)]
    specs += [TopicSpec("live", (1, 5)), TopicSpec("gone", (3, 4))]
    committed = [*tps("gone", 0, 3), *tps("live", 7)]
    asked, unknown = partitions_to_delete(specs, {"live": 2}, committed)
    assert asked == [*tps("gone", 0, 3), *tps("live", 0, 1, 7)]
    assert unknown == [*tps("gone", 4), *tps("live", 5), *tps("never", NO_PARTITION)]


def test_the_output_is_kafkas() -> None:
    """What Kafka 4's kafka-consumer-groups --delete-offsets prints (rows sorted by topic and
    partition as one string), trailing blanks aside."""
    refused = delete_offsets_view(
        "g1",
        {
            ("topic-b", 1): "GROUP_SUBSCRIBED_TO_TOPIC",
            ("topic-a", 0): "NONE",
            ("topic-a", 10): "NONE",
            ("topic-a", 2): "NONE",
        },
    )
    subscribed = (
        "Error: org.apache.kafka.common.errors.GroupSubscribedToTopicException: Deleting "
        "offsets of a topic is forbidden while the consumer group is actively subscribed to it."
    )
    assert refused.splitlines() == [
        "",
        "Error: Encountered some partition-level error, see the follow-up details.",
        "",
        "TOPIC           PARTITION  STATUS",
        "topic-a         0          Successful",
        "topic-a         10         Successful",
        "topic-a         2          Successful",
        f"topic-b         1          {subscribed}",
    ]
    unknown = delete_offsets_view(
        "g1", {("no-such-topic-at-all", NO_PARTITION): UNKNOWN_TOPIC_OR_PARTITION}
    )
    assert unknown.splitlines() == [
        "Request succeeded for deleting offsets from group g1.",
        "",
        "TOPIC                PARTITION  STATUS",
        "no-such-topic-at-all -          Error: org.apache.kafka.common.errors."
        "UnknownTopicOrPartitionException: This server does not host this topic-partition.",
    ]
