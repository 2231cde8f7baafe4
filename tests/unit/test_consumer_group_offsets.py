"""A Kafka consumer group's offsets (``kafka/consumer_group_offsets.py``) when Kafka's group
coordinator is loading or moving, or refuses the commit; and the message of a cluster that
refuses this client's credentials. Kafka's answers come from a stand-in for the group's
Consumer handle that answers as Kafka does, one scripted answer per request (kept by a
stand-in AdminClient, the cluster's other client); every wait is on a manual clock.
(The same paths against a real Apache Kafka: tests/integration/test_commit_to_kafka.py and
test_kafka_security.py.)"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from confluent_kafka import KafkaError, KafkaException

import spark_kafka_group.kafka.cluster as cluster_module
from spark_kafka_group.errors import BrokerUnavailableError
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.group.timer import ManualClock
from spark_kafka_group.kafka.cluster import KafkaCluster
from spark_kafka_group.kafka.config import OffsetFetchRetry
from spark_kafka_group.kafka.consumer_group_offsets import (
    KafkaGroupOffsetsError,
    KafkaOffsetMirror,
    commit_to_kafka_group,
    kafka_group_offsets,
)

ATTEMPT_TIMEOUT_S = OffsetFetchRetry().api_timeout_ms / 1000

LOAD = KafkaError.COORDINATOR_LOAD_IN_PROGRESS
TP0, TP1 = TopicPartition("orders", 0), TopicPartition("orders", 1)

#: One scripted answer: an error code for the whole request, or per partition (None = ok).
Answer = int | dict[TopicPartition, int | None]


class _ScriptedAdmin:
    """Stands in for confluent-kafka's AdminClient: each group request gets the next scripted
    answer (the last one repeats); a partition answered without error keeps the offset sent
    (OffsetCommit) or the one held (OffsetFetch)."""

    instances: ClassVar[list[_ScriptedAdmin]] = []

    def __init__(self, conf: dict[str, Any]) -> None:
        self.error_cb = conf["error_cb"]
        self.answers: list[Answer] = [{}]
        self.held: dict[TopicPartition, int] = {}
        self.sent: list[str] = []
        self.client_error: KafkaError | None = None
        _ScriptedAdmin.instances.append(self)

    def poll(self, timeout: float) -> int:
        if self.client_error is not None:
            self.error_cb(self.client_error)
        return 0

    def _answer(self, what: str, group: str, partitions: list[Any]) -> dict[str, Future[Any]]:
        self.sent.append(what)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        future: Future[Any] = Future()
        if isinstance(answer, int):
            future.set_exception(KafkaException(KafkaError(answer, "broker says no")))
            return {group: future}
        rows = []
        for tp in partitions:
            key = TopicPartition(tp.topic, tp.partition)
            code = answer.get(key)
            if code is None and what == "OffsetCommit":
                self.held[key] = tp.offset
            rows.append(
                SimpleNamespace(
                    topic=tp.topic,
                    partition=tp.partition,
                    offset=self.held.get(key, -1001),
                    error=None if code is None else KafkaError(code, "broker says no"),
                )
            )
        future.set_result(SimpleNamespace(group_id=group, topic_partitions=rows))
        return {group: future}

    def list_offsets(self, request: dict[Any, Any], **kwargs: Any) -> dict[Any, Future[Any]]:
        self.sent.append("ListOffsets")
        answers = {}
        for tp in request:
            future: Future[Any] = Future()
            future.set_exception(KafkaException(KafkaError(KafkaError._TRANSPORT, "no answer")))
            answers[tp] = future
        return answers

    # No list_consumer_group_offsets: librdkafka's AdminClient crashes the process when that
    # OffsetFetch is answered NOT_COORDINATOR, so group requests must never go there.

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self.sent.append("Metadata")
        partitions = {"orders": 2, "__consumer_offsets": 4}
        return SimpleNamespace(
            topics={
                name: SimpleNamespace(error=None, partitions={p: None for p in range(count)})
                for name, count in partitions.items()
            }
        )


class _ScriptedConsumer:
    """Stands in for confluent-kafka's Consumer (the cluster's handle of one Kafka group):
    ``committed`` and ``commit`` get the next scripted answer of the cluster's stand-in
    AdminClient."""

    instances: ClassVar[list[_ScriptedConsumer]] = []

    def __init__(self, conf: dict[str, Any]) -> None:
        self.conf = conf
        self.kafka = _ScriptedAdmin.instances[-1]
        self.closed = False
        _ScriptedConsumer.instances.append(self)

    def poll(self, timeout: float) -> None:
        return None

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        assert not self.closed
        group = self.conf["group.id"]
        answer = self.kafka._answer("OffsetFetch", group, partitions)[group]
        return list(answer.result().topic_partitions)  # raises the scripted error

    def commit(self, offsets: list[Any], asynchronous: bool) -> list[Any]:
        assert not self.closed and not asynchronous
        group = self.conf["group.id"]
        answer = self.kafka._answer("OffsetCommit", group, offsets)[group]
        return list(answer.result().topic_partitions)  # raises the scripted error

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> type[_ScriptedAdmin]:
    def forbidden(seconds: float) -> None:
        raise AssertionError(f"a real sleep of {seconds}s bypassed the injected clock")

    monkeypatch.setattr(time, "sleep", forbidden)
    _ScriptedAdmin.instances = []
    _ScriptedConsumer.instances = []
    monkeypatch.setattr(cluster_module, "AdminClient", _ScriptedAdmin)
    monkeypatch.setattr(cluster_module, "Consumer", _ScriptedConsumer)
    return _ScriptedAdmin


def _cluster(clock: ManualClock) -> tuple[KafkaCluster, _ScriptedAdmin]:
    cluster = KafkaCluster("broker-a:9092", clock=clock)
    return cluster, _ScriptedAdmin.instances[-1]


def test_a_commit_is_sent_again_while_the_coordinator_loads(admin: type[_ScriptedAdmin]) -> None:
    # A fresh Kafka answers COORDINATOR_LOAD_IN_PROGRESS per partition (as 4.1 does for the
    # first commit after it starts), or for the whole request; both are sent again.
    clock = ManualClock()
    cluster, kafka = _cluster(clock)
    kafka.answers = [{TP0: LOAD, TP1: LOAD}, KafkaError.NOT_COORDINATOR, {}]
    assert commit_to_kafka_group(cluster, "legacy", {TP0: 5, TP1: 6}) == {TP0: 5, TP1: 6}
    assert kafka.sent == ["OffsetCommit"] * 3 and kafka.held == {TP0: 5, TP1: 6}
    assert 0 < clock.monotonic_ms() < 1000  # short pauses, on the injected clock

    # A read answered NOT_COORDINATOR (the coordinator moved) is sent again too, through the
    # group's Consumer handle (librdkafka's AdminClient would crash the process on it).
    kafka.answers = [
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        {TP0: LOAD},
        KafkaError.NOT_COORDINATOR,
        {},
    ]
    assert kafka_group_offsets(cluster, "legacy", [TP0, TP1]) == {TP0: 5, TP1: 6}
    assert kafka.sent[3:] == ["OffsetFetch"] * 4


def test_all_the_offsets_of_a_group_are_read_for_the_cluster_s_partitions_through_one_handle(
    admin: type[_ScriptedAdmin],
) -> None:
    clock = ManualClock()
    cluster, kafka = _cluster(clock)
    kafka.held = {TP0: 5}
    kafka.answers = [KafkaError.NOT_COORDINATOR, {}]
    assert kafka_group_offsets(cluster, "legacy") == {TP0: 5}  # TP1 never committed
    assert kafka_group_offsets(cluster, "legacy", [TP1]) == {}
    # The partitions asked for are the topics' of the metadata, internal topics aside; one
    # Consumer handle per group serves every read, with the group's id and no auto-commit.
    assert kafka.sent == ["Metadata", "OffsetFetch", "OffsetFetch", "OffsetFetch"]
    (consumer,) = _ScriptedConsumer.instances
    assert consumer.conf["group.id"] == "legacy" and consumer.conf["enable.auto.commit"] is False
    assert consumer.conf["bootstrap.servers"] == "broker-a:9092"
    # read_committed is what makes librdkafka's committed() ask for stable offsets
    # (RequireStable): a coordinator that has just taken the group over then never answers
    # with offsets older than a commit its predecessor acknowledged.
    assert consumer.conf["isolation.level"] == "read_committed"
    cluster.close()
    assert consumer.closed


def test_offsets_an_open_transaction_holds_are_read_again_then_named_with_the_fix(
    admin: type[_ScriptedAdmin],
) -> None:
    clock = ManualClock()
    cluster, kafka = _cluster(clock)
    kafka.held = {TP0: 5, TP1: 6}
    unstable = KafkaError.UNSTABLE_OFFSET_COMMIT
    kafka.answers = [{TP0: unstable}, {TP0: unstable, TP1: LOAD}, {}]
    assert kafka_group_offsets(cluster, "legacy", [TP0, TP1]) == {TP0: 5, TP1: 6}
    assert kafka.sent == ["OffsetFetch"] * 3

    kafka.answers = [{TP1: unstable}]
    with pytest.raises(KafkaGroupOffsetsError) as info:
        kafka_group_offsets(cluster, "legacy", [TP0, TP1])
    assert clock.monotonic_ms() / 1000 == pytest.approx(ATTEMPT_TIMEOUT_S, abs=1.01)
    text = str(info.value)
    assert "'legacy'" in text and "orders-1" in text, text
    assert "transaction" in text and "transaction.timeout.ms" in text, text


def test_a_coordinator_that_never_loads_ends_with_the_group_named(
    admin: type[_ScriptedAdmin],
) -> None:
    clock = ManualClock()
    cluster, kafka = _cluster(clock)
    kafka.answers = [{TP0: LOAD}]
    with pytest.raises(KafkaGroupOffsetsError) as info:
        commit_to_kafka_group(cluster, "legacy", {TP0: 5})
    assert clock.monotonic_ms() / 1000 == pytest.approx(ATTEMPT_TIMEOUT_S, abs=1.01)
    assert "'legacy'" in str(info.value) and "orders-0: broker says no" in str(info.value)
    assert kafka.held == {}


def test_a_group_with_live_consumers_is_refused_at_once_naming_the_group_and_the_fix(
    admin: type[_ScriptedAdmin],
) -> None:
    clock = ManualClock()
    cluster, kafka = _cluster(clock)
    kafka.answers = [{TP0: KafkaError.UNKNOWN_MEMBER_ID}]
    with pytest.raises(KafkaGroupOffsetsError) as info:
        commit_to_kafka_group(cluster, "legacy", {TP0: 5})
    message = str(info.value)
    assert kafka.sent == ["OffsetCommit"] and clock.monotonic_ms() == 0
    assert "Kafka consumer group 'legacy' has active consumers" in message
    assert "Stop those consumers" in message and "--kafka-group" in message


def test_the_mirror_warns_once_per_streak_and_resends_what_kafka_did_not_take(
    admin: type[_ScriptedAdmin], caplog: pytest.LogCaptureFixture
) -> None:
    cluster, kafka = _cluster(ManualClock())
    mirror = KafkaOffsetMirror(cluster, "legacy")
    kafka.answers = [{TP0: KafkaError.UNKNOWN_MEMBER_ID}]
    with caplog.at_level(logging.INFO, "spark_kafka_group.kafka.consumer_group_offsets"):
        for offset in (1, 2, 3):
            mirror.commit({TP0: offset})  # never raises
            assert mirror.flush(5)
        assert mirror.failures == 3 and mirror.commits == 0 and kafka.held == {}
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1  # the first failure of the streak
        assert "Kafka consumer group 'legacy' has active consumers" in warnings[0]
        assert "the group log keeps every committed offset" in warnings[0]

        # A coordinator that moves (NOT_COORDINATOR, then loading) is waited for within
        # the commit; the offsets Kafka did not take go with the next commit.
        kafka.answers = [KafkaError.NOT_COORDINATOR, {TP1: LOAD}, {}]
        mirror.commit({TP1: 7})
        assert mirror.flush(5)
        assert kafka.held == {TP0: 3, TP1: 7} and mirror.commits == 1
        assert any("took the offsets again" in r.getMessage() for r in caplog.records)
        sent = len(kafka.sent)
        mirror.commit({TP0: 3, TP1: 7})  # what Kafka holds already: not sent again
        assert mirror.flush(5) and len(kafka.sent) == sent

        # What Kafka refused is sent once more when the mirror closes, so that a run's final
        # offsets are not left behind.
        refused = KafkaError.UNKNOWN_MEMBER_ID
        kafka.answers = [{TP0: refused, TP1: refused}, {}]
        mirror.commit({TP0: 9, TP1: 9})
        assert mirror.flush(5) and kafka.held == {TP0: 3, TP1: 7}
        mirror.close()
        assert kafka.held == {TP0: 9, TP1: 9}
        mirror.commit({TP0: 10})  # after close: dropped, never raises
        assert kafka.held == {TP0: 9, TP1: 9}


@pytest.mark.parametrize(
    ("code", "names"),
    [
        (KafkaError._AUTHENTICATION, "kafka.sasl.jaas.config"),
        (KafkaError.SASL_AUTHENTICATION_FAILED, "kafka.sasl.jaas.config"),
        (KafkaError._SSL, "kafka.ssl.truststore.location"),
    ],
)
def test_a_cluster_that_refuses_the_client_fails_at_once_naming_the_settings(
    admin: type[_ScriptedAdmin], code: int, names: str
) -> None:
    clock = ManualClock()
    cluster = KafkaCluster(
        "broker-a:9092", retry=OffsetFetchRetry(num_retries=3, retry_interval_ms=1000), clock=clock
    )
    kafka = _ScriptedAdmin.instances[-1]
    kafka.client_error = KafkaError(code, "Authentication failed (invalid credentials)")
    with pytest.raises(BrokerUnavailableError) as info:
        cluster.latest_offsets([TP0])
    message = str(info.value)
    assert "'broker-a:9092' refused this client" in message and names in message
    assert "invalid credentials" in message and "trying again cannot help" in message
    assert clock.monotonic_ms() < 1000  # one attempt, no retry pause
