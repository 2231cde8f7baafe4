"""A trigger never waits on the group log: while the member's background step is inside a read
or a write of the store (held there by a gate), what the reader calls at every trigger
(``current_holdings``, ``begin_batch``, ``commit``, ``committed_offsets``) returns at once;
and a partition whose release the step is appending cannot be claimed by a batch meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from spark_kafka_group.group import GroupConfig, TopicPartition
from spark_kafka_group.group.records import GroupRecord
from spark_kafka_group.group.timer import ManualClock
from spark_kafka_group.member.member import GroupMember, SubscriptionSpec
from spark_kafka_group.options import parse_options
from spark_kafka_group.store.commit_objects import InMemoryCommitObjects
from spark_kafka_group.store.log_store import LogSlice
from spark_kafka_group.store.memory import InMemoryLeases, InMemoryLog

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
#: How long a call may take before the test calls it blocked (a deadlock guard, not a timing
#: claim: the calls under test do no I/O and return in microseconds).
BLOCKED_S = 10.0


class GatedLog(InMemoryLog):
    """An in-memory log whose reads and appends (those named in ``stops``) stop at a closed
    gate until it opens."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gate.set()
        self.waiting = threading.Event()  # a caller is stopped at the gate
        self.stops = {"read", "append"}

    def _pass(self, what: str) -> None:
        if what in self.stops and not self.gate.is_set():
            self.waiting.set()
            self.gate.wait()

    def read_slice(
        self, *, after_version: int = -1, from_latest_snapshot: bool = False
    ) -> LogSlice:
        self._pass("read")
        return super().read_slice(
            after_version=after_version, from_latest_snapshot=from_latest_snapshot
        )

    def append(self, records: Sequence[GroupRecord], *, expected_version: int) -> int:
        self._pass("append")
        return super().append(records, expected_version=expected_version)


def member(name: str, log: GatedLog, clock: ManualClock, objects: InMemoryCommitObjects,
           leases: InMemoryLeases) -> GroupMember:  # fmt: skip
    settings = parse_options(
        {
            "subscribe": "t",
            "kafka.bootstrap.servers": "localhost:9092",
            "groupId": "g",
            "groupStore": "memory://",
            "initialRebalanceDelayMs": "0",
        }
    ).group
    m = GroupMember(
        settings,
        subscription=SubscriptionSpec(topics=("t",)),
        topic_counts=lambda: {"t": 2},
        clock=clock,
        log=log,
        leases=leases,
        commit_objects=objects,
        member_id=name,
        config=GroupConfig(initial_rebalance_delay_ms=0),
    )
    m.refresh_metadata()
    return m


def settle(members: Sequence[GroupMember], clock: ManualClock) -> None:
    for _ in range(100):
        for m in members:
            m.poll()
        if all(m.holdings.settled for m in members):
            return
        clock.advance(100)
    raise AssertionError([m.holdings for m in members])


def returns_at_once(call: Callable[[], Any]) -> Any:
    """``call()``'s result, asserting it did not block (run in a thread, so a test of a call
    that does block fails instead of hanging)."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(call()), daemon=True)
    thread.start()
    thread.join(BLOCKED_S)
    assert not thread.is_alive(), "the call waited for the group log"
    return out[0]


def stopped_in_a_step(m: GroupMember, log: GatedLog) -> threading.Thread:
    """Start ``m``'s background step and wait until it is stopped at the closed gate."""
    log.gate.clear()
    log.waiting.clear()
    step = threading.Thread(target=m.loop._background_step, daemon=True)
    step.start()
    assert log.waiting.wait(BLOCKED_S), "the step never reached the store"
    return step


def test_what_a_trigger_calls_returns_while_the_background_step_waits_on_the_store() -> None:
    clock, log = ManualClock(), GatedLog()
    a = member("a", log, clock, InMemoryCommitObjects(), InMemoryLeases())
    settle([a], clock)
    generation = a.holdings.generation
    step = stopped_in_a_step(a, log)  # inside its fold: a read of the log

    assignment = returns_at_once(a.current_holdings)
    assert assignment.held == {T0, T1}
    # A restarted query's first trigger resumes its previous incarnation's checkpoint.
    resumed = returns_at_once(lambda: a.resume_checkpoint("a-before", generation, {T0: 0, T1: 0}))
    assert resumed == {T0, T1}
    ours = returns_at_once(lambda: a.begin_batch({T0: 5, T1: 7}, batch_generation=generation))
    assert ours == {T0, T1}
    returns_at_once(lambda: a.commit({T0: 5, T1: 7}, batch_generation=generation, batch_member="a"))
    assert returns_at_once(a.committed_offsets) == {}

    log.gate.set()
    step.join(BLOCKED_S)
    # The recorded commit is not lost: the steps write the object and the leader folds it.
    for _ in range(20):
        clock.advance(1_000)
        a.loop._background_step()
    assert a.committed_offsets() == {T0: 5, T1: 7}


def test_a_partition_being_released_cannot_be_claimed_by_a_batch_meanwhile() -> None:
    clock, log = ManualClock(), GatedLog()
    objects, leases = InMemoryCommitObjects(), InMemoryLeases()
    a = member("a", log, clock, objects, leases)
    settle([a], clock)
    generation = a.holdings.generation
    a.begin_batch({T0: 3, T1: 3}, batch_generation=generation)  # a batch runs: a keeps both
    b = member("b", log, clock, objects, leases)
    for _ in range(100):  # until the group takes one partition from a for b
        for m in (a, b):
            m.poll()
        if a.holdings.revoking:
            break
        clock.advance(100)
    (moving,) = a.holdings.revoking
    # The batch completes; a's next step writes its final offset and the release in one
    # append: stop that step there, after it decided the release.
    a.commit({T0: 3, T1: 3}, batch_generation=generation, batch_member="a", release={moving})
    log.stops = {"append"}
    step = stopped_in_a_step(a, log)
    assert a._book.releasing == {moving}

    # A trigger that planned it with an older assignment: the batch may not claim it.
    ours = returns_at_once(lambda: a.begin_batch({T0: 6, T1: 6}, batch_generation=generation))
    assert moving not in ours
    assert a.in_flight.ends[moving] == 3  # the completed batch's end, not the new one's

    log.gate.set()
    step.join(BLOCKED_S)
    assert moving not in a.holdings.held
    b.poll()
    assert b.committed_offsets()[moving] == 3  # its new owner starts where a's batch ended
