"""No decision compares two machines' clocks.

Members on machines whose wall clocks disagree by minutes or hours share one group: nobody
alive is expired, the group settles and stays fair, a dead member's partitions move within
its session timeout and two heartbeat intervals on the survivors' own clocks, and the
rebalance, initial-delay and scheduled-delay windows run on the clock of whoever acts on
them, from when it saw the record that opened them. Production members
(:class:`spark_kafka_group.testing.simulation.SimMember`) over the in-memory log and leases,
each with its own clock (:class:`spark_kafka_group.testing.simulation.OffsetClock`).
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from spark_kafka_group.group import (
    GroupConfig,
    GroupCoordinator,
    GroupState,
    JoinRequest,
    ManualClock,
    RecordKind,
    replay,
)
from spark_kafka_group.group.clocks import Watch
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.group.offsets import commit_offsets
from spark_kafka_group.store.memory import InMemoryLeases, InMemoryLog
from spark_kafka_group.testing.simulated_group import simulate
from spark_kafka_group.testing.simulation import SimMember, converged

HOUR = 3600_000
PARTITIONS = 12
NO_DELAY = GroupConfig(initial_rebalance_delay_ms=0)
SKEWS = {"behind": -120_000, "ahead": 120_000, "an-hour-ahead": HOUR}


class Machines:
    """Members on machines with their own clocks, each stepping every time its own timer says
    (its heartbeat thread), over one log; simulated time advances in 50 ms ticks."""

    def __init__(self, offsets: dict[str, int], *, heartbeat_ms: int, session_ms: int) -> None:
        self.clock = ManualClock(1_700_000_000_000)
        self.log = InMemoryLog()
        self.leases = InMemoryLeases()
        self.meta = {"t": PARTITIONS}
        self.rng = random.Random(7)
        self.members = {
            name: self.member(name, offset, heartbeat_ms, session_ms)
            for name, offset in offsets.items()
        }
        self.alive = set(offsets)
        self.next_step = {name: self.clock.now_ms() for name in offsets}

    def member(self, name: str, offset: int, heartbeat_ms: int, session_ms: int) -> SimMember:
        return SimMember(
            name, self.log, self.clock, lambda: self.meta, leases=self.leases,
            session_timeout_ms=session_ms, rebalance_timeout_ms=2 * session_ms,
            heartbeat_interval_ms=heartbeat_ms, clock_offset_ms=offset,
            config=GroupConfig(initial_rebalance_delay_ms=3_000),
        )  # fmt: skip

    def run(self, ms: int, until=None) -> bool:
        end = self.clock.now_ms() + ms
        while self.clock.now_ms() < end:
            for name in sorted(self.alive, key=lambda _: self.rng.random()):
                if self.next_step[name] <= self.clock.now_ms():
                    m = self.members[name]
                    m.step()
                    delay_ms = int(m.member.loop.next_step_delay_s() * 1000)
                    self.next_step[name] = self.clock.now_ms() + max(1, delay_ms)
            if until is not None and until():
                return True
            self.clock.advance(50)
        return False

    def expires(self) -> list[str]:
        return [str(r.member_id) for r in self.log.records if r.kind == RecordKind.EXPIRE]

    def holders(self) -> dict[str, int]:
        group = replay(self.log.records, "g")
        return dict(Counter(mid for mid, m in group.members.items() for _ in m.assignment))

    def held_by_alive(self) -> bool:
        group = replay(self.log.records, "g")
        return set(group.members) == self.alive and converged_group(self, group)


def converged_group(machines: Machines, group) -> bool:
    some = machines.members[next(iter(machines.alive))]
    some.fold()
    return some.coord.group == group and converged(some.coord, machines.meta)


@pytest.mark.parametrize("skew", list(SKEWS), ids=list(SKEWS))
def test_a_member_whose_clock_is_off_is_never_expired_and_gets_its_share(skew: str) -> None:
    """Default timeouts (heartbeat 3 s, session 45 s), five minutes."""
    machines = Machines(
        {"m1": 0, "m2": 0, "skewed": SKEWS[skew]}, heartbeat_ms=3_000, session_ms=45_000
    )
    assert machines.run(60_000, until=machines.held_by_alive)
    machines.run(5 * 60_000)
    assert machines.expires() == []
    assert machines.holders() == {"m1": 4, "m2": 4, "skewed": 4}
    assert replay(machines.log.records, "g").state == GroupState.STABLE


@pytest.mark.parametrize("skew", [120_000, -120_000, 2 * HOUR], ids=["ahead", "behind", "hours"])
def test_a_killed_members_partitions_move_within_its_session_and_two_heartbeats(skew) -> None:
    """Measured on a survivor's own monotonic clock, from the kill to the survivors holding
    every partition."""
    heartbeat_ms, session_ms = 1_000, 6_000
    machines = Machines(
        {"m1": 0, "m2": -HOUR // 2, "victim": skew}, heartbeat_ms=heartbeat_ms,
        session_ms=session_ms,
    )  # fmt: skip
    assert machines.run(60_000, until=machines.held_by_alive)
    machines.run(20_000)
    assert machines.expires() == []
    survivor = machines.members["m1"].clock
    machines.alive.discard("victim")  # SIGKILL: it never steps again
    killed_at = survivor.monotonic_ms()
    assert machines.run(60_000, until=machines.held_by_alive)
    taken_ms = survivor.monotonic_ms() - killed_at
    assert taken_ms <= session_ms + 2 * heartbeat_ms, taken_ms
    # Not before its session timeout from its last renewal (at most a heartbeat before the kill).
    assert taken_ms > session_ms - heartbeat_ms, taken_ms
    assert machines.expires() == ["victim"]
    assert sorted(machines.holders().values()) == [6, 6]


def test_simulated_group_with_clocks_hours_apart_settles_and_expires_nobody() -> None:
    result = simulate(members=16, partitions=64, append_ms=20, clock_offsets_ms=3 * HOUR)
    join, steady, scale_out = (result.phase(n) for n in ("join", "steady", "scale-out"))
    assert join.settled_s is not None and scale_out.settled_s is not None
    assert join.false_expiries == steady.false_expiries == scale_out.false_expiries == 0
    assert steady.writes == 0


# -- the windows, handler by handler -----------------------------------------------------------


def join_request(mid: str) -> JoinRequest:
    return JoinRequest(
        mid, ("cooperative-sticky",), topics=("t",), session_timeout_ms=10_000,
        rebalance_timeout_ms=20_000,
    )  # fmt: skip


def stable(coord: GroupCoordinator, requests: list[JoinRequest], partitions: int) -> None:
    """Join everyone (rejoining as the group asks), then the leader assigns."""
    for _ in range(3):
        for request in requests:
            if coord.member_view(request.member_id).needs_join:
                coord.apply_all(coord.join(request, 0)[0])
    leader = str(coord.group.leader)
    coord.apply_all(coord.sync(leader, coord.group.generation, 0, metadata={"t": partitions})[0])
    assert coord.group.state == GroupState.STABLE


def test_a_rebalance_deadline_runs_from_when_the_decider_saw_it_open() -> None:
    """A writer an hour ahead opens a rebalance (its deadline is an hour ahead of the
    others' clocks); a decider drops the laggard 20 s after it saw the rebalance open, by its
    own clock, not an hour later, and not at once for a writer an hour behind."""
    for writer_offset in (HOUR, -HOUR):
        coord = GroupCoordinator("g", NO_DELAY)
        stable(coord, [join_request("a"), join_request("b")], 2)
        # "c" joins on a machine whose clock is off: a rebalance opens, a and b must rejoin.
        late = 5_000 + writer_offset
        coord.apply_all(coord.join(join_request("c"), late)[0])
        assert coord.group.state == GroupState.PREPARING_REBALANCE
        watch = Watch()
        watch.saw_log(coord.group, 100_000)  # the decider's monotonic clock, its own origin
        for mid in ("a", "b", "c"):
            watch.saw_leases({mid: 1}, 100_000)
        for at in (100_000, 119_999):
            for mid in ("a", "b", "c"):  # everyone renews; only the deadline can act
                watch.saw_leases({mid: at}, at)
            assert coord.tick(7_000, watch.sightings(at)) == []
        for mid in ("a", "b", "c"):
            watch.saw_leases({mid: 120_000}, 120_000)
        dropped = coord.tick(7_000, watch.sightings(120_000))
        assert [(r.kind, r.member_id) for r in dropped][:2] == [
            (RecordKind.EXPIRE, "a"),
            (RecordKind.EXPIRE, "b"),
        ]


def test_the_initial_delay_runs_on_the_clock_of_who_completes_the_join() -> None:
    """The first JOIN opens the initial delay (3 s) on a machine an hour behind: a decider
    completes the join 3 s after it saw that JOIN, not at once (nor an hour later)."""
    coord = GroupCoordinator("g", GroupConfig(initial_rebalance_delay_ms=3_000))
    coord.apply_all(coord.join(join_request("a"), 1_000 - HOUR)[0])
    watch = Watch()
    watch.saw_log(coord.group, 50)
    watch.saw_leases({"a": 1}, 50)
    assert coord.tick(1_000, watch.sightings(3_049)) == []
    (generation,) = coord.tick(1_000, watch.sightings(3_050))
    assert generation.kind == RecordKind.GENERATION


def test_a_scheduled_delay_runs_from_when_the_decider_saw_the_expiry() -> None:
    """A static member's partitions wait ``scheduled_rebalance_max_delay_ms`` from when the
    decider saw the EXPIRE, whatever its writer's clock said."""
    config = GroupConfig(scheduled_rebalance_max_delay_ms=30_000, initial_rebalance_delay_ms=0)
    coord = GroupCoordinator("g", config)
    static = JoinRequest(
        "s", ("cooperative-sticky",), topics=("t",), instance_id="i", session_timeout_ms=10_000,
        rebalance_timeout_ms=20_000,
    )  # fmt: skip
    stable(coord, [static, join_request("d")], 4)
    assert coord.group.members["s"].assignment
    # The static member goes silent; a writer two hours ahead expires it.
    later = GroupCoordinator("g", config, coord.group.copy())
    expire = next(r for r in later.tick(2 * HOUR) if r.member_id == "s")
    assert expire.kind == RecordKind.EXPIRE
    coord.apply(expire)
    watch = Watch()
    watch.saw_log(coord.group, 0)
    watch.saw_leases({"d": 1}, 0)
    coord.apply_all(coord.join(join_request("d"), 500, seen=watch.sightings(0))[0])
    assert coord.group.state == GroupState.COMPLETING_REBALANCE
    sync = coord.sync("d", coord.group.generation, 500, metadata={"t": 4}, seen=watch.sightings(1))
    coord.apply_all(sync[0])
    held_back = {TopicPartition("t", p) for p in range(4)} - coord.group.members["d"].assignment
    assert held_back and coord.group.delay_ms == 29_999  # what remained on d's clock
    watch.saw_log(coord.group, 1)
    for at in (10_000, 20_000, 29_999):
        watch.saw_leases({"d": at}, at)
        assert coord.tick(600, watch.sightings(at)) == []
    watch.saw_leases({"d": 30_001}, 30_001)
    (rebalance,) = coord.tick(600, watch.sightings(30_001))
    assert rebalance.kind == RecordKind.REBALANCE


def test_a_lease_is_judged_by_its_change_not_by_its_number() -> None:
    """A renewal number far in the future or the past says nothing; the same number for a
    session timeout on the observer's clock is silence."""
    coord = GroupCoordinator("g", NO_DELAY)
    coord.apply_all(coord.join(join_request("a"), 0)[0])
    coord.apply_all(coord.tick(0))
    coord.apply_all(coord.sync("a", coord.group.generation, 0, metadata={"t": 1})[0])
    for number in (10 * HOUR, 5):
        watch = Watch()
        watch.saw_log(coord.group, 0)
        watch.saw_leases({"a": number}, 0)
        watch.saw_leases({"a": number + 1}, 4_000)
        assert coord.tick(0, watch.sightings(14_000)) == []
        watch.saw_leases({"a": number + 1}, 14_000)  # listed again: unchanged
        expire = coord.tick(0, watch.sightings(14_001))[0]
        assert expire.kind == RecordKind.EXPIRE


def test_a_process_that_starts_later_sees_history_opened_at_its_start() -> None:
    """Conservative, never premature: a record it replays counts from the first fold."""
    coord = GroupCoordinator("g", NO_DELAY)
    coord.apply_all(coord.join(join_request("a"), 0)[0])
    coord.apply_all(coord.sync("a", coord.group.generation, 0, metadata={"t": 1})[0])
    watch = Watch()
    watch.saw_log(coord.group, 1_000_000)  # started long after the records were written
    assert coord.tick(HOUR, watch.sightings(1_000_000 + 10_000)) == []
    assert coord.tick(HOUR, watch.sightings(1_000_000 + 10_001))[0].kind == RecordKind.EXPIRE


def test_members_list_the_leases_once_a_heartbeat_interval() -> None:
    """Observers list the leases once a heartbeat interval: the cost, counted."""
    machines = Machines({"m1": 0, "m2": HOUR, "m3": -HOUR}, heartbeat_ms=1_000, session_ms=6_000)
    assert machines.run(30_000, until=machines.held_by_alive)
    reads = machines.leases.reads
    machines.run(60_000)
    # Two others to watch: each member lists once a heartbeat interval, ~60 per minute.
    per_member_per_minute = (machines.leases.reads - reads) / 3
    assert 50 <= per_member_per_minute <= 70, per_member_per_minute
    assert machines.expires() == []


def test_replay_reads_old_absolute_deadlines_as_durations_of_their_record() -> None:
    from tests.unit.test_group_log_compat import fixture_records

    records = fixture_records()
    for i, r in enumerate(records):
        if r.kind == RecordKind.GENERATION:
            g = replay(records[: i + 1], "orders")
            if g.deadline_ms is not None:
                assert g.deadline_ms - g.deadline_opened.written_ms == 20_000
                assert g.deadline_opened.seq == g.seq


def test_a_watch_keeps_only_the_records_the_group_names() -> None:
    """A stable group that commits every second for a day keeps a watch as small as itself."""
    coord = GroupCoordinator("g", NO_DELAY)
    stable(coord, [join_request("a"), join_request("b")], 2)
    watch = Watch()
    for second in range(86_400):
        generation = coord.group.generation
        tp = next(iter(coord.group.members["a"].assignment))
        coord.apply_all(
            commit_offsets(coord.group, "a", generation, {tp: second}, second * 1000)[0]
        )
        watch.saw_log(coord.group, second * 1000)
    assert len(watch.sightings(0)._records) <= 2
    # a's commits keep it alive; b was last heard at the SYNC, seen at the first fold.
    assert watch.sightings(0).heard_ms(coord.group.members["b"]) == 0
    assert watch.sightings(0).heard_ms(coord.group.members["a"]) == 86_399_000
