"""Incremental cooperative rebalancing with a scheduled rebalance delay (KIP-415's
``scheduled.rebalance.max.delay.ms``, here for a consumer group of static members), in three
rounds.

C1 -> {P0, P3}, C2 -> {P1}, C3 -> {P2}. C2 goes away for longer than its session timeout.
Round 1: C1 and C3 rejoin; P1 is lost; the assignment does not change and carries the delay.
Round 2: C2 comes back within the delay; still nothing moves, the remaining delay shrinks.
Round 3: the delay expires; everyone rejoins and C2 gets P1 back. C1 and C3 never stop.
"""

from __future__ import annotations

from typing import Any

import pytest

from spark_kafka_group.group import (
    GroupConfig,
    GroupCoordinator,
    GroupError,
    GroupMetadata,
    GroupState,
    JoinRequest,
    JoinResponse,
    MemberMetadata,
    MemberProfile,
    Subscription,
    TopicPartition,
    replay,
)
from spark_kafka_group.group.records import GroupRecord

P = [TopicPartition("t", i) for i in range(4)]
SESSION = 10_000
DELAY = 60_000
PROTOCOL = ("cooperative-sticky",)


def start() -> tuple[GroupCoordinator, list[GroupRecord]]:
    """The group of the example, Stable at generation 1 (loaded from a SNAPSHOT record)."""
    g = GroupMetadata("g", state=GroupState.STABLE, generation=1, protocol_type="consumer")
    g.protocol = "cooperative-sticky"
    g.leader = "C1"
    for mid, parts in (("C1", {P[0], P[3]}), ("C2", {P[1]}), ("C3", {P[2]})):
        g.members[mid] = MemberMetadata(
            member_id=mid,
            instance_id=mid.lower(),
            profile=MemberProfile(
                session_timeout_ms=SESSION,
                rebalance_timeout_ms=30_000,
                protocols=(("cooperative-sticky", {}),),
                subscription=Subscription(("t",)),
            ),
            generation=1,
            assignment=frozenset(parts),
        )
        g.static_members[mid.lower()] = mid
    g.assignment_snapshot = {"t": 4}
    g.latest_metadata = {"t": 4}
    log = [GroupCoordinator("g", group=g).snapshot_record(0)]
    coord = GroupCoordinator("g", GroupConfig(scheduled_rebalance_max_delay_ms=DELAY))
    coord.apply_all(log)
    return coord, log


class Round:
    """Drives one coordinator; checks after every record that C1 and C3 keep consuming."""

    def __init__(self, coord: GroupCoordinator, log: list[GroupRecord]) -> None:
        self.coord, self.log = coord, log

    def do(self, result: tuple[list[GroupRecord], Any]) -> Any:
        records, response = result
        for r in records:
            self.coord.apply(r)
            self.log.append(r)
            g = self.coord.group
            if "C1" in g.members:
                assert {P[0], P[3]} <= g.members["C1"].assignment
            assert g.members["C3"].assignment >= {P[2]}
            assert (
                not g.members["C3"].revoking and not g.members.get("C1", g.members["C3"]).revoking
            )
        return response

    def join(self, mid: str, now: int) -> JoinResponse:
        owned = self.coord.member_view(mid).assignment
        return self.do(
            self.coord.join(
                JoinRequest(
                    mid,
                    PROTOCOL,
                    topics=("t",),
                    instance_id="c2" if mid.startswith("C2") else mid.lower(),
                    owned=owned,
                    session_timeout_ms=SESSION,
                    rebalance_timeout_ms=30_000,
                ),
                now,
            )
        )

    def rebalance(self, members: list[str], now: int) -> dict[str, Any]:
        """Everyone rejoins (told by its heartbeat), the leader syncs, everyone syncs."""
        for mid in members:
            hb = self.do(self.coord.heartbeat(mid, self.coord.group.generation, now))
            if mid in self.coord.group.members:
                assert hb.error in (GroupError.REBALANCE_IN_PROGRESS, GroupError.NONE)
            self.join(mid, now)
        g = self.coord.group
        assert g.state == GroupState.COMPLETING_REBALANCE
        assert g.leader == "C1"  # the leader stays the leader in every round
        self.do(self.coord.sync("C1", g.generation, now, metadata={"t": 4}))
        assert self.coord.group.state == GroupState.STABLE
        return {mid: self.do(self.coord.sync(mid, g.generation, now)) for mid in members}


def heartbeats(r: Round, members: list[str], t0: int, t1: int) -> int:
    t = t0
    while t < t1:
        t = min(t + 3_000, t1)
        for mid in members:
            r.do(r.coord.heartbeat(mid, r.coord.group.generation, t))
        r.do(([*r.coord.tick(t)], None))
    return t


def round_1(r: Round) -> int:
    # C2 goes silent; C1 and C3 keep heart-beating until C2's session expires.
    now = heartbeats(r, ["C1", "C3"], 0, SESSION + 1)
    g = r.coord.group
    assert "C2" not in g.members and g.state == GroupState.PREPARING_REBALANCE
    assert g.scheduled["c2"].partitions == {P[1]}
    out = r.rebalance(["C1", "C3"], now)
    assert out["C1"].assignment == {P[0], P[3]} and out["C1"].revoking == frozenset()
    assert out["C3"].assignment == {P[2]} and out["C3"].revoking == frozenset()
    assert out["C1"].delay_ms == out["C3"].delay_ms == DELAY  # the delay, carried along
    return now


def test_round_1_then_c2_returns_within_the_delay() -> None:
    coord, log = start()
    r = Round(coord, log)
    t1 = round_1(r)
    generation_1 = coord.group.generation
    # Round 2: C2 (a new incarnation of instance c2) returns within the delay.
    t2 = heartbeats(r, ["C1", "C3"], t1, t1 + 20_000)
    joined = r.join("C2b", t2)
    assert joined.pending and coord.group.state == GroupState.PREPARING_REBALANCE
    out = r.rebalance(["C1", "C2b", "C3"], t2)
    assert coord.group.generation == generation_1 + 1
    assert out["C1"].assignment == {P[0], P[3]}
    assert out["C2b"].assignment == frozenset()
    assert out["C3"].assignment == {P[2]}
    remaining = out["C1"].delay_ms
    assert remaining == DELAY - (t2 - t1) and 0 < remaining < DELAY
    assert out["C2b"].delay_ms == remaining
    # Round 3: the remaining delay runs out; the tick starts the rebalance, C2 gets P1.
    t3 = heartbeats(r, ["C1", "C2b", "C3"], t2, t1 + DELAY)
    assert coord.group.state == GroupState.PREPARING_REBALANCE
    assert coord.group.rebalance_reason == "scheduled rebalance delay expired"
    out = r.rebalance(["C1", "C2b", "C3"], t3)
    assert out["C1"].assignment == {P[0], P[3]}
    assert out["C2b"].assignment == {P[1]}
    assert out["C3"].assignment == {P[2]}
    assert all(o.delay_ms == 0 and o.revoking == frozenset() for o in out.values())
    assert coord.group.scheduled == {}
    assert replay(log, "g") == coord.group


def test_c2_does_not_return_and_p1_is_redistributed_after_the_delay() -> None:
    coord, log = start()
    r = Round(coord, log)
    t1 = round_1(r)
    t = heartbeats(r, ["C1", "C3"], t1, t1 + DELAY - 1)
    assert coord.group.state == GroupState.STABLE  # nothing happens before the delay ends
    assert all(P[1] not in m.held for m in coord.group.members.values())
    t = heartbeats(r, ["C1", "C3"], t, t1 + DELAY)
    out = r.rebalance(["C1", "C3"], t)
    assert out["C1"].assignment == {P[0], P[3]}
    assert out["C3"].assignment == {P[1], P[2]}
    assert replay(log, "g") == coord.group


@pytest.mark.parametrize("delay", [0])
def test_without_a_delay_p1_moves_at_once(delay: int) -> None:
    coord, log = start()
    coord.config = GroupConfig(scheduled_rebalance_max_delay_ms=delay)
    r = Round(coord, log)
    now = heartbeats(r, ["C1", "C3"], 0, SESSION + 1)
    assert coord.group.scheduled == {}
    out = r.rebalance(["C1", "C3"], now)
    assert out["C3"].assignment == {P[1], P[2]} and out["C1"].delay_ms == 0
