"""A deterministic discrete-event simulation of a whole group of production members
(:class:`~spark_kafka_group.testing.simulation.SimMember`) whose every write takes a simulated
store latency, to measure how the group log scales with members, partitions and latency.
"""

from __future__ import annotations

import heapq
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from spark_kafka_group.group import (
    GroupConfig,
    GroupCoordinator,
    GroupRecord,
    GroupState,
    ManualClock,
    RecordKind,
    TopicPartition,
)
from spark_kafka_group.group.metadata import IMPLICIT_REJOIN, LEASES
from spark_kafka_group.group.offsets import Source, commit_batch
from spark_kafka_group.group.payloads import CommitPayload
from spark_kafka_group.group.types import RecordedOffset
from spark_kafka_group.listener.writes import commit_batch_for_member
from spark_kafka_group.member import GroupLogClient
from spark_kafka_group.store.commit_objects import InMemoryCommitObjects
from spark_kafka_group.store.memory import InMemoryLeases, InMemoryLog
from spark_kafka_group.testing.simulation import (
    SimMember,
    converged,
)


@dataclass
class Phase:
    """What one phase of a simulated run measured."""

    name: str
    #: Simulated seconds from the phase's trigger to a settled assignment (None: never).
    settled_s: float | None = None
    duration_s: float = 0.0
    writes: int = 0
    conflicts: int = 0
    log_reads: int = 0
    lease_reads: int = 0
    false_expiries: int = 0
    #: Seconds from a member's commit() to its offset in the log, for every commit that
    #: became durable during the phase; and commits accepted by no one (superseded ones
    #: count as durable with the newer one).
    commit_lags_s: list[float] = field(default_factory=list)
    commits: int = 0
    #: Partitions whose owner did not change, and the longest time one of them had no
    #: owner allowed to read it (in the log's view; members see it one read later).
    unmoved: int = 0
    unmoved_pause_max_s: float = 0.0
    moved: int = 0

    @property
    def writes_per_s(self) -> float:
        return self.writes / self.duration_s if self.duration_s else 0.0

    @property
    def conflicts_per_write(self) -> float:
        return self.conflicts / self.writes if self.writes else 0.0

    def commit_lag_s(self, q: float) -> float | None:
        """The ``q`` quantile of commit-to-durable seconds (None: no commit became durable)."""
        lags = sorted(self.commit_lags_s)
        if not lags:
            return None
        return lags[min(len(lags) - 1, int(q * len(lags)))]


@dataclass
class SimResult:
    members: int
    partitions: int
    append_ms: int
    leases: bool
    implicit_rejoin: bool
    initial_delay_ms: int
    strategy: str
    commit_every_ms: int | None = None
    commit_objects: bool = False
    listener_commits: str | None = None
    phases: list[Phase] = field(default_factory=list)
    wall_s: float = 0.0
    #: Who wrote the COMMIT records of each member (by the member's id): ``"fold"`` for a
    #: record folded from one of its commit objects (whoever appended it), else the id of
    #: the appender (a member's step: its member id; a progress listener: ``"listener of
    #: <member id>"``).
    commit_writers: dict[str, set[str]] = field(default_factory=dict)

    def phase(self, name: str) -> Phase:
        return next(p for p in self.phases if p.name == name)


class _Simulation:
    def __init__(
        self,
        *,
        members: int,
        partitions: int,
        append_ms: int,
        read_ms: int,
        leases: bool,
        implicit_rejoin: bool,
        strategy: str,
        start_spread_ms: int,
        heartbeat_interval_ms: int,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        initial_delay_ms: int,
        seed: int,
        clock_offsets_ms: int = 0,
        commit_every_ms: int | None = None,
        commit_objects: bool = False,
        listener_commits: str | None = None,
    ) -> None:
        self.rng = random.Random(seed)
        self.clock = ManualClock(0)
        self.log = InMemoryLog()
        self.leases = InMemoryLeases() if leases else None
        # A put becomes visible to a listing one store latency after it was issued.
        self.objects = (
            InMemoryCommitObjects(now_ms=self.clock.now_ms, latency_ms=append_ms)
            if commit_objects
            else None
        )
        self.commit_every_ms = commit_every_ms
        if listener_commits not in (None, "log", "objects"):
            raise ValueError(f"listener_commits={listener_commits!r}: use None, 'log' or 'objects'")
        self.listener_commits = listener_commits
        # Per member: its query's progress listener (a client of the log in the driver), and
        # the id of the member's next batch.
        self.listeners: dict[str, GroupLogClient] = {}
        self.commit_writers: dict[str, set[str]] = {}
        self.batch_ids: dict[str, int] = {}
        # Per member: the step chain's token (a wake starts a new chain, the old one ends)
        # and whether an append is in flight.
        self.token: dict[str, int] = {}
        self.busy: dict[str, bool] = {}
        self.woken: dict[str, bool] = {}
        # Commits not yet in the log: partition -> [(offset, committed at ms)].
        self.next_offset: dict[TopicPartition, int] = {}
        self.awaiting: dict[TopicPartition, list[tuple[int, int]]] = {}
        self.commit_lags_ms: list[int] = []
        self.commits = 0
        self.meta = {"t": partitions}
        self.append_ms, self.read_ms = append_ms, read_ms
        self.events: list[tuple[int, int, Callable[[], None]]] = []
        self.seq = 0
        self.alive: dict[str, SimMember] = {}
        self.monitor = GroupCoordinator("g", GroupConfig())
        self.monitor_version = -1
        self.expired_alive = 0
        self.start_spread_ms = start_spread_ms
        self.n = 0

        def make() -> SimMember:
            self.n += 1
            return SimMember(
                f"m{self.n:04d}",
                self.log,
                self.clock,
                lambda: self.meta,
                protocols=(strategy,),
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms,
                heartbeat_interval_ms=heartbeat_interval_ms,
                leases=self.leases,
                commit_objects=self.objects,
                config=GroupConfig(initial_rebalance_delay_ms=initial_delay_ms),
                features=tuple(
                    f for f, on in ((LEASES, leases), (IMPLICIT_REJOIN, implicit_rejoin)) if on
                ),
                random_seed=seed * 100_003 + self.n,
                clock_offset_ms=self.rng.randint(-clock_offsets_ms, clock_offsets_ms),
            )

        self.make = make
        self.initial = members

    # events
    def at(self, t: int, fn: Callable[[], None]) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, fn))

    def run_until(self, t_end: int, done: Callable[[], bool] | None = None) -> bool:
        while self.events and self.events[0][0] <= t_end:
            t, _, fn = heapq.heappop(self.events)
            self.clock.set(max(t, self.clock.now_ms()))
            fn()
            if done is not None and done():
                return True
        self.clock.set(max(t_end, self.clock.now_ms()))
        return False

    def start(self, m: SimMember, t: int) -> None:
        key = m.member_id

        def begin() -> None:
            if self.alive.get(m.member.member_id) is not m and m.member.member_id not in self.alive:
                return
            m.member.refresh_metadata()
            self.step(m, 0)

        def wake() -> None:  # a commit was recorded: the background step runs now
            if self.busy.get(key):
                self.woken[key] = True
            else:
                self.schedule(m, self.clock.now_ms(), 0)

        m.member.loop.wake = wake
        self.alive[m.member_id] = m
        self.at(t, begin)
        if self.commit_every_ms:
            self.at(t + self.rng.randint(0, self.commit_every_ms), lambda: self.commit(m))

    def schedule(self, m: SimMember, t: int, lost: int) -> None:
        """The member's next step at ``t``; any step scheduled before is void."""
        key = m.member_id
        token = self.token[key] = self.token.get(key, 0) + 1
        self.at(t, lambda: self.step(m, lost) if self.token[key] == token else None)

    def commit(self, m: SimMember) -> None:
        """The member's query completed a batch: it reads a little of each partition it may
        plan and commits (and releases what it is revoking), as the reader does."""
        if m.member.failure is not None or m not in self.alive.values():
            return
        assert self.commit_every_ms is not None
        self.at(self.clock.now_ms() + self.commit_every_ms, lambda: self.commit(m))
        assignment = m.member.holdings
        plannable = assignment.held - assignment.revoking
        if assignment.generation < 0 or not assignment.held:
            return
        now = self.clock.now_ms()
        ends = {}
        for tp in sorted(plannable):
            ends[tp] = self.next_offset[tp] = self.next_offset.get(tp, 0) + 1
            self.awaiting.setdefault(tp, []).append((ends[tp], now))
            self.commits += 1
        m.member.begin_batch(ends, batch_generation=assignment.generation)
        # Written by the member's background step, which commit() wakes (it writes nothing).
        m.member.commit(
            ends,
            batch_generation=assignment.generation,
            batch_member=m.member_id,
            release=assignment.revoking,
        )
        if self.listener_commits is not None:
            self.listener_commit(m, ends, assignment.generation)

    def listener_commit(self, m: SimMember, ends: dict[TopicPartition, int], gen: int) -> None:
        """The query's progress listener commits the completed batch on the member's behalf:
        in its own commit object (``objects``), or as a compare-and-swap append that races
        every other writer (``log``, a read and an append of store latency, retried after a
        backoff when it loses)."""
        client = self.listeners.get(m.member_id)
        if client is None:
            client = self.listeners[m.member_id] = GroupLogClient(
                "memory://", "g", log=self.log, commit_objects=self.objects, clock=m.clock,
                random_seed=self.rng.randint(0, 2**31),
            )  # fmt: skip
        batch_id = self.batch_ids[m.member_id] = self.batch_ids.get(m.member_id, -1) + 1
        if self.listener_commits == "objects":
            commit_batch_for_member(
                "memory://", "g", m.member_id, gen, ends, batch_id=batch_id, client=client
            )
            return
        recorded = {tp: RecordedOffset(offset, gen) for tp, offset in ends.items()}

        def decide(work: GroupCoordinator, now: int) -> tuple[list[GroupRecord], None]:
            # The alternative design: the listener's own compare-and-swap append of its commit.
            group, member = work.group, m.member_id
            records, _ = commit_batch(group, member, recorded, now, source=Source.LISTENER)
            return records, None

        def attempt(lost: int) -> None:
            tried = client.prepare(decide)
            if not tried.records:
                return

            def end() -> None:
                if client.complete(tried):
                    self.wrote(f"listener of {m.member_id}", tried.records)
                    self.observe()
                    return
                wait_ms = int(client.backoff_s(lost + 1, append_s=self.append_ms / 1000) * 1000)
                self.at(self.clock.now_ms() + wait_ms, lambda: attempt(lost + 1))

            self.at(self.clock.now_ms() + self.read_ms + self.append_ms, end)

        attempt(0)

    def step(self, m: SimMember, lost: int) -> None:
        if m.member.failure is not None or m not in self.alive.values():
            return
        key = m.member_id
        objects = self.objects
        listed = objects.lists + objects.gets if objects is not None else 0
        attempt = m.member.loop.begin_step(commit_objects=True)
        now = self.clock.now_ms()
        self.observe()  # what the step's fold or object put changed
        # Listing the commit objects and reading them (in parallel) costs a store round
        # trip each before the append can start.
        if objects is not None and objects.lists + objects.gets != listed:
            now += 2 * self.read_ms
        if not attempt.records:
            self.schedule(m, now + self.delay_ms(m), 0)
            return

        def end() -> None:
            self.busy[key] = False
            if m not in self.alive.values():
                return
            if m.member.loop.end_step(attempt):
                self.wrote(m.member_id, attempt.records)
                self.observe()
                woken, self.woken[key] = self.woken.get(key, False), False
                delay = 0 if woken else self.delay_ms(m)
                self.schedule(m, self.clock.now_ms() + delay, 0)
            else:
                wait = m.member.client.backoff_s(lost + 1, append_s=self.append_ms / 1000)
                self.schedule(m, self.clock.now_ms() + int(wait * 1000), lost + 1)

        self.busy[key] = True
        self.token[key] = self.token.get(key, 0) + 1  # no other step until this one ends
        self.at(now + self.read_ms + self.append_ms, end)

    def wrote(self, appender: str, records: list[GroupRecord]) -> None:
        """``appender`` appended ``records``: note who wrote each COMMIT."""
        for r in records:
            if r.kind == RecordKind.COMMIT and r.member_id is not None:
                folded = CommitPayload.from_dict(r.payload).folded_from is not None
                writers = self.commit_writers.setdefault(r.member_id, set())
                writers.add("fold" if folded else appender)

    def delay_ms(self, m: SimMember) -> int:
        # A small jitter, as threads started at different times do not step in lockstep.
        return max(1, int(m.member.loop.next_step_delay_s() * 1000 * self.rng.uniform(0.9, 1.1)))

    def observe(self) -> None:
        """Fold new versions into the monitor; count expiries of members that are alive."""
        if self.log.version == self.monitor_version:
            return
        piece = self.log.read_slice(after_version=self.monitor_version)
        self.log.reads -= 1  # the monitor is not a member
        now = self.clock.now_ms()
        moved = False
        for _, r in piece.records:
            moved = moved or r.kind not in (RecordKind.COMMIT, RecordKind.HEARTBEAT)
            if r.kind == RecordKind.EXPIRE and r.member_id in self.alive:
                self.expired_alive += 1
            if r.kind == RecordKind.COMMIT and r.topic is not None and r.offset is not None:
                tp = TopicPartition(r.topic, int(r.partition or 0))
                waiting = self.awaiting.get(tp, [])
                while waiting and waiting[0][0] <= r.offset:
                    self.commit_lags_ms.append(now - waiting.pop(0)[1])
            self.monitor.apply(r)
        self.monitor_version = piece.version
        if moved and self.awaiting:
            self.forget_moved()

    def settled(self) -> bool:
        g = self.monitor.group
        if g.state != GroupState.STABLE or set(g.members) != set(self.alive):
            return False
        return converged(self.monitor, self.meta)

    def plannable(self) -> dict[TopicPartition, str]:
        return {
            tp: mid
            for mid, m in self.monitor.group.members.items()
            for tp in m.assignment - m.revoking
        }

    def forget_moved(self) -> None:
        """Commits of a partition its member lost before they landed are never durable: they
        are not counted (their batch is read again by the new owner)."""
        owners = {tp for m in self.monitor.group.members.values() for tp in m.held}
        for tp in list(self.awaiting):
            if tp not in owners:
                self.awaiting[tp] = []

    def counters(self) -> tuple[int, int, int, int]:
        lease_reads = self.leases.reads if self.leases else 0
        return self.log.appends, self.log.conflicts, self.log.reads, lease_reads

    def measure(
        self,
        name: str,
        trigger: Callable[[], None],
        *,
        limit_ms: int,
        until_settled: bool = True,
        track_pause: bool = False,
    ) -> Phase:
        phase = Phase(name)
        t0 = self.clock.now_ms()
        c0 = self.counters()
        expired0 = self.expired_alive
        lags0, commits0 = len(self.commit_lags_ms), self.commits
        before = self.plannable() if track_pause else {}
        paused_since: dict[TopicPartition, int] = {}
        longest: dict[TopicPartition, int] = {}
        if track_pause:
            original_observe = self.observe

            def observe_with_pauses() -> None:
                original_observe()
                now = self.clock.now_ms()
                owners = self.plannable()
                for tp in before:
                    if tp not in owners:
                        paused_since.setdefault(tp, now)
                    elif tp in paused_since:
                        longest[tp] = max(longest.get(tp, 0), now - paused_since.pop(tp))

            self.observe = observe_with_pauses  # type: ignore[method-assign]
        trigger()
        if until_settled:
            ok = self.run_until(t0 + limit_ms, self.settled)
            phase.settled_s = (self.clock.now_ms() - t0) / 1000 if ok else None
        else:
            self.run_until(t0 + limit_ms)
        if track_pause:
            self.observe = original_observe  # type: ignore[method-assign]
            after = self.plannable()
            unmoved = [tp for tp, mid in before.items() if after.get(tp) == mid]
            phase.unmoved = len(unmoved)
            phase.moved = sum(1 for tp, mid in before.items() if after.get(tp) != mid)
            phase.unmoved_pause_max_s = (
                max((longest.get(tp, 0) for tp in unmoved), default=0) / 1000
            )
        c1 = self.counters()
        phase.duration_s = (self.clock.now_ms() - t0) / 1000
        phase.writes, phase.conflicts, phase.log_reads, phase.lease_reads = (
            b - a for a, b in zip(c0, c1, strict=True)
        )
        phase.false_expiries = self.expired_alive - expired0
        phase.commit_lags_s = [ms / 1000 for ms in self.commit_lags_ms[lags0:]]
        phase.commits = self.commits - commits0
        return phase


def simulate(
    *,
    members: int,
    partitions: int,
    append_ms: int,
    read_ms: int | None = None,
    leases: bool = True,
    implicit_rejoin: bool = True,
    strategy: str = "cooperative-sticky",
    start_spread_ms: int = 5_000,
    steady_ms: int = 60_000,
    heartbeat_interval_ms: int = 3_000,
    session_timeout_ms: int = 45_000,
    rebalance_timeout_ms: int = 60_000,
    initial_delay_ms: int = 3_000,
    converge_limit_ms: int = 900_000,
    seed: int = 0,
    clock_offsets_ms: int = 0,
    commit_every_ms: int | None = None,
    commit_objects: bool = False,
    listener_commits: str | None = None,
) -> SimResult:
    """Run a group through three phases on simulated time and measure each:

    - ``join``: ``members`` members start within ``start_spread_ms`` on an empty group log,
      until the assignment is settled;
    - ``steady``: ``steady_ms`` of nothing happening (what staying alive costs);
    - ``scale-out``: one more member joins a settled group (what a rebalance costs, and how
      long partitions that do not move are paused).

    ``leases=False, implicit_rejoin=False, initial_delay_ms=0`` is the classic protocol as the
    group log ran it before (every heartbeat a write, every member rejoins every rebalance).
    Every append takes ``read_ms`` + ``append_ms`` of simulated time (a fold, then a
    conditional write), and lands only if no other append landed meanwhile. Each member's
    wall clock is off by a random amount up to ``clock_offsets_ms`` either way.

    ``commit_every_ms``: every member that holds partitions commits this often (a query's
    completed batch), through the member's ``commit`` and its background step, as the
    reader does; each phase measures commit-to-durable seconds. ``commit_objects``: members
    record commits in commit objects (a put is visible a store latency later; the folder pays
    a listing and a parallel read of the objects), else every commit is an append.
    ``listener_commits``: each member's query also has a progress listener that commits every
    completed batch on the member's behalf, as a Spark query registered with
    ``spark_kafka_group.register`` does: ``"log"``, an append per batch by the listener
    itself (the alternative design, measured here only); ``"objects"``, in the listener's own
    commit object (``commit_batch_for_member``); None, no listener (a member without Spark).
    """
    wall = time.monotonic()
    sim = _Simulation(
        members=members,
        partitions=partitions,
        append_ms=append_ms,
        read_ms=append_ms // 2 if read_ms is None else read_ms,
        leases=leases,
        implicit_rejoin=implicit_rejoin,
        strategy=strategy,
        start_spread_ms=start_spread_ms,
        heartbeat_interval_ms=heartbeat_interval_ms,
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms,
        initial_delay_ms=initial_delay_ms,
        seed=seed,
        clock_offsets_ms=clock_offsets_ms,
        commit_every_ms=commit_every_ms,
        commit_objects=commit_objects,
        listener_commits=listener_commits,
    )
    result = SimResult(
        members,
        partitions,
        append_ms,
        leases,
        implicit_rejoin,
        initial_delay_ms,
        strategy,
        commit_every_ms=commit_every_ms,
        commit_objects=commit_objects,
        listener_commits=listener_commits,
    )

    starts = [sim.rng.randint(0, start_spread_ms) for _ in range(members)]

    def start_all() -> None:
        for t in starts:
            sim.start(sim.make(), t)

    join = sim.measure("join", start_all, limit_ms=converge_limit_ms)
    # "From all members joining": the clock starts when the last member has started.
    if join.settled_s is not None:
        join.settled_s = max(0.0, join.settled_s - max(starts) / 1000)
    result.phases.append(join)
    if join.settled_s is not None:
        result.phases.append(
            sim.measure("steady", lambda: None, limit_ms=steady_ms, until_settled=False)
        )
        result.phases.append(
            sim.measure(
                "scale-out",
                lambda: sim.start(sim.make(), sim.clock.now_ms()),
                limit_ms=converge_limit_ms,
                track_pause=True,
            )
        )
    result.wall_s = time.monotonic() - wall
    result.commit_writers = sim.commit_writers
    return result
