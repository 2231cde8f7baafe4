"""Hypothesis drives the commit path against stale folds: a member's progress listener commits
its query's batches (forward, or rewinding a partition below its committed offset: a reset by
policy), folders read the commit objects at one moment and fold what they read at a later one
(after newer objects, rewinds included, may have been folded), and an operator resets the
offsets of the emptied group while folders still hold what they read before.

The property: the log never goes back in batch order. Every offset a batch reaches is unique
in its partition, and ranked by when it was reached (an operator's reset ranks after every
batch before it), so the committed offset of each partition, folded after every step, must
never take a value ranked below one it held before: a stale object folded after a rewind
would bring back the higher offset the rewind moved away from. A fold of what the store
holds now brings the log to the newest batch's end.

``GROUP_STATEFUL_EXAMPLES`` / ``GROUP_STATEFUL_STEPS`` raise the budget for a deep run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from spark_kafka_group.group import (
    GroupConfig,
    GroupCoordinator,
    GroupRecord,
    GroupState,
    JoinRequest,
    ManualClock,
    RecordKind,
    TopicPartition,
)
from spark_kafka_group.group.offsets import fold_commit_objects, reset
from spark_kafka_group.listener.writes import commit_batch_for_member
from spark_kafka_group.member.log_client import GroupLogClient
from spark_kafka_group.ops.leave import leave_for_member
from spark_kafka_group.store.commit_objects import InMemoryCommitObjects
from spark_kafka_group.store.memory import InMemoryLog

PARTITIONS = (TopicPartition("t", 0), TopicPartition("t", 1))
CONFIG = GroupConfig(initial_rebalance_delay_ms=0)
#: Where the offsets of each stretch of batches start: the first member's, each rewind's (below
#: everything before), each reset's (above everything before). Every stretch is shorter than
#: the gap to the next one, so every offset is reached once.
FIRST, REWIND_BELOW, RESET_ABOVE, GAP = 100_000, 90_000, 200_000, 1_000


def fold_records(
    work: GroupCoordinator, objects: Mapping[str, object], now: int
) -> list[GroupRecord]:
    """The fold's records (the production handler), on the folded group."""
    records, _ = fold_commit_objects(work.group, objects, now)  # type: ignore[arg-type]
    return records


def reset_records(
    work: GroupCoordinator, offsets: dict[TopicPartition, int], now: int
) -> list[GroupRecord]:
    records, response = reset(work.group, offsets, now)
    assert response.accepted == set(offsets)
    return records


class CommitPathMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(1_000)
        self.log = InMemoryLog()
        self.objects = InMemoryCommitObjects(now_ms=self.clock.now_ms)
        self.n = 0
        self.member = ""
        self.batch_id = -1
        self.order = 0
        self.rank: dict[tuple[TopicPartition, int], int] = {}  # offset -> when reached
        self.position: dict[TopicPartition, int] = dict.fromkeys(PARTITIONS, FIRST)
        self.newest: dict[TopicPartition, int] = {}  # the newest batch's end (or reset)
        self.highest_rank: dict[TopicPartition, int] = {}  # of what the log has held
        self.rewinds = 0
        self.resets = 0
        self.reads: list[dict[str, object]] = []
        self.join()

    def client(self) -> GroupLogClient:
        return GroupLogClient(
            "memory", "g", log=self.log, clock=self.clock, commit_objects=self.objects,
            config=CONFIG,
        )  # fmt: skip

    def join(self) -> None:
        """A new member joins the group alone and is given both partitions."""
        self.n += 1
        self.member = member = f"m{self.n}"
        self.batch_id = -1

        def decide(work: GroupCoordinator, now: int) -> tuple[list[GroupRecord], None]:
            request = JoinRequest(member, ("range",), topics=("t",), session_timeout_ms=60_000)
            records, _ = work.join(request, now)
            work.apply_all(records)
            synced, _ = work.sync(member, work.group.generation, now, metadata={"t": 2})
            return records + synced, None

        client = self.client()
        client.transact(decide)
        group = client.coordinator.group
        assert group.state is GroupState.STABLE and group.members[member].held == set(PARTITIONS)

    def reached(self, tp: TopicPartition, offset: int) -> None:
        assert (tp, offset) not in self.rank
        self.order += 1
        self.rank[(tp, offset)] = self.order

    @rule(length=st.integers(1, 5), rewind=st.sets(st.sampled_from(PARTITIONS)))
    def batch(self, length: int, rewind: set[TopicPartition]) -> None:
        """A batch of the member's query completes; its progress listener commits it. A
        partition in ``rewind`` starts below everything read before (a reset by policy)."""
        starts: dict[TopicPartition, int] = {}
        for tp in sorted(rewind):
            self.rewinds += 1
            starts[tp] = self.position[tp] = REWIND_BELOW - self.rewinds * GAP
        ends = {tp: self.position[tp] + length for tp in PARTITIONS}
        for tp, end in ends.items():
            self.reached(tp, end)
            self.position[tp] = self.newest[tp] = end
        self.batch_id += 1
        client = self.client()
        generation = client.fold().group.generation
        commit_batch_for_member(
            "memory", "g", self.member, generation, ends, batch_id=self.batch_id,
            starts=starts, client=client,
        )  # fmt: skip

    @rule()
    def read_objects(self) -> None:
        """A folder lists and reads the commit objects (and may fold them much later)."""
        self.reads.append(dict(self.objects.get(self.objects.list())))

    @precondition(lambda self: self.reads)
    @rule(k=st.integers(0, 50))
    def fold_what_was_read(self, k: int) -> None:
        """A folder folds what it read, maybe long ago, onto the log as it is now."""
        objects = self.reads[k % len(self.reads)]
        self.client().transact(lambda work, now: (fold_records(work, objects, now), None))

    @rule()
    def fold_now(self) -> None:
        """A fold of what the store holds now brings the log to the newest batch's end."""
        objects = dict(self.objects.get(self.objects.list()))
        client = self.client()
        client.transact(lambda work, now: (fold_records(work, objects, now), None))
        if self.newest:
            committed = {tp: o.offset for tp, o in client.coordinator.group.offsets.items()}
            assert committed == self.newest

    @rule(ms=st.integers(1, 5_000))
    def advance_clock(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule()
    def operator_reset(self) -> None:
        """The member's query stops (its LEAVE folds its commits first), an operator resets
        both partitions of the empty group, and a new member takes over from there."""
        assert leave_for_member("memory", "g", self.member, client=self.client())
        self.resets += 1
        offsets = {tp: RESET_ABOVE + self.resets * 10 * GAP + i for i, tp in enumerate(PARTITIONS)}
        for tp, offset in offsets.items():
            self.reached(tp, offset)
            self.position[tp] = self.newest[tp] = offset
        self.client().transact(lambda work, now: (reset_records(work, offsets, now), None))
        self.join()

    @invariant()
    def the_log_never_goes_back_in_batch_order(self) -> None:
        client = self.client()
        group = client.fold().group
        for tp, committed in group.offsets.items():
            rank = self.rank[(tp, committed.offset)]
            assert rank >= self.highest_rank.get(tp, 0), (
                f"{tp}: the log went back to {committed.offset} (reached {rank}) after holding "
                f"an offset reached {self.highest_rank[tp]}: a stale fold undid a newer commit"
            )
            self.highest_rank[tp] = rank

    @invariant()
    def only_folds_write_the_members_commits(self) -> None:
        """Every COMMIT in a member's name comes from a fold of one of its commit objects."""
        for record in self.log.records:
            if record.kind == RecordKind.COMMIT and record.member_id is not None:
                assert (record.payload or {}).get("object") is not None, record


CommitPathMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("GROUP_STATEFUL_EXAMPLES", "30")),
    stateful_step_count=int(os.environ.get("GROUP_STATEFUL_STEPS", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestCommitPathStateMachine = CommitPathMachine.TestCase
