"""The group's protocol: Kafka's vote among the protocols every member supports, the refusal of
a member with nothing in common, and the eager-to-cooperative upgrade that follows the vote
(KIP-429's two bounces), over the pure coordinator and replay."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_kafka_group.errors import OptionError
from spark_kafka_group.group import (
    GroupConfig,
    GroupCoordinator,
    GroupError,
    GroupProtocolBug,
    GroupRecord,
    GroupState,
    JoinRequest,
    ManualClock,
    RecordKind,
    replay,
)
from spark_kafka_group.group.assignors import builtin_assignors
from spark_kafka_group.group.metadata import MemberMetadata, MemberProfile
from spark_kafka_group.group.payloads import GenerationPayload, JoinPayload
from spark_kafka_group.group.record_helpers import generation_record
from spark_kafka_group.store.memory import InMemoryLog
from spark_kafka_group.testing.simulation import SimMember, converged

CS, RANGE, RR, STICKY = "cooperative-sticky", "range", "roundrobin", "sticky"
CFG = GroupConfig(min_session_timeout_ms=1_000, initial_rebalance_delay_ms=0)


class Group:
    """A coordinator and its log; every handler's records are folded and kept."""

    def __init__(self) -> None:
        self.coord = GroupCoordinator("g", CFG)
        self.log: list[GroupRecord] = []
        self.now = 0

    def do(self, result):
        records, response = result
        self.coord.apply_all(records)
        self.log.extend(records)
        self.now += 1
        return response

    def join(self, mid: str, protocols: tuple[str, ...], owned=None):
        request = JoinRequest(mid, protocols, topics=("t",), session_timeout_ms=10_000, owned=owned)
        return self.do(self.coord.join(request, self.now))

    def settle(self) -> None:
        """Every member rejoins (keeping what it holds) and the leader syncs; revocations are
        acked until the group is stable with nothing being revoked."""
        for _ in range(10):
            g = self.coord.group
            for mid, m in list(g.members.items()):
                if self.coord.member_view(mid).needs_join:
                    held = sorted(self.coord.group.members[mid].held)
                    self.join(mid, m.profile.protocol_names, owned=held)
            g = self.coord.group
            if g.state == GroupState.COMPLETING_REBALANCE:
                assert g.leader is not None
                self.do(self.coord.sync(g.leader, g.generation, self.now, metadata={"t": 6}))
            g = self.coord.group
            revoking = {mid: m.revoking for mid, m in g.members.items() if m.revoking}
            for mid, parts in revoking.items():
                self.do(self.coord.ack_revocation(mid, g.generation, parts, self.now))
            g = self.coord.group
            if g.state == GroupState.STABLE and not any(m.revoking for m in g.members.values()):
                return
        raise AssertionError(f"the group did not settle: {self.coord.group.state}")

    def joins(self) -> list[GroupRecord]:
        return [r for r in self.log if r.kind == RecordKind.JOIN]


def member(mid: str, *protocols: str) -> MemberMetadata:
    return MemberMetadata(mid, profile=MemberProfile(protocols=tuple((p, {}) for p in protocols)))


def test_each_member_votes_for_its_most_preferred_candidate_and_the_most_votes_win() -> None:
    g = GroupCoordinator("g").group
    members = [member("a", STICKY, CS, RANGE), member("b", CS, RANGE), member("c", RANGE, CS)]
    assert g.candidate_protocols(members) == {CS, RANGE}  # sticky: not everyone has it
    assert g.select_protocol(members) == CS  # a and b vote cs, c votes range
    tie = [member("a", RANGE, RR), member("b", RR, RANGE)]
    assert g.select_protocol(tie) == RANGE  # a tie goes to the first name
    assert g.select_protocol([member("a", RANGE), member("b", RR)]) is None


def test_a_member_with_nothing_in_common_is_refused() -> None:
    grp = Group()
    grp.join("a", (RANGE,))
    grp.join("b", (CS, RANGE))
    assert grp.join("c", (CS,)).error is GroupError.INCONSISTENT_GROUP_PROTOCOL
    assert "c" not in grp.coord.group.members
    # A member that changes its own list counts only the others' protocols.
    grp.settle()
    assert grp.join("b", (RR, RANGE)).error is GroupError.NONE


def test_rolling_upgrade_from_range_to_cooperative_sticky() -> None:
    """KIP-429: the group stays on range (eager: a rejoin gives up everything) until every
    member lists cooperative-sticky; once the vote picks it, rejoins keep their partitions."""
    grp = Group()
    grp.join("a1", (RANGE,))
    grp.join("b1", (RANGE,))
    grp.settle()
    assert grp.coord.group.protocol == RANGE

    def restart(old: str, new: str, protocols: tuple[str, ...]) -> None:
        grp.do(grp.coord.leave(old, grp.now))
        grp.settle()
        grp.join(new, protocols)
        grp.settle()

    # First bounce: a restarts listing both; b still lists range only: range, eager.
    restart("a1", "a2", (CS, RANGE))
    assert grp.coord.group.protocol == RANGE
    mark = len(grp.log)
    restart("b1", "b2", (CS, RANGE))
    # b2's join was decided under range (eager); the generation it completed picked cs.
    assert grp.coord.group.protocol == CS
    eager_rejoins = [r for r in grp.log[mark:] if r.kind == RecordKind.JOIN]
    assert any(
        r.member_id == "a2" and JoinPayload.of(r).owned == frozenset() for r in eager_rejoins
    )

    # Second bounce: every rebalance is cooperative; a partition that stays is never dropped.
    mark = len(grp.log)
    restart("a2", "a3", (CS,))
    restart("b2", "b3", (CS,))
    assert grp.coord.group.protocol == CS
    kept = [r for r in grp.log[mark:] if r.kind == RecordKind.JOIN and JoinPayload.of(r).owned]
    assert kept, "cooperative rejoins keep what they hold"
    assert all(JoinPayload.of(r).owned != frozenset() for r in kept)
    assert replay(grp.log, "g") == grp.coord.group


names = st.lists(st.sampled_from(sorted(builtin_assignors())), min_size=1, max_size=4, unique=True)


@settings(max_examples=150, deadline=None)
@given(lists=st.lists(names, min_size=1, max_size=6), leave=st.lists(st.booleans(), max_size=6))
def test_the_selected_protocol_is_supported_by_every_member_and_replay_reproduces_it(
    lists: list[list[str]], leave: list[bool]
) -> None:
    grp = Group()
    for i, protocols in enumerate(lists):
        g = grp.coord.group
        common = g.candidate_protocols() & set(protocols) if g.members else set(protocols)
        response = grp.join(f"m{i}", tuple(protocols))
        assert (response.error is GroupError.INCONSISTENT_GROUP_PROTOCOL) == (not common)
        if response.error is GroupError.NONE:
            grp.settle()
    for mid, gone in zip(list(grp.coord.group.members), leave, strict=False):
        if gone:  # membership changes: the vote is taken again at the next generation
            grp.do(grp.coord.leave(mid, grp.now))
            if grp.coord.group.members:
                grp.settle()
    g = grp.coord.group
    if g.members:
        assert g.protocol is not None
        assert all(g.protocol in m.profile.protocol_names for m in g.members.values())
        assert g.protocol == g.select_protocol(g.members.values())
    assert replay(grp.log, "g") == g


def test_replay_refuses_a_generation_whose_protocol_is_not_the_vote() -> None:
    grp = Group()
    grp.join("a", (CS, RANGE))
    generation = next(r for r in grp.log if r.kind == RecordKind.GENERATION)
    forged = generation_record(
        now_ms=generation.timestamp_ms,
        writer=generation.member_id,
        generation=int(generation.generation or 0),
        payload=dataclasses.replace(GenerationPayload.of(generation), protocol=RANGE),
    )
    with pytest.raises(GroupProtocolBug, match="vote selects 'cooperative-sticky'"):
        replay([*grp.log[:-1], forged], "g")


def test_a_production_member_with_nothing_in_common_fails_with_what_the_group_supports() -> None:
    clock, log, meta = ManualClock(0), InMemoryLog(), {"t": 4}
    a = SimMember("a", log, clock, lambda: meta, protocols=(RANGE,))
    b = SimMember("b", log, clock, lambda: meta, protocols=(CS, RANGE))
    for _ in range(30):
        for m in (a, b):
            m.step()
        clock.advance(100)
    assert converged(a.coord, meta) and a.coord.group.protocol == RANGE
    late = SimMember("c", log, clock, lambda: meta, protocols=(CS,))
    late.step()
    failure = late.member.failure
    assert isinstance(failure, OptionError), failure
    message = str(failure)
    assert "its members all support only range (it uses 'range')" in message
    assert "'cooperative-sticky' has none of them" in message
    assert "'cooperative-sticky,range'" in message  # the upgrade path
