"""Handlers: Kafka error names, purity, static membership (KIP-345), fencing, offsets."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from spark_kafka_group.group import (
    GroupConfig,
    GroupCoordinator,
    GroupError,
    GroupState,
    IllegalStateTransitionError,
    JoinRequest,
    OffsetAndMetadata,
    RecordKind,
    TopicPartition,
    replay,
)
from spark_kafka_group.group.offsets import commit_offsets
from spark_kafka_group.group.payloads import ExpirePayload
from spark_kafka_group.group.records import GroupRecord

E = GroupError
CFG = GroupConfig(min_session_timeout_ms=1_000, initial_rebalance_delay_ms=0)


class Group:
    """A coordinator plus its log; ``do`` appends and folds a handler's records."""

    def __init__(self, config: GroupConfig = CFG) -> None:
        self.coord = GroupCoordinator("g", config)
        self.log: list[GroupRecord] = []

    def do(self, result):
        records, response = result
        for r in records:
            json.dumps(r.payload)  # JSON primitives only
        self.coord.apply_all(records)
        self.log.extend(records)
        return response

    def join(self, mid: str, now: int = 0, **kw):
        kw.setdefault("protocols", ("cooperative-sticky", "range"))
        kw.setdefault("topics", ("t",))
        kw.setdefault("session_timeout_ms", 10_000)
        return self.do(self.coord.join(JoinRequest(mid, **kw), now))

    def stable(self, members: list[str], now: int = 0, **kw) -> int:
        for mid in members:
            self.join(mid, now, instance_id=kw.get("instances", {}).get(mid))
        # members that joined earlier rejoin (rebalance)
        for mid in members:
            if self.coord.member_view(mid).needs_join:
                self.join(mid, now, instance_id=kw.get("instances", {}).get(mid))
        g = self.coord.group
        assert g.state == GroupState.COMPLETING_REBALANCE
        assert g.leader is not None
        self.do(self.coord.sync(g.leader, g.generation, now, metadata={"t": 6}))
        assert self.coord.group.state == GroupState.STABLE
        return self.coord.group.generation


def test_handlers_do_not_mutate_the_group() -> None:
    grp = Group()
    grp.stable(["a", "b"])
    before = replay(grp.log, "g")
    c = grp.coord
    gen = c.group.generation
    c.join(JoinRequest("x", ("range",), topics=("t",), session_timeout_ms=10_000), 5)
    c.leave("a", 5)
    c.heartbeat("a", gen, 5)
    commit_offsets(c.group, "a", gen, {TopicPartition("t", 0): 1}, 5)
    c.metadata_changed("a", {"t": 9}, 5)
    c.tick(10**9)
    assert c.group == before


def test_first_joiner_leads_and_the_protocol_is_common_to_all() -> None:
    grp = Group()
    grp.join("a", protocols=("cooperative-sticky", "range"))
    grp.do(grp.coord.sync("a", 1, 0, metadata={"t": 6}))
    assert grp.join("b", protocols=("roundrobin", "range")).pending
    assert grp.join("a").members == ("a", "b")  # the last rejoin completes the join
    assert grp.coord.group.state == GroupState.COMPLETING_REBALANCE
    assert grp.coord.group.leader == "a"
    assert grp.coord.group.protocol == "range"


def test_join_errors() -> None:
    grp = Group()
    assert grp.join("a", session_timeout_ms=10).error is E.INVALID_SESSION_TIMEOUT
    assert grp.join("a", session_timeout_ms=10**9).error is E.INVALID_SESSION_TIMEOUT
    assert grp.join("a", protocols=()).error is E.INCONSISTENT_GROUP_PROTOCOL
    assert grp.join("", protocols=("range",)).error is E.INVALID_REQUEST
    grp.join("a", protocols=("range",))
    assert grp.join("b", protocols=("roundrobin",)).error is E.INCONSISTENT_GROUP_PROTOCOL
    assert grp.join("b", protocol_type="connect").error is E.INCONSISTENT_GROUP_PROTOCOL
    small = Group(replace(CFG, max_group_size=1))
    small.join("a")
    assert small.join("b").error is E.GROUP_MAX_SIZE_REACHED


def test_member_errors_heartbeat_sync_commit() -> None:
    grp = Group()
    gen = grp.stable(["a", "b"])
    c = grp.coord
    assert c.heartbeat("zz", gen, 1)[1].error is E.UNKNOWN_MEMBER_ID
    assert c.heartbeat("a", gen - 1, 1)[1].error is E.ILLEGAL_GENERATION
    assert c.sync("a", gen + 5, 1)[1].error is E.ILLEGAL_GENERATION
    assert c.heartbeat("a", gen, 1)[1].error is E.NONE
    assert (
        commit_offsets(c.group, "zz", gen, {TopicPartition("t", 0): 1}, 1)[1].error
        is E.UNKNOWN_MEMBER_ID
    )
    assert commit_offsets(c.group, "a", gen - 1, {TopicPartition("t", 0): 1}, 1)[
        1
    ].partition_errors == {TopicPartition("t", 0): E.ILLEGAL_GENERATION}
    grp.join("c", 2)
    assert c.heartbeat("a", gen, 3)[1].error is E.REBALANCE_IN_PROGRESS
    assert c.sync("a", gen, 3)[1].error is E.REBALANCE_IN_PROGRESS
    assert c.heartbeat("c", -1, 3)[1].error is E.NONE  # joined, waiting for the others
    with pytest.raises(IllegalStateTransitionError):
        GroupState.STABLE.check_transition(GroupState.EMPTY)


def test_commits_only_from_the_owner_in_the_current_generation() -> None:
    grp = Group()
    gen = grp.stable(["a", "b"])
    c = grp.coord
    mine = sorted(c.group.members["a"].assignment)
    theirs = sorted(c.group.members["b"].assignment)
    resp = grp.do(
        commit_offsets(c.group, "a", gen, {mine[0]: OffsetAndMetadata(10, "m"), theirs[0]: 5}, 1)
    )
    assert resp.partition_errors == {mine[0]: E.NONE, theirs[0]: E.ILLEGAL_GENERATION}
    committed = c.describe(1).offsets
    assert theirs[0] not in committed
    assert (committed[mine[0]].offset, committed[mine[0]].metadata) == (10, "m")
    assert resp.accepted == {mine[0]}
    # "a" leaves: its late commit is a zombie commit.
    grp.do(c.leave("a", 2))
    assert commit_offsets(c.group, "a", gen, {mine[0]: 11}, 3)[1].error is E.UNKNOWN_MEMBER_ID
    assert [r.kind for r in grp.log].count(RecordKind.COMMIT.value) == 1


def test_admin_commit_only_into_an_empty_group_and_delete() -> None:
    grp = Group()
    resp = grp.do(commit_offsets(grp.coord.group, None, -1, {TopicPartition("t", 0): 42}, 0))
    assert resp.accepted == {TopicPartition("t", 0)}
    grp.join("a")
    assert (
        commit_offsets(grp.coord.group, None, -1, {TopicPartition("t", 0): 1}, 0)[1].error
        is E.UNKNOWN_MEMBER_ID
    )
    assert grp.coord.delete_group(1)[1].error is E.NON_EMPTY_GROUP
    grp.do(grp.coord.leave("a", 1))
    assert grp.coord.group.state == GroupState.EMPTY
    assert grp.do(grp.coord.delete_group(2)).error is E.NONE
    assert grp.coord.group.state == GroupState.DEAD
    assert grp.join("b").error is E.COORDINATOR_NOT_AVAILABLE
    assert grp.coord.describe(3).state == GroupState.DEAD


def test_describe() -> None:
    grp = Group()
    grp.stable(["a", "b"])
    d = grp.coord.describe(0, uri="store/g", version=7)
    assert d.state == GroupState.STABLE and d.leader == "a" and d.protocol == "cooperative-sticky"
    assert sorted(m.member_id for m in d.members) == ["a", "b"]
    assert sum(len(m.assignment) for m in d.members) == 6
    assert (d.uri, d.version, d.now_ms) == ("store/g", 7, 0)
    row = d.summary_json()
    assert (row["group"], row["state"], row["members"], row["version"]) == ("g", "Stable", 2, 7)
    assert d.to_json()["members"][0]["assigned"] == [f"t-{p}" for p in range(3)]
    assert d.group_id == "g"


def test_last_member_leaving_goes_through_preparing_to_empty() -> None:
    grp = Group()
    gen = grp.stable(["a"])
    grp.do(grp.coord.leave("a", 5))
    g = grp.coord.group
    assert g.state == GroupState.EMPTY and g.generation == gen + 1 and not g.members
    kinds = [r.kind for r in grp.log[-2:]]
    assert kinds == [RecordKind.LEAVE, RecordKind.GENERATION]


def test_session_expiry_and_rebalance_timeout_are_records() -> None:
    grp = Group()
    grp.stable(["a", "b", "c"])
    c = grp.coord
    gen = c.group.generation
    grp.do(c.heartbeat("a", gen, 9_000))
    grp.do(c.heartbeat("b", gen, 9_000))
    records = grp.do((c.tick(10_001), None)) or grp.log[-1:]
    assert grp.log[-1].kind == RecordKind.EXPIRE and grp.log[-1].member_id == "c"
    assert ExpirePayload.of(grp.log[-1]).reason == "session_timeout"
    del records
    # a rejoins, b never does: b is dropped at the rebalance timeout
    grp.join("a", 10_002)
    deadline = c.group.deadline_ms
    assert deadline is not None
    for t in range(10_003, deadline, 5_000):  # b stays alive but never rejoins
        assert grp.do(c.heartbeat("b", gen, t)).error is E.REBALANCE_IN_PROGRESS
    assert grp.coord.tick(deadline - 1) == []
    grp.do((c.tick(deadline), None))
    assert [r.kind for r in grp.log[-2:]] == [RecordKind.EXPIRE, RecordKind.GENERATION]
    assert ExpirePayload.of(grp.log[-2]).reason == "rebalance_timeout"
    assert list(c.group.members) == ["a"] and c.group.state == GroupState.COMPLETING_REBALANCE


def test_leader_that_never_syncs_is_dropped() -> None:
    grp = Group()
    grp.join("a", 0, rebalance_timeout_ms=5_000)
    grp.do(grp.coord.sync("a", 1, 0, metadata={"t": 6}))
    grp.join("b", 1, rebalance_timeout_ms=5_000)
    grp.join("a", 1, rebalance_timeout_ms=5_000)
    assert grp.coord.group.state == GroupState.COMPLETING_REBALANCE
    grp.do((grp.coord.tick(1 + 5_000), None))
    assert ExpirePayload.of(grp.log[-1]).reason == "sync_timeout"
    assert "a" not in grp.coord.group.members


# ------------------------------------------------------------------ static membership


def test_static_restart_within_session_timeout_keeps_assignment_without_rebalance() -> None:
    grp = Group()
    inst = {"a": "ia", "b": "ib"}
    gen = grp.stable(["a", "b"], instances=inst)
    c = grp.coord
    old = c.group.members["b"].assignment
    resp = grp.join("b2", 5_000, instance_id="ib")
    assert resp.error is E.NONE and not resp.pending and resp.generation == gen
    assert c.group.generation == gen and c.group.state == GroupState.STABLE
    synced = grp.do(c.sync("b2", gen, 5_001))
    assert set(synced.assignment) == old
    # The old incarnation is fenced: heartbeats, commits and rejoins.
    assert c.heartbeat("b", gen, 5_002)[1].error is E.FENCED_INSTANCE_ID
    assert c.heartbeat("b", gen, 5_002, instance_id="ib")[1].error is E.FENCED_INSTANCE_ID
    tp = next(iter(old))
    assert commit_offsets(c.group, "b", gen, {tp: 3}, 5_002)[1].error is E.FENCED_INSTANCE_ID
    assert grp.join("b", 5_003, instance_id="ib").error is E.FENCED_INSTANCE_ID
    assert commit_offsets(c.group, "b2", gen, {tp: 3}, 5_004)[1].accepted == {tp}


def test_restarted_dynamic_member_replaces_its_previous_incarnation_without_rebalance() -> None:
    grp = Group()
    gen = grp.stable(["a", "b"])
    c = grp.coord
    old = c.group.members["b"].assignment
    resp = grp.join("b2", 5_000, replaces="b")  # b's query restarted from its checkpoint
    assert resp.error is E.NONE and not resp.pending and resp.generation == gen
    assert c.group.generation == gen and c.group.state == GroupState.STABLE
    assert "b" not in c.group.members and c.group.members["b2"].assignment == old
    assert c.group.members["a"].assignment and not c.group.members["a"].revoking
    tp = next(iter(old))
    assert commit_offsets(c.group, "b", gen, {tp: 3}, 5_001)[1].error is E.FENCED_INSTANCE_ID
    assert c.heartbeat("b", gen, 5_002)[1].error is E.FENCED_INSTANCE_ID
    assert grp.join("b", 5_003).error is E.FENCED_INSTANCE_ID
    assert c.member_view("b").fenced
    assert commit_offsets(c.group, "b2", gen, {tp: 3}, 5_004)[1].accepted == {tp}
    assert replay(grp.log, "g") == c.group  # replay reaches the same state


def test_a_join_that_replaces_a_member_gone_or_static_is_an_ordinary_join() -> None:
    grp = Group()
    gen = grp.stable(["a", "s"], instances={"s": "is"})
    grp.join("x", 100, replaces="gone")  # left or expired meanwhile
    grp.join("y", 101, replaces="s")  # a static member is replaced only by its instance id
    g = grp.coord.group
    assert {"a", "s", "x", "y"} <= set(g.members) and not g.fenced
    assert g.state == GroupState.PREPARING_REBALANCE and g.generation == gen


def test_duplicate_instance_id_fences_the_older_member() -> None:
    grp = Group()
    gen = grp.stable(["a", "b"], instances={"a": "ia", "b": "ib"})
    grp.join("x", 100, instance_id="ib")  # a second live process with b's instance id
    c = grp.coord
    assert c.group.static_members["ib"] == "x" and "b" not in c.group.members
    assert c.heartbeat("b", gen, 101, instance_id="ib")[1].error is E.FENCED_INSTANCE_ID
    assert grp.join("b", 102, instance_id="ib").error is E.FENCED_INSTANCE_ID
    assert c.member_view("b").fenced and not c.member_view("b").needs_join


def test_static_leader_restart_triggers_a_rebalance() -> None:
    grp = Group()
    gen = grp.stable(["a", "b"], instances={"a": "ia", "b": "ib"})
    grp.join("a2", 10, instance_id="ia")
    g = grp.coord.group
    assert g.state == GroupState.PREPARING_REBALANCE and g.leader == "a2"
    assert grp.coord.group.members["a2"].assignment  # cooperative: it keeps its partitions
    grp.join("b", 11, instance_id="ib")
    assert g.generation == gen + 1 and g.leader == "a2"


def test_static_member_changing_subscription_rebalances() -> None:
    grp = Group()
    grp.stable(["a", "b"], instances={"a": "ia", "b": "ib"})
    grp.join("b2", 10, instance_id="ib", topics=("t", "u"))
    assert grp.coord.group.state == GroupState.PREPARING_REBALANCE


def test_static_member_expired_after_session_timeout_rebalances() -> None:
    grp = Group()
    gen = grp.stable(["a", "b"], instances={"a": "ia", "b": "ib"})
    grp.do(grp.coord.heartbeat("a", gen, 9_000))
    grp.do((grp.coord.tick(10_001), None))
    assert "b" not in grp.coord.group.members and "ib" not in grp.coord.group.static_members
    resp = grp.join("b2", 10_002, instance_id="ib")
    assert resp.pending


# ------------------------------------------------------------------ metadata


def test_metadata_change_triggers_rebalance_and_is_recorded() -> None:
    grp = Group()
    gen = grp.stable(["a", "b"])
    c = grp.coord
    assert c.metadata_changed("a", {"t": 6, "other": 3}, 5) == (
        [],
        c.metadata_changed("a", {"t": 6}, 5)[1],
    )
    resp = grp.do(c.metadata_changed("b", {"t": 8}, 6))
    assert resp.rebalance and c.group.state == GroupState.PREPARING_REBALANCE
    assert c.group.latest_metadata == {"t": 8}
    grp.join("a", 7)
    grp.join("b", 7)
    grp.do(c.sync("a", gen + 1, 8))  # the leader passes no metadata: the recorded one is used
    assert c.group.assignment_snapshot == {"t": 8}
    assert sum(len(m.assignment) for m in c.group.members.values()) == 8


def test_pattern_subscription_picks_up_new_and_vanished_topics() -> None:
    grp = Group()
    grp.join("a", 0, topics=(), pattern=r"logs-.*")
    grp.do(grp.coord.sync("a", 1, 0, metadata={"logs-1": 2, "other": 4}))
    c = grp.coord
    assert c.group.assignment_snapshot == {"logs-1": 2}
    assert grp.do(c.metadata_changed("a", {"logs-1": 2, "other": 5}, 1)).rebalance is False
    assert grp.do(c.metadata_changed("a", {"logs-1": 2, "logs-2": 1}, 2)).rebalance
    grp.join("a", 3, topics=(), pattern=r"logs-.*")
    grp.do(c.sync("a", c.group.generation, 3, metadata={"logs-1": 2, "logs-2": 1}))
    assert len(c.group.members["a"].assignment) == 3
    assert grp.do(c.metadata_changed("a", {"logs-2": 1}, 4)).rebalance  # logs-1 deleted
    grp.join("a", 5, topics=(), pattern=r"logs-.*")
    grp.do(c.sync("a", c.group.generation, 5, metadata={"logs-2": 1}))
    m = c.group.members["a"]
    assert m.assignment == {TopicPartition("logs-2", 0)}
    assert m.revoking == {TopicPartition("logs-1", 0), TopicPartition("logs-1", 1)}
    ack = grp.do(c.ack_revocation("a", c.group.generation, m.revoking, 6))
    assert len(ack.released) == 2 and c.group.state == GroupState.STABLE  # nothing to give


def test_subscription_change_rebalances() -> None:
    grp = Group()
    grp.stable(["a", "b"])
    assert grp.join("b", 5).generation == grp.coord.group.generation  # unchanged: no-op
    assert grp.coord.group.state == GroupState.STABLE
    grp.join("b", 6, topics=("t", "u"))
    assert grp.coord.group.state == GroupState.PREPARING_REBALANCE


def test_eager_rejoin_gives_up_everything() -> None:
    grp = Group()
    for mid in ("a", "b"):
        grp.join(mid, 0, protocols=("range",))
    grp.join("a", 0, protocols=("range",))
    gen = grp.coord.group.generation
    grp.do(grp.coord.sync("a", gen, 0, metadata={"t": 6}))
    a_parts = grp.coord.group.members["a"].assignment
    assert a_parts
    grp.join("c", 1, protocols=("range",))
    # a may still commit its final offsets before rejoining ...
    tp = min(a_parts)
    assert grp.do(commit_offsets(grp.coord.group, "a", gen, {tp: 7}, 2)).accepted == {tp}
    grp.join("a", 3, protocols=("range",), owned=frozenset(a_parts))
    assert grp.coord.group.members["a"].assignment == frozenset()
    # ... but not after: it gave everything up.
    assert commit_offsets(grp.coord.group, "a", gen, {tp: 8}, 4)[1].accepted == frozenset()


def test_protocol_metadata_must_be_json_and_is_stored_canonically() -> None:
    grp = Group()
    assert grp.join("a", protocols=[("range", {"x": {1, 2}})]).error is E.INVALID_REQUEST
    grp.join("a", protocols=[("range", {"rack": ("r1", "r2")})])
    assert grp.coord.group.members["a"].profile.protocols == (("range", {"rack": ["r1", "r2"]}),)
    assert replay(grp.log, "g") == grp.coord.group


def test_describe_says_live_exactly_when_tick_would_not_expire() -> None:
    grp = Group()
    grp.stable(["a", "b"])  # session timeout 10 s, everything at t=0
    grp.do(grp.coord.heartbeat("b", grp.coord.group.generation, 8_000))
    gen = grp.coord.group.generation
    grp.do(commit_offsets(grp.coord.group, "a", gen, {TopicPartition("t", 0): 4}, 1_000))
    at_limit = grp.coord.describe(11_000)  # a: silent 10 s = its session timeout, still live
    assert [(m.member_id, m.live) for m in at_limit.members] == [("a", True), ("b", True)]
    assert (
        at_limit.committed == {TopicPartition("t", 0): 4}
        and at_limit.offsets[TopicPartition("t", 0)].offset == 4
    )
    later = grp.coord.describe(11_001)
    assert {m.member_id: m.live for m in later.members} == {"a": False, "b": True}
    assert {r.member_id for r in grp.coord.tick(11_001) if r.kind == RecordKind.EXPIRE} == {"a"}
    member = later.to_json()["members"][0]
    assert (member["live"], member["last_heartbeat_age_ms"]) == (False, 10_001)


def test_describe_keeps_a_member_awaiting_sync_live_past_its_session() -> None:
    grp = Group()
    grp.join("a", 0)
    grp.join("a", 0)  # the join phase completes: CompletingRebalance, waiting for a's sync
    assert grp.coord.group.state == GroupState.COMPLETING_REBALANCE
    (member,) = grp.coord.describe(20_000).members  # past the session, before the sync deadline
    assert member.live and not grp.coord.tick(20_000)


def test_describe_counts_a_lease_as_a_sign_of_life() -> None:
    grp = Group()
    grp.stable(["a"])  # session timeout 10 s, its last record at t=0
    (leased,) = grp.coord.describe(20_000, leases={"a": 15_000}).members
    assert leased.live and leased.last_seen_ms == 15_000
    (silent,) = grp.coord.describe(20_000).members
    assert not silent.live and silent.last_seen_ms == 0


def test_a_returned_static_instance_does_not_strand_the_partitions_it_no_longer_gets() -> None:
    """After a scheduled delay expired, the returned instance counts as owning its old
    partitions (so it gets them back); what the cooperative assignor moves away from it is
    not held by anyone and goes to its new owner at once, not after a revocation that will
    never come."""
    from spark_kafka_group.group import GroupMetadata
    from spark_kafka_group.group.assignment import sync_payload
    from spark_kafka_group.group.assignors import builtin_assignors
    from spark_kafka_group.group.clocks import SingleClock
    from spark_kafka_group.group.metadata import (
        MemberMetadata,
        MemberProfile,
        ScheduledDelay,
        Subscription,
    )

    g = GroupMetadata("g")
    for mid, inst in (("back", "i1"), ("other", None)):
        profile = MemberProfile(
            protocols=(("cooperative-sticky", None),), subscription=Subscription(("t",), None)
        )
        g.members[mid] = MemberMetadata(mid, instance_id=inst, profile=profile)
    g.static_members["i1"] = "back"
    g.scheduled["i1"] = ScheduledDelay(frozenset(TopicPartition("t", p) for p in range(4)), 100)
    payload = sync_payload(
        g, builtin_assignors()["cooperative-sticky"], {"t": 4}, now_ms=200, seen=SingleClock(200)
    )
    assigned = [tp for tps in payload.assignment.values() for tp in tps]
    assert sorted(map(tuple, assigned)) == [("t", p) for p in range(4)]
    assert len(payload.assignment["back"]) == 2
