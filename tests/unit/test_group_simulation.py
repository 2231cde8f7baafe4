"""3-5 production members drive the protocol over one shared in-memory log with
compare-and-swap and converge; and the discrete-event simulation of a larger group, at sizes
CI affords (``benchmarks/simulate_group.py`` prints the full-size report)."""

from __future__ import annotations

import random

import pytest

from spark_kafka_group.group import GroupConfig, GroupRecord, ManualClock, apply, replay
from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.group.payloads import SyncPayload
from spark_kafka_group.store.memory import InMemoryLeases, InMemoryLog
from spark_kafka_group.testing.simulated_group import Phase, simulate
from spark_kafka_group.testing.simulation import SimMember, append, converged


def run(drivers: list[SimMember], clock: ManualClock, rng: random.Random, rounds: int) -> None:
    for _ in range(rounds):
        order = list(drivers)
        rng.shuffle(order)
        for d in order:  # everyone decides on the same version, then they race to append
            d.prepare()
        rng.shuffle(order)
        for d in order:
            d.finish()
        clock.advance(rng.randint(50, 500))


def no_double_owner(drivers: list[SimMember]) -> None:
    g = drivers[0].coord.group
    seen: dict[TopicPartition, str] = {}
    for m in g.members.values():
        for tp in m.held:
            assert tp not in seen, f"{tp} held by {seen[tp]} and {m.member_id}"
            seen[tp] = m.member_id


@pytest.mark.parametrize("leases", [True, False], ids=["leases", "log-heartbeats"])
@pytest.mark.parametrize("protocol", ["cooperative-sticky", "range", "roundrobin", "sticky"])
@pytest.mark.parametrize("n", [3, 5])
def test_members_converge_join_crash_leave(protocol: str, n: int, leases: bool) -> None:
    rng = random.Random(n * 31 + len(protocol))
    clock = ManualClock(10_000)
    log = InMemoryLog()
    meta = {"t": 12, "u": 5}
    lease_store = InMemoryLeases() if leases else None

    def make(i: int) -> SimMember:
        return SimMember(
            f"m{i}", log, clock, lambda: meta, protocols=(protocol,), topics=("t", "u"),
            leases=lease_store,
        )  # fmt: skip

    drivers = [make(i) for i in range(n)]
    # Members start at different times and all race on the same log.
    live: list[SimMember] = []
    for d in drivers:
        live.append(d)
        run(live, clock, rng, 3)
        no_double_owner(live)
    run(live, clock, rng, 40)
    for d in live:
        d.fold()
        assert d.coord.group == live[0].coord.group
    assert converged(live[0].coord, meta)
    assert len(live[0].coord.group.members) == n
    counts = sorted(len(m.assignment) for m in live[0].coord.group.members.values())
    assert counts[-1] - counts[0] <= (1 if protocol != "range" else 2)

    # One member crashes (stops polling): it is expired and its partitions move.
    crashed = live.pop(rng.randrange(len(live)))
    for _ in range(60):
        run(live, clock, rng, 1)
        no_double_owner(live)
    assert crashed.member_id not in live[0].coord.group.members
    assert converged(live[0].coord, meta)

    # One member leaves gracefully.
    leaver = live.pop(0)
    leaver.fold()
    records, _ = leaver.coord.leave(leaver.member_id, clock.now_ms())
    assert append(log, records, leaver.version)
    run(live, clock, rng, 40)
    assert converged(live[0].coord, meta)
    assert len(live[0].coord.group.members) == n - 2

    # Partitions are added: the next metadata check (every 10 heartbeats) triggers a rebalance
    # that assigns them.
    meta["t"] = 16
    run(live, clock, rng, 150)
    assert converged(live[0].coord, meta)
    assert live[0].coord.group.assignment_snapshot == {"t": 16, "u": 5}

    # Everyone folds the same state, and the log replays to it (from scratch).
    for d in live:
        d.fold()
        assert d.coord.group == live[0].coord.group
    assert replay(log.records, "g") == live[0].coord.group
    assert log.conflicts > 0  # the members really raced


def test_cooperative_members_never_stop_unmoved_partitions() -> None:
    """A member joining a stable cooperative group: partitions that stay put are never
    revoked, moved ones are revoked in one generation and assigned in a later one."""
    clock = ManualClock(0)
    log = InMemoryLog()
    meta = {"t": 8}
    rng = random.Random(7)
    a = SimMember("a", log, clock, lambda: meta)
    b = SimMember("b", log, clock, lambda: meta)
    run([a, b], clock, rng, 20)
    assert converged(a.coord, meta)
    before = {mid: set(m.assignment) for mid, m in a.coord.group.members.items()}
    before_log = list(log.records)
    c = SimMember("c", log, clock, lambda: meta)
    live = [a, b, c]
    run(live, clock, rng, 40)
    g = a.coord.group
    assert converged(a.coord, meta)
    after = {mid: set(m.assignment) for mid, m in g.members.items()}
    moved = {tp for mid in ("a", "b") for tp in before[mid] - after[mid]}
    assert moved == set(after["c"]) and len(moved) in (2, 3)
    # Replay the log record by record: a partition is only ever revoked if it moves, and a
    # moved partition is held by at most one member at any time (revoked first, its
    # revocation ack, then assigned to c in a later generation).
    state = replay(before_log, "g")
    revoked: set[TopicPartition] = set()
    given_to_c: dict[TopicPartition, int] = {}
    revoked_at: dict[TopicPartition, int] = {}
    for r in log.records[len(before_log) :]:
        apply(state, r)
        if r.kind == RecordKind.SYNC:
            assert r.generation is not None
            sync = SyncPayload.of(r)
            for parts in sync.revoking.values():
                for tp in parts:
                    revoked.add(tp)
                    revoked_at.setdefault(tp, r.generation)
            for tp in sync.assignment.get("c", ()):
                given_to_c.setdefault(tp, r.generation)
        held = [tp for m in state.members.values() for tp in m.held]
        assert len(held) == len(set(held))
    assert revoked == moved
    assert all(given_to_c[tp] > revoked_at[tp] for tp in moved)


def test_static_members_restart_without_rebalance_in_the_loop() -> None:
    clock = ManualClock(0)
    log = InMemoryLog()
    meta = {"t": 6}
    rng = random.Random(3)
    cfg = GroupConfig(min_session_timeout_ms=1_000, initial_rebalance_delay_ms=0)
    ds = [
        SimMember(f"m{i}", log, clock, lambda: meta, instance_id=f"i{i}", config=cfg)
        for i in range(3)
    ]
    run(ds, clock, rng, 30)
    assert converged(ds[0].coord, meta)
    gen = ds[0].coord.group.generation
    follower = next(d for d in ds if not ds[0].coord.member_view(d.member_id).is_leader)
    old_assignment = ds[0].coord.group.members[follower.member_id].assignment
    restarted = SimMember(
        follower.member_id + "-2",
        log,
        clock,
        lambda: meta,
        instance_id=follower.instance_id,
        config=cfg,
    )
    live = [d for d in ds if d is not follower] + [restarted]
    run(live, clock, rng, 10)
    g = live[0].coord.group
    assert g.generation == gen
    assert g.members[restarted.member_id].assignment == old_assignment
    follower.step()
    assert follower.fenced


def test_shared_log_rejects_a_stale_append() -> None:
    log = InMemoryLog()
    assert append(log, [GroupRecord(RecordKind.HEARTBEAT.value, 1)], -1)
    assert not append(log, [GroupRecord(RecordKind.HEARTBEAT.value, 2)], -1)
    assert log.conflicts == 1 and log.version == 0


def test_a_member_alone_becomes_stable_with_every_partition() -> None:
    clock = ManualClock(1_000)
    log = InMemoryLog()
    meta = {"t": 4}
    d = SimMember("m1", log, clock, lambda: meta, leases=InMemoryLeases())
    for _ in range(5):
        d.step()
        clock.advance(100)
    assert converged(d.coord, meta)
    assert replay(log.records, "g") == d.coord.group


@pytest.mark.parametrize("append_ms", [10, 100])
def test_simulated_group_converges_and_stays_alive_on_leases(append_ms: int) -> None:
    """32 members, 128 partitions: they converge, a steady minute writes nothing and expires
    nobody, and one more member moves only what it takes (unmoved partitions never pause),
    at a cost in writes that does not grow with the group."""
    result = simulate(members=32, partitions=128, append_ms=append_ms, steady_ms=60_000)
    join, steady, scale_out = (result.phase(n) for n in ("join", "steady", "scale-out"))
    assert join.settled_s is not None and join.false_expiries == 0
    assert steady.writes == 0 and steady.false_expiries == 0
    assert scale_out.settled_s is not None and scale_out.false_expiries == 0
    assert scale_out.moved == 128 // 33 and scale_out.unmoved == 128 - scale_out.moved
    assert scale_out.unmoved_pause_max_s == 0
    # Members with nothing new to say do not rejoin: the rebalance costs writes in what moves
    # (the join, two assignments, one ack per member that gives a partition up), not one
    # write per member (67-68 with every member rejoining).
    assert scale_out.writes <= scale_out.moved + 4, scale_out.writes


def test_simulation_shows_log_heartbeats_break_on_a_slow_store() -> None:
    """The design before leases: every heartbeat a compare-and-swap write. On a 100 ms store
    64 members cannot stay alive: members that are alive get expired."""
    result = simulate(
        members=64,
        partitions=256,
        append_ms=100,
        leases=False,
        implicit_rejoin=False,
        initial_delay_ms=0,
        converge_limit_ms=120_000,
    )
    join = result.phase("join")
    assert join.false_expiries > 0 and join.settled_s is None


def test_a_dead_leader_that_rejoined_implicitly_is_expired_by_its_session_timeout() -> None:
    """A cooperative group's members count as rejoined at a rebalance, the dead too: a
    crashed leader must then be expired by its lease's session timeout (30 s), not hold the
    rebalance until its rebalance timeout (60 s) runs out as an unsynced leader."""
    clock = ManualClock(1_000)
    log = InMemoryLog()
    leases = InMemoryLeases()
    meta = {"t": 4}

    def member(name: str) -> SimMember:
        return SimMember(
            name, log, clock, lambda: meta, session_timeout_ms=30_000,
            rebalance_timeout_ms=60_000, heartbeat_interval_ms=500, leases=leases,
        )  # fmt: skip

    victim = member("victim")
    for _ in range(20):
        victim.step()
        clock.advance(100)
    assert converged(victim.coord, meta)
    crashed_at = clock.now_ms()  # the victim never steps again
    newcomer = member("newcomer")
    while not converged(newcomer.coord, meta) and clock.now_ms() < crashed_at + 120_000:
        newcomer.step()
        clock.advance(100)
    assert converged(newcomer.coord, meta)
    assert set(newcomer.coord.group.members) == {"newcomer"}
    assert clock.now_ms() - crashed_at < 35_000


def _steady_commits(
    members: int, *, commit_objects: bool, listener_commits: str | None = None
) -> Phase:
    result = simulate(
        members=members,
        partitions=64,
        append_ms=10,
        steady_ms=20_000,
        commit_every_ms=1_000,
        commit_objects=commit_objects,
        listener_commits=listener_commits,
    )
    return result.phase("steady")


def test_commits_cost_the_log_the_same_whatever_the_group_size() -> None:
    """Members committing every second: with commit objects folded once per interval, the log
    takes about one write a second at 8 members and at 32, no write loses a race, and every
    commit is in the log within a few fold intervals. (Every commit an append to the log:
    writes grow with the group: 8/s at 8 members, 31/s at 32, losing 630 races.)"""
    small, large = (_steady_commits(n, commit_objects=True) for n in (8, 32))
    for phase in (small, large):
        assert phase.writes_per_s <= 1.5, phase.writes_per_s
        assert phase.conflicts == 0 and phase.false_expiries == 0
        assert phase.commits > 0 and len(phase.commit_lags_s) >= 0.9 * phase.commits
        p99 = phase.commit_lag_s(0.99)
        assert p99 is not None and p99 <= 2.0, p99
    assert large.writes_per_s <= 1.2 * small.writes_per_s


def test_the_progress_listeners_commits_cost_the_log_the_same_whatever_the_group_size() -> None:
    """Each member's query also has a progress listener committing every completed batch: in
    the listener's own commit object, the log still takes about one write a second at 8
    members and at 32, and no write loses a race. (The listener appending each batch:
    writes grow with the group, and lose races.)"""
    small, large = (
        _steady_commits(n, commit_objects=True, listener_commits="objects") for n in (8, 32)
    )
    for phase in (small, large):
        assert phase.writes_per_s <= 1.5, phase.writes_per_s
        assert phase.conflicts == 0 and phase.false_expiries == 0
        assert phase.commits > 0 and len(phase.commit_lags_s) >= 0.9 * phase.commits
        p99 = phase.commit_lag_s(0.99)
        assert p99 is not None and p99 <= 2.0, p99
    assert large.writes_per_s <= 1.2 * small.writes_per_s


def _commit_writers(listener_commits: str) -> dict[str, set[str]]:
    result = simulate(
        members=4,
        partitions=16,
        append_ms=10,
        steady_ms=10_000,
        commit_every_ms=1_000,
        commit_objects=True,
        listener_commits=listener_commits,
    )
    assert result.phase("steady").commits > 0
    return result.commit_writers


def test_the_log_has_one_commit_writer_per_member() -> None:
    """Members commit every second and each one's query's progress listener commits every
    completed batch too: every COMMIT record in a member's name comes from that member's
    writer, the fold of its commit objects (the member's and its listener's) or its own
    step's direct write, never from its listener or another member. (The listener appending
    each batch itself, the alternative design, is a second writer, seen here.)"""
    writers = _commit_writers("objects")
    assert len(writers) >= 4, writers
    for member_id, by in writers.items():
        assert by <= {"fold", member_id}, (member_id, by)
    appended = _commit_writers("log")
    assert any(f"listener of {m}" in by for m, by in appended.items()), appended
