"""Hypothesis drives a whole group of production members
(:class:`spark_kafka_group.testing.simulation.SimMember`) over a shared in-memory log, with
liveness in leases or in the log: random joins, leaves, crashes (silence), static restarts,
clock advances, metadata changes, revocation acks (inside the member loop) and snapshots. Every
commit goes through the one offsets module (:mod:`spark_kafka_group.group.offsets`): the
member's own (its handler, ``commit_batch``, and through the member's ``commit()``: with commit
objects, recorded and folded by the leader), its query's progress listener's (with commit
objects, in the listener's own object), rewinds (a reset by policy, by the member and by the
listener), an operator's reset, and zombie commits (in the log, by a dead member and in its
name by the listener's rules, and stale commit objects, the members' and their listeners'),
while ownership moves with every rebalance. Every member's wall clock is off by a random amount
(up to hours either way), as on machines without NTP. Invariants are checked after every step
on the log folded record by record: among them, that a commit is applied only from the
partition's owner, that an operator's reset is applied only to an empty group, that committed
offsets of member commits never go back except by a rewind, and that a partition is released
only once the log holds its owner's last commit (a rewind included).

``GROUP_STATEFUL_EXAMPLES`` / ``GROUP_STATEFUL_STEPS`` raise the budget for a deep run.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from spark_kafka_group.group import (
    GroupConfig,
    GroupCoordinator,
    GroupMetadata,
    GroupState,
    ManualClock,
    RecordKind,
    TopicPartition,
    apply,
    latest_snapshot_index,
    replay,
)
from spark_kafka_group.group.offsets import (
    LISTENER,
    CommitObject,
    RecordedOffset,
    Source,
    commit_batch,
    reset,
)
from spark_kafka_group.group.payloads import JoinPayload, RevokePayload
from spark_kafka_group.listener.writes import commit_batch_for_member
from spark_kafka_group.member.folder import COMMIT_FOLD_INTERVAL_MS
from spark_kafka_group.member.log_client import GroupLogClient
from spark_kafka_group.store.commit_objects import InMemoryCommitObjects
from spark_kafka_group.store.memory import InMemoryLeases, InMemoryLog
from spark_kafka_group.testing.simulation import (
    Bystander,
    OffsetClock,
    SimMember,
    append,
    converged,
)

S = GroupState
LEGAL = {  # Kafka's ClassicGroupState, written out independently of state.py
    S.DEAD: {S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD},
    S.COMPLETING_REBALANCE: {S.PREPARING_REBALANCE},
    S.STABLE: {S.COMPLETING_REBALANCE},
    S.PREPARING_REBALANCE: {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY},
    S.EMPTY: {S.PREPARING_REBALANCE},
}
SESSION = 6_000
#: Offsets of commits through the member (the handler-level rules commit smaller ones).
MEMBER_COMMITS = 10_000
#: Offsets of rewinds (resets by policy) lie in [REWINDS, MEMBER_COMMITS): below every member
#: commit, above every handler-level commit.
REWINDS = 5_000
MAX_MEMBERS = 5
#: How far a member's wall clock may be off, either way.
MAX_CLOCK_OFFSET_MS = 4 * 3600_000
clock_offsets = st.integers(-MAX_CLOCK_OFFSET_MS, MAX_CLOCK_OFFSET_MS)


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(1_000)
        self.log = InMemoryLog()
        self.meta: dict[str, int] = {"t": 4, "logs-1": 2}
        self.live: list[SimMember] = []
        self.dead: list[SimMember] = []  # crashed or replaced: silent, but may try to commit
        self.n = 0
        self.checker = GroupMetadata("g")
        self.checked = 0
        self.max_generation = 0
        self.protocol = "cooperative-sticky"
        self.leases: InMemoryLeases | None = None
        self.releases = "current"
        self.config = GroupConfig(min_session_timeout_ms=1_000, initial_rebalance_delay_ms=0)
        self.bystander: Bystander | None = None
        self.objects: InMemoryCommitObjects | None = None
        # Member commits use offsets from one counter per partition, so they only grow;
        # the last one each member made per partition (what a release must hand over).
        self.counter: dict[TopicPartition, int] = {}
        self.last_commit: dict[tuple[str, TopicPartition], int] = {}
        # The last batch id of each member's query (batch ids grow in batch order).
        self.batch_ids: dict[str, int] = {}
        # Every batch planned through a member: the generation it was planned in, by the
        # (partition, end offset) it reached (ends are unique), and each member's batches
        # (generation, ends, batch id).
        self.planned: dict[tuple[TopicPartition, int], int] = {}
        self.batches: dict[str, list[tuple[int, dict[TopicPartition, int], int]]] = {}
        self.rewound = REWINDS

    @initialize(
        protocol=st.sampled_from(["cooperative-sticky", "range", "roundrobin", "sticky"]),
        delay=st.sampled_from([0, 0, 4_000]),
        leases=st.booleans(),
        releases=st.sampled_from(["current", "classic", "mixed"]),
        commit_objects=st.booleans(),
    )
    def setup(
        self, protocol: str, delay: int, leases: bool, releases: str, commit_objects: bool
    ) -> None:
        """``leases``: members keep their liveness in leases (the default), or in the log.
        ``releases``: members announce every feature, none (a release before leases and
        implicit rejoins), or every other member none (a group in a rolling upgrade)."""
        self.leases = InMemoryLeases() if leases else None
        self.objects = InMemoryCommitObjects() if commit_objects else None
        self.releases = releases
        self.protocol = protocol
        self.config = GroupConfig(
            min_session_timeout_ms=1_000,
            scheduled_rebalance_max_delay_ms=delay,
            initial_rebalance_delay_ms=0,
        )

    # ------------------------------------------------------------------ helpers

    def new_driver(
        self,
        static: bool,
        pattern: bool,
        offset: int,
        instance: str | None = None,
        replaces: str | None = None,
    ) -> SimMember:
        self.n += 1
        return SimMember(
            f"m{self.n}",
            self.log,
            self.clock,
            lambda: self.meta,
            protocols=(self.protocol,),
            topics=() if pattern else ("t",),
            pattern=r"logs-\d+" if pattern else None,
            instance_id=instance or (f"i{self.n}" if static else None),
            session_timeout_ms=SESSION,
            rebalance_timeout_ms=8_000,
            heartbeat_interval_ms=1_000,
            config=self.config,
            leases=self.leases,
            commit_objects=self.objects,
            features=self.features_of_next_member(),
            clock_offset_ms=offset,
            replaces=replaces,
        )

    def features_of_next_member(self) -> tuple[str, ...] | None:
        if self.releases == "classic" or (self.releases == "mixed" and self.n % 2):
            return ()
        return None  # what the member announces by default

    def tick_only(self) -> None:
        """A reader of the log that is no member writes what time decides, on its clock."""
        if self.bystander is None:
            clock = OffsetClock(self.clock, -MAX_CLOCK_OFFSET_MS // 3, 1_000)
            self.bystander = Bystander(self.log, clock, self.leases, self.config)
        self.bystander.tick()

    def next_batch_id(self, d: SimMember) -> int:
        batch_id = self.batch_ids[d.member_id] = self.batch_ids.get(d.member_id, -1) + 1
        return batch_id

    def plan(self, d: SimMember, ends: dict[TopicPartition, int], generation: int) -> int:
        """``d``'s query hands a batch planned in ``generation`` to Spark: its batch id."""
        d.member.begin_batch(ends, batch_generation=generation)
        batch_id = self.next_batch_id(d)
        self.batches.setdefault(d.member_id, []).append((generation, dict(ends), batch_id))
        for tp, end in ends.items():
            self.planned[(tp, end)] = generation
        return batch_id

    def the_listener_appended_nothing(self, version: int) -> None:
        """A member's commits reach the log through one writer, the fold (its own step's
        direct writes aside): its progress listener only writes its object, rewinds
        included."""
        assert self.log.version == version, "the progress listener appended to the log"

    def race(self) -> None:
        for d in self.live:
            d.prepare()
        for d in reversed(self.live):
            d.finish()

    # ------------------------------------------------------------------ rules

    @precondition(lambda self: len(self.live) < MAX_MEMBERS)
    @rule(static=st.booleans(), pattern=st.booleans(), offset=clock_offsets)
    def join(self, static: bool, pattern: bool, offset: int) -> None:
        d = self.new_driver(static, pattern, offset)
        self.live.append(d)
        d.step()

    @precondition(lambda self: self.live)
    @rule(i=st.integers(0, MAX_MEMBERS - 1))
    def poll(self, i: int) -> None:
        self.live[i % len(self.live)].step()

    @precondition(lambda self: self.live)
    @rule()
    def poll_all_racing(self) -> None:
        self.race()

    @precondition(lambda self: self.live)
    @rule(i=st.integers(0, MAX_MEMBERS - 1))
    def leave(self, i: int) -> None:
        d = self.live.pop(i % len(self.live))
        d.member.loop.leave()

    @precondition(lambda self: self.live)
    @rule(i=st.integers(0, MAX_MEMBERS - 1))
    def crash(self, i: int) -> None:
        self.dead.append(self.live.pop(i % len(self.live)))

    @precondition(lambda self: any(d.instance_id for d in self.live))
    @rule(i=st.integers(0, MAX_MEMBERS - 1), offset=clock_offsets)
    def static_restart(self, i: int, offset: int) -> None:
        statics = [d for d in self.live if d.instance_id]
        old = statics[i % len(statics)]
        self.live.remove(old)
        self.dead.append(old)  # the old process may linger as a zombie
        fresh = self.new_driver(True, old.pattern is not None, offset, instance=old.instance_id)
        self.live.append(fresh)
        fresh.step()

    @precondition(lambda self: any(not d.instance_id for d in self.live))
    @rule(i=st.integers(0, MAX_MEMBERS - 1), offset=clock_offsets)
    def dynamic_restart(self, i: int, offset: int) -> None:
        """A query restarted from its checkpoint: its new member replaces the old one."""
        dynamics = [d for d in self.live if not d.instance_id]
        old = dynamics[i % len(dynamics)]
        self.live.remove(old)
        self.dead.append(old)  # the old process may linger as a zombie
        fresh = self.new_driver(False, old.pattern is not None, offset, replaces=old.member_id)
        self.live.append(fresh)
        fresh.step()

    @rule(ms=st.integers(1, 9_000))
    def advance_clock(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule(topic=st.sampled_from(["t", "logs-1", "logs-2"]), count=st.integers(0, 6))
    def change_metadata(self, topic: str, count: int) -> None:
        if count == 0:
            self.meta.pop(topic, None)  # the topic is deleted
        else:
            self.meta[topic] = count

    @precondition(lambda self: self.live)
    @rule(i=st.integers(0, MAX_MEMBERS - 1))
    def commit(self, i: int) -> None:
        """The member's own commit of its current positions, decided by the offsets handler
        as the member's step decides it (``member.decide``): with the end of its newest batch
        of each partition. The positions lie below every batch planned through the member, so
        this is the member's commit of an older batch, processed late (after its progress
        listener committed a newer one)."""
        d = self.live[i % len(self.live)]
        d.fold()
        view = d.coord.member_view(d.member_id)
        gen = view.member_generation
        offsets = {tp: RecordedOffset(d.position.get(tp, 0) + 1, gen) for tp in view.assignment}
        newest = d.member.in_flight.ends
        work = d.coord.fork()
        before = dict(work.group.offsets)
        records, _ = commit_batch(
            work.group, d.member_id, offsets, d.clock.now_ms(), source=Source.MEMBER,
            newest=newest,
        )  # fmt: skip
        work.apply_all(records)
        if view.known and gen == d.coord.group.generation:
            # Held since at most its generation: every offset is accepted (the same one is
            # not written again), except where the log holds the end of the member's newest
            # batch (its listener committed it first): an older batch never moves it back.
            kept = {tp for tp in offsets if tp in before and before[tp].offset == newest.get(tp)}
            assert {tp: work.group.offsets[tp].offset for tp in offsets} == {
                tp: before[tp].offset if tp in kept else r.offset for tp, r in offsets.items()
            }
        assert append(self.log, records, d.version)

    @precondition(lambda self: self.live)
    @rule(i=st.integers(0, MAX_MEMBERS - 1))
    def member_commit(self, i: int) -> None:
        """The member's query completed a batch: plan it, then commit it through
        ``commit()`` (recorded in the member's commit object, or appended to the log), and
        release what it is revoking, as the reader does."""
        d = self.live[i % len(self.live)]
        assignment = d.member.holdings
        if assignment.generation < 0 or not assignment.held:
            return
        ends = {}
        for tp in sorted(assignment.held):
            if tp in assignment.revoking and not d.member.in_flight.reads_last(tp):
                continue  # not planned any more: the member only finishes its last batch
            ends[tp] = self.counter[tp] = self.counter.get(tp, MEMBER_COMMITS) + 1
        self.plan(d, ends, assignment.generation)
        d.member.commit(
            ends,
            batch_generation=assignment.generation,
            batch_member=d.member_id,
            release=assignment.revoking,
        )
        for tp, offset in ends.items():
            self.last_commit[(d.member_id, tp)] = offset

    @precondition(lambda self: self.live and self.objects is not None)
    @rule(i=st.integers(0, MAX_MEMBERS - 1))
    def listener_commit(self, i: int) -> None:
        """The member's query plans a batch and completes it; its progress listener commits it
        on the member's behalf, in the listener's own commit object (the member's own
        ``commit()`` comes at the next trigger, or never after ``query.stop()``)."""
        d = self.live[i % len(self.live)]
        assignment = d.member.holdings
        if assignment.generation < 0 or not assignment.held:
            return
        ends = {}
        for tp in sorted(assignment.held):
            if tp in assignment.revoking and not d.member.in_flight.reads_last(tp):
                continue  # not planned any more: the member only finishes its last batch
            ends[tp] = self.counter[tp] = self.counter.get(tp, MEMBER_COMMITS) + 1
        batch_id = self.plan(d, ends, assignment.generation)
        client = GroupLogClient("memory", "g", log=self.log, clock=d.clock,
                                commit_objects=self.objects)  # fmt: skip
        version = self.log.version
        commit_batch_for_member(
            "memory", "g", d.member_id, assignment.generation, ends, batch_id=batch_id,
            client=client,
        )  # fmt: skip
        self.the_listener_appended_nothing(version)
        for tp, offset in ends.items():
            self.last_commit[(d.member_id, tp)] = offset

    @precondition(lambda self: self.dead and self.objects is not None)
    @rule(i=st.integers(0, 20), seq=st.integers(1_000, 2_000), listener=st.booleans())
    def zombie_commit_object(self, i: int, seq: int, listener: bool) -> None:
        """A crashed or replaced member's process (or its query's progress listener) writes one
        more commit object, with offsets for whatever it once knew (and a partition it never
        held): never applied."""
        assert self.objects is not None
        z = self.dead[i % len(self.dead)]
        parts = set(z.coord.member_view(z.member_id).assignment) | {TopicPartition("t", 0)}
        gen = z.coord.group.generation
        offsets = {tp: RecordedOffset(999, gen) for tp in parts}
        self.objects.put(
            CommitObject(z.member_id, seq, offsets, writer=LISTENER if listener else "")
        )

    @precondition(lambda self: self.dead)
    @rule(i=st.integers(0, 20), other=st.booleans())
    def zombie_commit(self, i: int, other: bool) -> None:
        z = self.dead[i % len(self.dead)]
        gen = z.coord.group.generation  # what it last knew
        known = set(z.coord.member_view(z.member_id).assignment)
        z.fold()
        parts = known or {TopicPartition("t", 0)}
        if other:
            parts = {TopicPartition("t", p) for p in range(4)}
        offsets = {tp: RecordedOffset(999, gen) for tp in parts}
        now = self.clock.now_ms()
        records, _ = commit_batch(z.coord.group, z.member_id, offsets, now, source=Source.MEMBER)
        if z.member_id not in z.coord.group.members:
            assert records == []
        assert append(self.log, records, z.version)

    @precondition(lambda self: self.dead)
    @rule(i=st.integers(0, 20))
    def zombie_listener_commit(self, i: int) -> None:
        """A late commit of what a dead member last knew, in its name and by the listener's
        rules (forward only), appended by a writer that is no member (a progress listener of
        a release that appended its commits): never applied."""
        z = self.dead[i % len(self.dead)]
        gen = z.coord.group.generation
        parts = set(z.coord.member_view(z.member_id).assignment) | {TopicPartition("t", 1)}
        z.fold()
        offsets = {tp: RecordedOffset(998, gen) for tp in parts}
        now = self.clock.now_ms()
        records, _ = commit_batch(z.coord.group, z.member_id, offsets, now, source=Source.LISTENER)
        if z.member_id not in z.coord.group.members:
            assert records == []
        assert append(self.log, records, z.version)

    @precondition(lambda self: self.live)
    @rule(i=st.integers(0, MAX_MEMBERS - 1), listener=st.booleans())
    def rewind(self, i: int, listener: bool) -> None:
        """A batch of the member started a partition below its committed offset (a reset by
        policy, ``failOnDataLoss=false``): committed by the member's ``commit()`` or by its
        progress listener (with the batch's start), it moves the committed offset back."""
        d = self.live[i % len(self.live)]
        holdings = d.member.holdings
        planned = sorted(holdings.held - holdings.revoking)
        if holdings.generation < 0 or not planned:
            return
        tp = planned[0]
        self.rewound += 1
        start, end = self.rewound, self.rewound + 1
        self.rewound += 1
        ends = {tp: end}
        batch_id = self.plan(d, ends, holdings.generation)
        if listener and self.objects is not None:
            client = GroupLogClient("memory", "g", log=self.log, clock=d.clock,
                                    commit_objects=self.objects)  # fmt: skip
            version = self.log.version
            commit_batch_for_member(
                "memory", "g", d.member_id, holdings.generation, ends, batch_id=batch_id,
                starts={tp: start}, client=client,
            )  # fmt: skip
            self.the_listener_appended_nothing(version)
        else:
            d.member.commit(ends, batch_generation=holdings.generation, batch_member=d.member_id)
        self.last_commit[(d.member_id, tp)] = end

    @precondition(lambda self: self.live and self.objects is not None)
    @rule(i=st.integers(0, MAX_MEMBERS - 1), k=st.integers(0, 50))
    def late_listener_commit(self, i: int, k: int) -> None:
        """A progress event that comes late (or a restarted driver's): the listener commits an
        older batch of the member again, under that batch's id (a batch id never names other
        offsets), planned maybe before a partition moved away and back since: applied only
        where held since its generation, and never moving back."""
        d = self.live[i % len(self.live)]
        batches = self.batches.get(d.member_id)
        if not batches:
            return
        generation, ends, batch_id = batches[k % len(batches)]
        client = GroupLogClient("memory", "g", log=self.log, clock=d.clock,
                                commit_objects=self.objects)  # fmt: skip
        version = self.log.version
        commit_batch_for_member(
            "memory", "g", d.member_id, generation, ends, batch_id=batch_id, client=client
        )
        self.the_listener_appended_nothing(version)

    @precondition(lambda self: self.live)
    @rule(i=st.integers(0, MAX_MEMBERS - 1), listener=st.booleans())
    def stale_batch_commit(self, i: int, listener: bool) -> None:
        """A commit of a batch planned before the member last (re)acquired a partition (a late
        progress event, or a ``commit()`` Spark calls for a batch of an earlier generation),
        reaching past the committed offset: never applied (the fence)."""
        d = self.live[i % len(self.live)]
        holdings = d.member.holdings
        again = sorted(tp for tp, since in holdings.held_since.items() if since > 0)
        if not again:
            return
        tp = again[0]
        generation = holdings.held_since[tp] - 1
        end = self.counter[tp] = self.counter.get(tp, MEMBER_COMMITS) + 1
        self.planned[(tp, end)] = generation
        if listener and self.objects is not None:
            batch_id = self.next_batch_id(d)
            client = GroupLogClient("memory", "g", log=self.log, clock=d.clock,
                                    commit_objects=self.objects)  # fmt: skip
            commit_batch_for_member(
                "memory", "g", d.member_id, generation, {tp: end}, batch_id=batch_id,
                client=client,
            )  # fmt: skip
        else:
            d.member.commit({tp: end}, batch_generation=generation, batch_member=d.member_id)

    @rule(i=st.integers(0, 3), offset=st.integers(0, 100))
    def admin_reset(self, i: int, offset: int) -> None:
        """An operator resets an offset: applied only while the group has no members."""
        coord = GroupCoordinator("g", self.config)
        coord.apply_all(self.log.records)
        work = coord.fork()
        tp = TopicPartition("t", i)
        records, response = reset(work.group, {tp: offset}, self.clock.now_ms())
        work.apply_all(records)
        if coord.group.state == S.EMPTY:
            assert response.accepted == {tp} and work.group.offsets[tp].offset == offset
        else:
            assert records == []
        assert append(self.log, records, self.log.version)

    @rule()
    def snapshot(self) -> None:
        coord = GroupCoordinator("g", self.config)
        coord.apply_all(self.log.records)
        assert append(self.log, [coord.snapshot_record(self.clock.now_ms())], self.log.version)

    @rule()
    def converge(self) -> None:
        for _ in range(120):
            self.clock.advance(700)
            if self.live:
                self.race()
            else:  # nobody left: any process reading the log may still write the expiries
                self.tick_only()
            g = replay(self.log.records[latest_snapshot_index(self.log.records) :], "g")
            silent = {d.member_id for d in self.dead} & set(g.members)
            # A live member expired while silent rejoins under a new member id first.
            everyone = set(g.members) == {d.member_id for d in self.live}
            if self.live and not silent and everyone and converged(self.live[0].coord, self.meta):
                break
            if not self.live and g.state == S.EMPTY:
                break
        g = replay(self.log.records, "g")
        if self.live:
            assert converged(self.live[0].coord, self.meta), g
            assert set(g.members) == {d.member_id for d in self.live}
        else:
            assert g.state == S.EMPTY

    # ------------------------------------------------------------------ invariants

    @invariant()
    def fold_checks_every_record(self) -> None:
        for r in self.log.records[self.checked :]:
            before = self.checker.state
            if r.kind == RecordKind.COMMIT and r.member_id is None:
                assert before == S.EMPTY, f"an operator's reset applied in {before}"
            if r.kind == RecordKind.COMMIT and r.member_id is not None:
                m = self.checker.members.get(r.member_id)
                assert m is not None, f"commit accepted from non-member {r.member_id}"
                assert r.generation == self.checker.generation
                assert r.topic is not None and r.partition is not None
                tp = TopicPartition(r.topic, r.partition)
                assert tp in m.held, f"commit of {tp} accepted from non-owner {r.member_id}"
                planned = self.planned.get((tp, r.offset)) if r.offset is not None else None
                if planned is not None:
                    # The fence: a batch's offset only from a member that held the partition
                    # without interruption since the batch was planned.
                    assert m.held_since[tp] <= planned, (tp, r.offset, m.held_since[tp], planned)
                current = self.checker.offsets.get(tp)
                if r.offset is not None and r.offset >= MEMBER_COMMITS and current is not None:
                    # Member commits only grow: a stale commit object never undoes a newer one.
                    assert current.offset < MEMBER_COMMITS or r.offset >= current.offset, (
                        tp, current, r.offset,
                    )  # fmt: skip
            if r.kind == RecordKind.REVOKE and r.member_id is not None:
                # A released partition's committed offset is its owner's last member commit.
                for t, p in RevokePayload.of(r).partitions:
                    tp = TopicPartition(t, p)
                    last = self.last_commit.get((r.member_id, tp))
                    if last is not None and r.member_id in {d.member_id for d in self.live}:
                        offset = self.checker.offsets.get(tp)
                        assert offset is not None and offset.offset == last, (tp, offset, last)
            since_before = {mid: dict(m.held_since) for mid, m in self.checker.members.items()}
            apply(self.checker, r)
            for mid, m in self.checker.members.items():
                # held_since: exactly the held partitions, kept while held without interruption,
                # and the current generation for a partition newly held.
                assert set(m.held_since) == m.held
                for tp, since in m.held_since.items():
                    previous = since_before.get(mid, {}).get(tp)
                    if r.kind == RecordKind.SNAPSHOT:
                        continue
                    if previous is not None:
                        assert since == previous, (mid, tp, previous, since)
                    elif r.kind == RecordKind.JOIN and JoinPayload.of(r).replaces:
                        old = since_before[str(JoinPayload.of(r).replaces)]
                        assert since == old[tp]  # a static member's new incarnation inherits
                    else:
                        assert since == self.checker.generation, (r.kind, mid, tp, since)
            after = self.checker.state
            if r.kind != RecordKind.SNAPSHOT and after != before:
                # one record may pass through PreparingRebalance (e.g. JOIN in Stable)
                assert before in LEGAL[after] or (
                    before in LEGAL[S.PREPARING_REBALANCE] and S.PREPARING_REBALANCE in LEGAL[after]
                ), f"{before} -> {after} on {r.kind}"
            assert self.checker.generation >= self.max_generation
            self.max_generation = self.checker.generation
            held = [tp for m in self.checker.members.values() for tp in m.held]
            assert len(held) == len(set(held)), "a partition has two owners"
        self.checked = len(self.log.records)

    @invariant()
    def replay_reproduces_the_live_state(self) -> None:
        records = self.log.records
        assert replay(records, "g") == self.checker
        start = latest_snapshot_index(records)
        assert replay(records[start:], "g") == self.checker
        for d in self.live:
            d.fold()
            assert d.coord.group == self.checker


GroupMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("GROUP_STATEFUL_EXAMPLES", "30")),
    stateful_step_count=int(os.environ.get("GROUP_STATEFUL_STEPS", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestGroupStateMachine = GroupMachine.TestCase


def test_a_late_listener_commit_neither_undoes_a_rewind_nor_moves_an_offset_back() -> None:
    """A sequence the machine found: the listener's late commit of the member's first batch
    (batch 0, after batch 2 rewound a partition) replaced the listener's object holding the
    rewind and, taken for a continuation of that rewind, moved the member's newer commit back
    once folded. In batch order it is older than that object: it writes nothing."""
    state = GroupMachine()

    def checked() -> None:
        state.fold_checks_every_record()
        state.replay_reproduces_the_live_state()

    state.setup(
        protocol="cooperative-sticky", delay=0, leases=False, releases="current",
        commit_objects=True,
    )  # fmt: skip
    checked()
    state.join(offset=0, pattern=False, static=False)
    checked()
    state.listener_commit(i=0)  # batch 0
    checked()
    state.member_commit(i=0)  # batch 1
    checked()
    state.rewind(i=0, listener=True)  # batch 2
    checked()
    state.join(offset=0, pattern=False, static=False)
    checked()
    state.late_listener_commit(i=0, k=0)  # batch 0 again
    checked()
    state.converge()
    checked()
    rewound = TopicPartition("t", 0)
    assert state.checker.offsets[rewound].offset == state.last_commit[("m1", rewound)]
    state.teardown()


@pytest.mark.parametrize("moves", ["join", "topic deleted"])
def test_a_late_commit_of_an_older_batch_does_not_stall_a_revocation(moves: str) -> None:
    """A sequence the machine found: after the progress listener committed the member's last
    batch, the member's own commit of an older position, decided without the end of its newest
    batch (which the member's step always passes), moved the offset back, and the revocation
    that followed waited forever for that batch's end. Decided as the step decides it, the
    older commit writes nothing there, and the partitions move."""
    state = GroupMachine()

    def checked() -> None:
        state.fold_checks_every_record()
        state.replay_reproduces_the_live_state()

    state.setup(
        protocol="cooperative-sticky", delay=0, leases=False, releases="current",
        commit_objects=True,
    )  # fmt: skip
    checked()
    state.join(offset=0, pattern=False, static=False)
    checked()
    state.listener_commit(i=0)
    checked()
    last = {tp: offset for (_, tp), offset in state.last_commit.items()}
    for _ in range(5):  # the leader folds the listener's object into the log
        state.clock.advance(COMMIT_FOLD_INTERVAL_MS)
        state.race()
        checked()
    assert {tp: state.checker.offsets[tp].offset for tp in last} == last
    state.commit(i=0)
    checked()
    assert {tp: state.checker.offsets[tp].offset for tp in last} == last
    if moves == "join":
        state.join(offset=0, pattern=False, static=False)
    else:
        state.change_metadata(count=0, topic="t")
    checked()
    state.converge()
    checked()
    state.teardown()
