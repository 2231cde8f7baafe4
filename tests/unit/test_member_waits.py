"""The member's waits (the join wait at start, the grace period at close) and the reader's
``maxTriggerDelay`` run on the injected clock: with a :class:`ManualClock` they pass in
manual time, exactly as long as configured, and never block the test."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from spark_kafka_group.errors import GroupJoinTimeoutError, OptionError
from spark_kafka_group.group import GroupConfig, TopicPartition
from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.timer import ManualClock
from spark_kafka_group.member.member import GroupMember, SubscriptionSpec
from spark_kafka_group.ops.admin import describe_group, reset_offsets
from spark_kafka_group.options import GroupSettings, parse_options
from spark_kafka_group.source.reader import KafkaGroupStreamReader
from spark_kafka_group.store.memory import InMemoryLog

T0 = TopicPartition("t", 0)


def _options(**extra: str) -> dict[str, str]:
    return {
        "subscribe": "t",
        "kafka.bootstrap.servers": "localhost:9092",
        "groupId": "g",
        "groupStore": "memory://",
        "heartbeatIntervalMs": "1000",
        "sessionTimeoutMs": "10000",
        "rebalanceTimeoutMs": "20000",
        "initialRebalanceDelayMs": "0",
        **extra,
    }


def _settings(**extra: str) -> GroupSettings:
    return parse_options(_options(**extra)).group


def _member(log: InMemoryLog, clock: ManualClock, settings: GroupSettings) -> GroupMember:
    """A member over the in-memory log, with liveness and commits in the log itself."""
    return GroupMember(
        settings,
        subscription=SubscriptionSpec(topics=("t",)),
        topic_counts=lambda: {"t": 1},
        clock=clock,
        log=log,
    )


def _settle(member: GroupMember, clock: ManualClock) -> None:
    """Step by hand (no background thread) until the member holds its partition."""
    member.refresh_metadata()  # what start() does first: the leader assigns from it
    for _ in range(50):
        if member.poll().settled:
            return
        clock.advance(100)
    raise AssertionError(f"the member did not settle: {member.holdings}")


def test_close_waits_exactly_its_grace_period_for_the_last_commit() -> None:
    clock = ManualClock(1_000_000)
    log = InMemoryLog()
    member = _member(log, clock, _settings())
    _settle(member, clock)
    generation = member.holdings.generation
    assert member.begin_batch({T0: 10}, batch_generation=generation) == {T0}
    # The batch never completes: close waits its grace period for the commit, then stays in
    # the group without a LEAVE (a restart on its checkpoint runs that batch again).
    before = clock.monotonic_ms()
    member.close(grace_s=2.5)
    assert clock.monotonic_ms() - before == 2_500
    assert [r.kind for r in log.records].count(RecordKind.LEAVE) == 0
    assert member.committed_offsets() == {}


def test_close_does_not_wait_once_the_last_batch_is_committed() -> None:
    clock = ManualClock(1_000_000)
    log = InMemoryLog()
    member = _member(log, clock, _settings())
    _settle(member, clock)
    generation = member.holdings.generation
    member.begin_batch({T0: 10}, batch_generation=generation)
    member.commit({T0: 10}, batch_generation=generation, batch_member=member.member_id)
    before = clock.monotonic_ms()
    member.close(grace_s=2.5)
    assert clock.monotonic_ms() == before
    assert member.committed_offsets() == {T0: 10}
    assert [r.kind for r in log.records].count(RecordKind.LEAVE) == 1


@pytest.mark.timeout(60)  # before the waits used the clock, this one never ended
def test_the_join_wait_ends_on_the_injected_clock_with_a_message_naming_the_laggard() -> None:
    clock = ManualClock(1_000_000)
    log = InMemoryLog()
    # A member with a long session timeout joins, then stops stepping (a query that hangs):
    # the group waits for it for as long as its session timeout.
    other = _member(log, clock, _settings(sessionTimeoutMs="600000", rebalanceTimeoutMs="600000"))
    _settle(other, clock)
    member = _member(log, clock, _settings())
    before = clock.monotonic_ms()
    with pytest.raises(GroupJoinTimeoutError) as raised:
        member.start(must_complete_join=True)
    waited = clock.monotonic_ms() - before
    # rebalanceTimeoutMs + sessionTimeoutMs of manual time, up to one poll of the log later.
    assert 30_000 <= waited < 30_000 + 1_000
    message = str(raised.value)
    assert f"did not give member {member.member_id} a stable assignment within 30 s" in message
    assert "(rebalanceTimeoutMs 20000 + sessionTimeoutMs 10000)" in message
    # It counts as rejoined (it announced implicit rejoins) but, the leader, never assigns.
    assert "the group is CompletingRebalance" in message
    assert f"did not rejoin: {other.member_id} (leader, did not assign)." in message
    member.close()


def test_max_trigger_delay_counts_on_the_readers_clock() -> None:
    clock = ManualClock(0)
    options = parse_options(_options(minOffsetsPerTrigger="100", maxTriggerDelay="5s"))
    reader = KafkaGroupStreamReader(options, clock=clock)
    positions, few, enough = {T0: 0}, {T0: 50}, {T0: 100}
    assert not reader._waits_for_minimum(positions, few)  # the first trigger never waits
    clock.advance(1_000)
    assert reader._waits_for_minimum(positions, few)
    assert not reader._waits_for_minimum(positions, enough)  # a batch: the delay restarts
    clock.advance(4_999)
    assert reader._waits_for_minimum(positions, few)
    clock.advance(1)  # 5 s since the last batch
    assert not reader._waits_for_minimum(positions, few)
    assert reader._waits_for_minimum(positions, few)


def test_an_offset_reset_watches_stopped_members_on_the_injected_clock(tmp_path: Path) -> None:
    store = str(tmp_path)
    member_clock = ManualClock(1_000_000)
    settings = replace(_settings(), store=store)
    stopped = GroupMember(
        settings,
        subscription=SubscriptionSpec(topics=("t",)),
        topic_counts=lambda: {"t": 1},
        clock=member_clock,
    )
    _settle(stopped, member_clock)  # then it stops: no close, no LEAVE (a crashed query)
    # Later, by its timestamps it looks stopped: the reset watches it for its session timeout
    # on the resetting process's own clock before it expires it.
    clock = ManualClock(member_clock.now_ms() + 60_000)
    before = clock.monotonic_ms()
    plan = reset_offsets(store, "g", {T0: 7}, execute=True, clock=clock)
    waited = clock.monotonic_ms() - before
    assert plan == {T0: (None, 7)}
    assert 10_000 <= waited <= 10_000 + 2_000  # its session timeout, and a watch poll or two
    assert describe_group(store, "g").committed == {T0: 7}


def test_a_refused_session_timeout_names_the_bounds_the_group_enforces() -> None:
    clock = ManualClock(1_000_000)
    member = GroupMember(
        _settings(),  # sessionTimeoutMs 10000
        subscription=SubscriptionSpec(topics=("t",)),
        topic_counts=lambda: {"t": 1},
        clock=clock,
        log=InMemoryLog(),
        config=GroupConfig(min_session_timeout_ms=20_000, max_session_timeout_ms=60_000),
    )
    with pytest.raises(OptionError) as raised:
        member.poll()
    assert str(raised.value) == (
        "Group 'g' refused sessionTimeoutMs=10000: it must be between 20000 and 60000 ms "
        "(Kafka's group.min/max.session.timeout.ms)."
    )
