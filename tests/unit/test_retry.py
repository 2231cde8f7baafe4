"""The one retry policy (:mod:`spark_kafka_group.retry`) and the loops that use it, on a
:class:`ManualClock`: every pause moves the clock, none blocks (``time.sleep`` is forbidden)."""

from __future__ import annotations

import math
import random
import threading
import time
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any, ClassVar, cast

import pytest
from confluent_kafka import KafkaError, KafkaException

import spark_kafka_group.kafka.cluster as cluster_module
from spark_kafka_group.errors import BrokerUnavailableError, GroupStoreError
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.group.timer import ManualClock
from spark_kafka_group.kafka.cluster import (
    UNREACHABLE_FAST_FAIL_S,
    KafkaCluster,
)
from spark_kafka_group.kafka.config import OffsetFetchRetry, error_code, error_text
from spark_kafka_group.kafka.consumer_group_offsets import (
    KafkaGroupOffsetsError,
    commit_to_kafka_group,
    kafka_group_offsets,
)
from spark_kafka_group.member.heartbeat import MAX_BACKOFF_S, HeartbeatThread
from spark_kafka_group.member.log_client import (
    MAX_CONFLICTS,
    MIN_BACKOFF_BASE_S,
    Attempt,
    GroupLogClient,
)
from spark_kafka_group.retry import Backoff
from spark_kafka_group.store.log_store import LogStore
from spark_kafka_group.store.memory import InMemoryLog

ATTEMPT_TIMEOUT_S = OffsetFetchRetry().api_timeout_ms / 1000


@pytest.fixture
def no_real_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    real_sleep = time.sleep

    def forbidden(seconds: float) -> None:
        # Only the test's own thread: other threads of the process (py4j's, when a Spark
        # session lives in it) sleep as they always do.
        if threading.current_thread() is not threading.main_thread():
            real_sleep(seconds)
            return
        raise AssertionError(f"a real sleep of {seconds}s bypassed the injected clock")

    monkeypatch.setattr(time, "sleep", forbidden)


# -- the policy ---------------------------------------------------------------------------


def test_delays_double_up_to_the_cap_and_the_doubling_limit() -> None:
    policy = Backoff(base_s=0.5, cap_s=5.0)
    assert [policy.delay_s(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    limited = Backoff(base_s=1.0, max_doublings=2)
    assert [limited.delay_s(n) for n in range(5)] == [1.0, 2.0, 4.0, 4.0, 4.0]
    fixed = Backoff(base_s=0.7, cap_s=0.7)
    assert [fixed.delay_s(n) for n in range(1, 5)] == [0.7] * 4
    assert list(zip(range(3), Backoff(base_s=1.0).delays(), strict=False)) == [
        (0, 2.0),
        (1, 4.0),
        (2, 8.0),
    ]


def test_jitter_draws_the_given_share_of_each_delay_repeatably() -> None:
    full = Backoff(base_s=1.0, jitter=1.0)
    draws = [full.delay_s(3, random.Random(5)) for _ in range(3)]
    assert draws[0] == draws[1] == draws[2]  # a seeded generator repeats
    rng = random.Random(1)
    samples = [full.delay_s(3, rng) for _ in range(500)]
    assert all(0.0 <= s <= 8.0 for s in samples) and len(set(samples)) == 500
    assert min(samples) < 1.0 and max(samples) > 7.0  # spread over the whole range
    tenth = Backoff(base_s=1.0, jitter=0.1)
    rng = random.Random(2)
    assert all(7.2 <= tenth.delay_s(3, rng) <= 8.0 for _ in range(200))


def test_with_base_keeps_the_rest_of_the_policy() -> None:
    policy = Backoff(base_s=1.0, cap_s=3.0, max_doublings=4, jitter=0.5)
    scaled = policy.with_base(0.25)
    assert (scaled.base_s, scaled.cap_s, scaled.max_doublings, scaled.jitter) == (
        0.25,
        3.0,
        4,
        0.5,
    )
    assert scaled.ceiling_s(2) == 1.0 and policy.ceiling_s(2) == 3.0


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"base_s": -1.0}, "base_s"),
        ({"base_s": math.nan}, "base_s"),
        ({"base_s": 1.0, "cap_s": -1.0}, "cap_s"),
        ({"base_s": 1.0, "max_doublings": -1}, "max_doublings"),
        ({"base_s": 1.0, "jitter": 1.5}, "jitter"),
    ],
)
def test_a_policy_that_makes_no_sense_is_refused_by_name(
    kwargs: dict[str, float], named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        Backoff(**kwargs)  # type: ignore[arg-type]


# -- the group log's compare-and-swap conflicts --------------------------------------------


def _client(clock: ManualClock, seed: int = 3) -> GroupLogClient:
    return GroupLogClient(
        "memory", "g", log=InMemoryLog(clock=clock), clock=clock, random_seed=seed
    )


def test_conflict_backoff_keeps_its_jittered_exponential_scaled_to_the_append_time() -> None:
    clock = ManualClock()
    client = _client(clock, seed=11)
    old = random.Random(11)  # the formula it had before the policy was written once
    for lost, append_s in [(1, 0.001), (2, 0.02), (3, 0.02), (7, 0.05), (9, 0.004)]:
        base = max(append_s, MIN_BACKOFF_BASE_S)
        expected = old.uniform(0, base * 2 ** min(lost, 6))
        assert client.backoff_s(lost, append_s=append_s) == pytest.approx(expected)


def test_conflict_retries_wait_on_the_clock_and_give_up_with_the_log_named(
    no_real_sleep: None,
) -> None:
    clock = ManualClock(1_000)
    client = _client(clock)
    rng = random.Random(3)
    expected = sum(
        rng.uniform(0, MIN_BACKOFF_BASE_S * 2 ** min(lost + 1, 6)) for lost in range(MAX_CONFLICTS)
    )
    attempts = 0

    def prepare() -> Attempt[None]:
        nonlocal attempts
        attempts += 1
        return Attempt(records=[object()], result=None, expected_version=0, now_ms=0)  # type: ignore[list-item]

    with pytest.raises(GroupStoreError) as info:
        client.retry(prepare, lambda attempt: False)
    assert attempts == MAX_CONFLICTS
    assert "memory" in str(info.value) and f"{MAX_CONFLICTS} compare-and-swap" in str(info.value)
    assert clock.monotonic_ms() - 1_000 == pytest.approx(expected * 1000, abs=MAX_CONFLICTS)


class _SlowLog:
    """A log whose every append takes ``latency_ms`` on the clock (the rest is not needed)."""

    uri = "memory://slow"

    def __init__(self, clock: ManualClock, latency_ms: int) -> None:
        self.clock, self.latency_ms, self.version = clock, latency_ms, -1

    def append(self, records: list[Any], *, expected_version: int) -> int:
        self.clock.advance(self.latency_ms)
        self.version = expected_version + 1
        return self.version


def test_append_time_is_measured_on_the_clock() -> None:
    clock = ManualClock()
    client = GroupLogClient("memory", "g", log=cast(LogStore, _SlowLog(clock, 80)), clock=clock)
    for _ in range(30):
        assert client.complete(Attempt([], None, client.version, clock.now_ms()))
    # The unit of the conflict backoff follows the store's append time (moving average).
    assert client.append_s == pytest.approx(0.08, rel=0.01)


# -- the member's background step ----------------------------------------------------------


def test_a_failing_step_waits_twice_as_long_each_time_up_to_the_cap() -> None:
    thread = HeartbeatThread(step=lambda: None, delay_s=lambda: 0.5)
    delays = []
    for failures in range(7):
        thread._failures = failures
        delays.append(thread._next_delay())
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, MAX_BACKOFF_S, MAX_BACKOFF_S]


# -- the Kafka client ----------------------------------------------------------------------


class _FakeAdmin:
    """Stands in for confluent-kafka's AdminClient: every request fails with ``code`` (and
    ``poll`` reports every broker down when ``all_down``)."""

    instances: ClassVar[list[_FakeAdmin]] = []

    def __init__(self, conf: dict[str, Any]) -> None:
        self.error_cb = conf["error_cb"]
        self.code = KafkaError._TRANSPORT
        self.all_down = False
        self.sent: list[str] = []
        if _FakeAdmin.instances:
            # The cluster replaces its AdminClient after an unanswered send: the new one
            # behaves as the test set up the first, and records into the same list.
            self.__dict__.update(_FakeAdmin.instances[0].__dict__)
        _FakeAdmin.instances.append(self)

    def _failed(self) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_exception(KafkaException(KafkaError(self.code, "broker says no")))
        return future

    def poll(self, timeout: float) -> int:
        if self.all_down:
            self.error_cb(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
        return 0

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self.sent.append("Metadata")
        raise KafkaException(KafkaError(self.code, "broker says no"))

    def list_offsets(self, request: dict[Any, Any], **kwargs: Any) -> dict[Any, Future[Any]]:
        self.sent.append("ListOffsets")
        return {tp: self._failed() for tp in request}


class _FakeConsumer:
    """Stands in for the cluster's Consumer handle of a Kafka group: every ``committed``
    (OffsetFetch) and ``commit`` (OffsetCommit) fails as the cluster's :class:`_FakeAdmin`
    says."""

    def __init__(self, conf: dict[str, Any]) -> None:
        self.admin = _FakeAdmin.instances[-1]

    def poll(self, timeout: float) -> None:
        return None

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        self.admin.sent.append("OffsetFetch")
        raise KafkaException(KafkaError(self.admin.code, "broker says no"))

    def commit(self, offsets: list[Any], asynchronous: bool) -> list[Any]:
        self.admin.sent.append("OffsetCommit")
        raise KafkaException(KafkaError(self.admin.code, "broker says no"))

    def close(self) -> None:
        pass


@pytest.fixture
def fake_admin(monkeypatch: pytest.MonkeyPatch) -> type[_FakeAdmin]:
    _FakeAdmin.instances = []
    monkeypatch.setattr(cluster_module, "AdminClient", _FakeAdmin)
    monkeypatch.setattr(cluster_module, "Consumer", _FakeConsumer)
    return _FakeAdmin


def test_a_request_without_answer_gives_up_after_its_attempts_on_the_clock(
    fake_admin: type[_FakeAdmin], no_real_sleep: None
) -> None:
    clock = ManualClock(50_000)
    retry = OffsetFetchRetry(num_retries=3, retry_interval_ms=700)
    with (
        KafkaCluster("broker-a:9092", retry=retry, clock=clock) as cluster,
        pytest.raises(BrokerUnavailableError) as info,
    ):
        cluster.latest_offsets([TopicPartition("orders", 0)])
    elapsed_s = (clock.monotonic_ms() - 50_000) / 1000
    # Three attempts of ATTEMPT_TIMEOUT_S each, 0.7 s apart; resends within an attempt never
    # wait past its end.
    assert elapsed_s == pytest.approx(3 * ATTEMPT_TIMEOUT_S + 2 * 0.7, abs=0.01)
    message = str(info.value)
    assert "broker-a:9092" in message and "broker says no" in message
    assert "ListOffsets: 3 attempt(s)" in message
    assert "fetchOffset.numRetries=3" in message and "fetchOffset.retryIntervalMs=700" in message
    assert "kafka.default.api.timeout.ms=60000" in message
    admin = fake_admin.instances[0]  # and the ones that replaced it, recording into its list
    assert len(fake_admin.instances) > 1
    sends = admin.sent.count("ListOffsets")
    # Resent within each attempt, with backoff (RESEND_BACKOFF's cap apart once it has grown)
    assert 3 < sends <= 3 * (ATTEMPT_TIMEOUT_S / cluster_module.RESEND_BACKOFF.cap_s + 5)
    # ... each time after asking for fresh metadata, which is how a resend finds a new leader.
    assert admin.sent.count("Metadata") >= sends - 3


def test_an_unreachable_cluster_ends_each_attempt_early_on_the_clock(
    fake_admin: type[_FakeAdmin], no_real_sleep: None
) -> None:
    clock = ManualClock()
    cluster = KafkaCluster("nowhere:9092", retry=OffsetFetchRetry(num_retries=2), clock=clock)
    fake_admin.instances[0].all_down = True
    with pytest.raises(BrokerUnavailableError) as info:
        kafka_group_offsets(cluster, "legacy", [TopicPartition("orders", 0)])
    elapsed_s = clock.monotonic_ms() / 1000
    assert elapsed_s == pytest.approx(2 * UNREACHABLE_FAST_FAIL_S + 1.0, abs=1.01)
    assert elapsed_s < 2 * ATTEMPT_TIMEOUT_S
    message = str(info.value)
    assert "nowhere:9092" in message and "OffsetFetch: 2 attempt(s)" in message
    assert "1/1 brokers are down" in message


def test_a_refused_commit_is_not_retried_and_names_the_group_and_the_fix(
    fake_admin: type[_FakeAdmin], no_real_sleep: None
) -> None:
    clock = ManualClock()
    cluster = KafkaCluster("broker-a:9092", clock=clock)
    admin = fake_admin.instances[0]
    admin.code = KafkaError.REBALANCE_IN_PROGRESS
    with pytest.raises(KafkaGroupOffsetsError) as info:
        commit_to_kafka_group(cluster, "legacy", {TopicPartition("orders", 0): 5})
    assert admin.sent == ["OffsetCommit"] and clock.monotonic_ms() == 0
    message = str(info.value)
    assert "'legacy'" in message and "broker-a:9092" in message and "broker says no" in message
    assert "Stop those consumers" in message


def test_kafka_error_text_and_code() -> None:
    exc = KafkaException(KafkaError(KafkaError._TRANSPORT, "connection reset"))
    assert error_text(exc) == "connection reset" and error_code(exc) == KafkaError._TRANSPORT
    assert error_text(ValueError("bad")) == "bad" and error_code(ValueError("bad")) is None
    assert error_text(TimeoutError()) == "TimeoutError"


def test_an_earliest_or_latest_answer_without_an_offset_is_sent_again(
    fake_admin: type[_FakeAdmin], no_real_sleep: None
) -> None:
    # A KRaft broker just fenced (a pause) answered ListOffsets with offset -1001 and no
    # error: the trigger took it for the partition's bounds and failed the query.
    clock = ManualClock()
    cluster = KafkaCluster("broker-a:9092", clock=clock)
    admin = fake_admin.instances[0]
    offsets = iter([-1001, -1001, 0, 42])  # earliest and latest, twice

    def list_offsets(request: dict[Any, Any], **kwargs: Any) -> dict[Any, Future[Any]]:
        admin.sent.append("ListOffsets")
        answers: dict[Any, Future[Any]] = {}
        for tp in request:
            future: Future[Any] = Future()
            future.set_result(SimpleNamespace(offset=next(offsets), timestamp=-1))
            answers[tp] = future
        return answers

    admin.list_offsets = list_offsets  # type: ignore[method-assign]
    tp = TopicPartition("orders", 0)
    assert cluster.earliest_and_latest_offsets([tp]) == ({tp: 0}, {tp: 42})
    assert admin.sent == ["ListOffsets", "ListOffsets", "Metadata", "ListOffsets", "ListOffsets"]
    assert 0 < clock.monotonic_ms() < 1000  # one short pause, on the injected clock


def test_a_send_answered_after_it_was_sent_again_is_taken(
    fake_admin: type[_FakeAdmin], no_real_sleep: None
) -> None:
    # A slow but live broker: the first send's answer comes after the request went out again
    # (through a new AdminClient); that answer counts, the second send's never comes.
    clock = ManualClock()
    cluster = KafkaCluster("broker-a:9092", clock=clock)
    first = fake_admin.instances[0]
    unanswered: list[Future[Any]] = []

    def list_offsets(request: dict[Any, Any], **kwargs: Any) -> dict[Any, Future[Any]]:
        first.sent.append("ListOffsets")
        if unanswered:  # sent again: the broker answers the first send now
            unanswered[0].set_result(SimpleNamespace(offset=7, timestamp=-1))
        else:  # most of the wait passes at once, so the test waits milliseconds, not a second
            clock.advance(950)
        future: Future[Any] = Future()
        unanswered.append(future)
        return {tp: future for tp in request}

    def poll(timeout: float) -> int:
        clock.advance(250)  # each wait slice for an answer moves the injected clock
        return 0

    first.list_offsets = list_offsets  # type: ignore[method-assign]
    first.poll = poll  # type: ignore[method-assign]
    tp = TopicPartition("orders", 0)
    assert cluster.latest_offsets([tp]) == {tp: 7}
    assert first.sent.count("ListOffsets") == 2
    assert len(fake_admin.instances) == 2  # the second send went through a new AdminClient
    assert not unanswered[1].done()
    waited_s = clock.monotonic_ms() / 1000
    assert cluster_module.SEND_AGAIN_AFTER_S <= waited_s < cluster_module.SEND_AGAIN_AFTER_S + 0.5
