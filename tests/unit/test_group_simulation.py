"""3-5 members drive the protocol over one shared log with compare-and-swap and converge."""

from __future__ import annotations

import random

import pytest

from spark_kafka_group.group import GroupConfig, ManualClock, apply, replay
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.group.payloads import SyncPayload
from tests.unit.test_group_support import Driver, SharedLog, converged


def run(drivers: list[Driver], clock: ManualClock, rng: random.Random, rounds: int) -> None:
    for _ in range(rounds):
        order = list(drivers)
        rng.shuffle(order)
        for d in order:  # everyone decides on the same version, then they race to append
            d.prepare()
        rng.shuffle(order)
        for d in order:
            d.finish()
        clock.advance(rng.randint(50, 500))


def no_double_owner(drivers: list[Driver]) -> None:
    g = drivers[0].coord.group
    seen: dict[TopicPartition, str] = {}
    for m in g.members.values():
        for tp in m.held:
            assert tp not in seen, f"{tp} held by {seen[tp]} and {m.member_id}"
            seen[tp] = m.member_id


@pytest.mark.parametrize("protocol", ["cooperative-sticky", "range", "roundrobin", "sticky"])
@pytest.mark.parametrize("n", [3, 5])
def test_members_converge_join_crash_leave(protocol: str, n: int) -> None:
    rng = random.Random(n * 31 + len(protocol))
    clock = ManualClock(10_000)
    log = SharedLog()
    meta = {"t": 12, "u": 5}

    def make(i: int) -> Driver:
        return Driver(f"m{i}", log, clock, lambda: meta, protocols=(protocol,), topics=("t", "u"))

    drivers = [make(i) for i in range(n)]
    # Members start at different times and all race on the same log.
    live: list[Driver] = []
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
    assert log.append(records, leaver.version)
    run(live, clock, rng, 40)
    assert converged(live[0].coord, meta)
    assert len(live[0].coord.group.members) == n - 2

    # Partitions are added: the next metadata check triggers a rebalance that assigns them.
    meta["t"] = 16
    run(live, clock, rng, 40)
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
    log = SharedLog()
    meta = {"t": 8}
    rng = random.Random(7)
    a = Driver("a", log, clock, lambda: meta)
    b = Driver("b", log, clock, lambda: meta)
    run([a, b], clock, rng, 20)
    assert converged(a.coord, meta)
    before = {mid: set(m.assignment) for mid, m in a.coord.group.members.items()}
    before_log = list(log.records)
    c = Driver("c", log, clock, lambda: meta)
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
        if r.kind == "SYNC":
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
    log = SharedLog()
    meta = {"t": 6}
    rng = random.Random(3)
    cfg = GroupConfig(min_session_timeout_ms=1_000)
    ds = [
        Driver(f"m{i}", log, clock, lambda: meta, instance_id=f"i{i}", config=cfg) for i in range(3)
    ]
    run(ds, clock, rng, 30)
    assert converged(ds[0].coord, meta)
    gen = ds[0].coord.group.generation
    follower = next(d for d in ds if not ds[0].coord.member_view(d.member_id).is_leader)
    old_assignment = ds[0].coord.group.members[follower.member_id].assignment
    restarted = Driver(
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
