"""An eager rebalance (``range``, ``roundrobin``, ``sticky``): a member's JOIN gives up
everything it holds, so, as a Kafka consumer commits in ``onJoinPrepare`` before its
JoinGroup, it first lets its batch in flight finish and commit; its reader plans nothing
meanwhile. Without that, a batch still running at the JOIN could not commit any more and its
next owner read it again (seen in the rolling-upgrade test once the trigger stopped stepping
the protocol)."""

from __future__ import annotations

from spark_kafka_group.group import GroupConfig, TopicPartition
from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.timer import ManualClock
from spark_kafka_group.member.member import GroupMember, SubscriptionSpec
from spark_kafka_group.options import parse_options
from spark_kafka_group.store.commit_objects import InMemoryCommitObjects
from spark_kafka_group.store.memory import InMemoryLeases, InMemoryLog

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
REBALANCE_TIMEOUT_MS = 20_000


class Group:
    """Members of one eager group over an in-memory log, commit objects and leases, stepped
    by hand on one manual clock."""

    def __init__(self) -> None:
        self.clock = ManualClock(1_000_000)
        self.log = InMemoryLog()
        self.objects = InMemoryCommitObjects()
        self.leases = InMemoryLeases()

    def member(self, name: str) -> GroupMember:
        settings = parse_options(
            {
                "subscribe": "t",
                "kafka.bootstrap.servers": "localhost:9092",
                "groupId": "g",
                "groupStore": "memory://",
                "assignmentStrategy": "range",
                "initialRebalanceDelayMs": "0",
                "heartbeatIntervalMs": "1000",
                "sessionTimeoutMs": "10000",
                "rebalanceTimeoutMs": str(REBALANCE_TIMEOUT_MS),
            }
        ).group
        m = GroupMember(
            settings,
            subscription=SubscriptionSpec(topics=("t",)),
            topic_counts=lambda: {"t": 2},
            clock=self.clock,
            log=self.log,
            leases=self.leases,
            commit_objects=self.objects,
            member_id=name,
            config=GroupConfig(initial_rebalance_delay_ms=0),
        )
        m.refresh_metadata()
        return m

    def settle(self, *members: GroupMember) -> None:
        for _ in range(100):
            if all(m.poll().settled for m in members):
                return
            self.clock.advance(100)
        raise AssertionError(f"not settled: {[m.holdings for m in members]}")

    def joins_of(self, member_id: str) -> int:
        return sum(
            1 for r in self.log.records if r.kind == RecordKind.JOIN and r.member_id == member_id
        )


def test_an_eager_rejoin_waits_for_the_batch_in_flight_to_commit() -> None:
    group = Group()
    a = group.member("a")
    group.settle(a)
    generation = a.holdings.generation
    assert a.holdings.held == {T0, T1}
    assert a.begin_batch({T0: 10, T1: 10}, batch_generation=generation) == {T0, T1}

    b = group.member("b")
    b.poll()  # its JOIN starts an eager rebalance: a must rejoin, giving up both
    for _ in range(5):
        a.poll()
        group.clock.advance(100)
    assert group.joins_of("a") == 1  # not rejoined: its batch has not committed
    revoking = a.current_holdings()
    assert revoking.revoking == revoking.held == {T0, T1}  # the reader plans nothing

    a.commit({T0: 10, T1: 10}, batch_generation=generation, batch_member="a")
    a.poll()  # the commit, written directly (being revoked), then the JOIN
    assert group.joins_of("a") == 2
    assert a.committed_offsets() == {T0: 10, T1: 10}
    group.settle(a, b)
    assert a.committed_offsets() == {T0: 10, T1: 10}  # where the new owners start
    assert a.holdings.held | b.holdings.held == {T0, T1}


def test_an_eager_rejoin_waits_at_most_half_its_rebalance_timeout() -> None:
    group = Group()
    a = group.member("a")
    group.settle(a)
    generation = a.holdings.generation
    a.begin_batch({T0: 10, T1: 10}, batch_generation=generation)
    b = group.member("b")
    b.poll()
    started = group.clock.monotonic_ms()
    while group.joins_of("a") == 1:  # the batch never completes
        a.poll()
        group.clock.advance(100)
        assert group.clock.monotonic_ms() - started <= REBALANCE_TIMEOUT_MS
    waited = group.clock.monotonic_ms() - started
    assert REBALANCE_TIMEOUT_MS // 2 <= waited <= REBALANCE_TIMEOUT_MS // 2 + 200
    group.settle(a, b)
    # Joined in time: the rebalance kept it, and its partitions start from the last commit.
    assert {a.member_id, b.member_id} <= set(a.client.coordinator.group.members)
    assert a.committed_offsets() == {}


def test_a_member_without_a_batch_in_flight_rejoins_at_once() -> None:
    group = Group()
    a = group.member("a")
    group.settle(a)
    b = group.member("b")
    b.poll()
    a.poll()
    assert group.joins_of("a") == 2
