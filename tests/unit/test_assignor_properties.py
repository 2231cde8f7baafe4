"""Assignors: valid, balanced, sticky (minimal movement), cooperative; random subscriptions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_kafka_group.group.assignors import (
    CooperativeStickyAssignor,
    MemberSubscription,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    builtin_assignors,
)
from spark_kafka_group.group.metadata import TopicPartition

TOPICS = ["a", "b", "c"]
FAST = settings(max_examples=60, deadline=None)

metadata_st = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 12), min_size=1)
members_st = st.dictionaries(
    st.text("mnopq", min_size=1, max_size=3),
    st.frozensets(st.sampled_from(TOPICS), min_size=1),
    min_size=1,
    max_size=7,
)


def subs(members: dict[str, frozenset[str]], owned=None) -> dict[str, MemberSubscription]:
    owned = owned or {}
    return {m: MemberSubscription(t, frozenset(owned.get(m, ()))) for m, t in members.items()}


def all_partitions(meta: dict[str, int], topics: set[str]) -> set[TopicPartition]:
    return {TopicPartition(t, p) for t in topics if t in meta for p in range(meta[t])}


def check_valid(meta, members, out) -> None:
    assert set(out) == set(members)
    flat = [tp for ps in out.values() for tp in ps]
    assert len(flat) == len(set(flat)), "a partition assigned twice"
    for m, ps in out.items():
        assert all(tp.topic in members[m] for tp in ps), "assigned an unsubscribed topic"
    wanted = all_partitions(meta, set().union(*members.values()))
    assert set(flat) == wanted


def is_balanced(meta, members, out) -> bool:
    """Kafka's definition: no partition could move to a member with two fewer."""
    count = {m: len(ps) for m, ps in out.items()}
    for v, ps in out.items():
        for u in out:
            if count[u] < count[v] - 1 and any(tp.topic in members[u] for tp in ps):
                return False
    return True


@pytest.mark.parametrize("name", sorted(builtin_assignors()))
@FAST
@given(meta=metadata_st, members=members_st)
def test_valid_for_random_subscriptions(name: str, meta, members) -> None:
    out = builtin_assignors()[name].assign(meta, subs(members))
    check_valid(meta, members, out)
    assert builtin_assignors()[name].assign(meta, subs(members)) == out  # deterministic


@pytest.mark.parametrize(
    "assignor", [RoundRobinAssignor(), StickyAssignor(), CooperativeStickyAssignor()]
)
@FAST
@given(meta=metadata_st, n=st.integers(1, 9))
def test_balanced_with_identical_subscriptions(assignor, meta, n) -> None:
    members = {f"m{i}": frozenset(meta) for i in range(n)}
    out = assignor.assign(meta, subs(members))
    counts = [len(ps) for ps in out.values()]
    assert max(counts) - min(counts) <= 1


@FAST
@given(meta=metadata_st, n=st.integers(1, 9))
def test_range_is_balanced_per_topic(meta, n) -> None:
    members = {f"m{i}": frozenset(meta) for i in range(n)}
    out = RangeAssignor().assign(meta, subs(members))
    for t in meta:
        per = [sum(1 for tp in ps if tp.topic == t) for ps in out.values()]
        assert max(per) - min(per) <= 1
        for ps in out.values():  # contiguous ranges
            mine = sorted(tp.partition for tp in ps if tp.topic == t)
            assert mine == list(range(mine[0], mine[0] + len(mine))) if mine else True


@FAST
@given(meta=metadata_st, members=members_st, data=st.data())
def test_sticky_is_balanced_for_random_subscriptions_and_ownership(meta, members, data) -> None:
    everything = sorted(all_partitions(meta, set(TOPICS)))
    owned = {m: data.draw(st.sets(st.sampled_from(everything))) if everything else set()
             for m in members}  # fmt: skip
    out = StickyAssignor().assign(meta, subs(members, owned))
    check_valid(meta, members, out)
    assert is_balanced(meta, members, out)


def min_moves(owned_counts: list[int], total: int) -> int:
    """Fewest owned partitions that must move for a balanced assignment (same topics)."""
    n = len(owned_counts)
    lo, extra = divmod(total, n)
    quotas = sorted([lo + 1] * extra + [lo] * (n - extra), reverse=True)
    kept = sum(min(o, q) for o, q in zip(sorted(owned_counts, reverse=True), quotas, strict=True))
    return sum(owned_counts) - kept


@pytest.mark.parametrize("assignor", [StickyAssignor(), CooperativeStickyAssignor()])
@FAST
@given(
    meta=st.dictionaries(st.sampled_from(TOPICS), st.integers(1, 15), min_size=1),
    n=st.integers(1, 8),
    change=st.sampled_from(["join", "leave"]),
)
def test_sticky_moves_the_minimum_on_join_or_leave(assignor, meta, n, change) -> None:
    members = {f"m{i}": frozenset(meta) for i in range(n)}
    first = StickyAssignor().assign(meta, subs(members))
    if change == "join":
        members["new"] = frozenset(meta)
    elif n > 1:
        members.pop("m0")
    owned = {m: first.get(m, []) for m in members}
    out = assignor.assign(meta, subs(members, owned))
    moved = sum(len(set(owned[m]) - set(out[m])) for m in members)
    total = sum(meta.values())
    assert moved == min_moves([len(owned[m]) for m in members], total)


@FAST
@given(meta=metadata_st, members=members_st, data=st.data())
def test_cooperative_never_revokes_and_assigns_in_one_round(meta, members, data) -> None:
    previous = RoundRobinAssignor().assign(meta, subs(members))  # a very different layout
    order = sorted(members)
    if data.draw(st.booleans()) and len(order) > 1:  # someone leaves
        members = {m: t for m, t in members.items() if m != order[0]}
    members = {**members, "zz": frozenset(TOPICS)}  # someone joins
    owned = {m: previous.get(m, []) for m in members}
    out = CooperativeStickyAssignor().assign(meta, subs(members, owned))
    owner = {tp: m for m, ps in owned.items() for tp in ps}
    for m, ps in out.items():
        for tp in ps:
            assert owner.get(tp, m) == m, f"{tp} taken from {owner[tp]} and given to {m}"
    # Nothing is lost: every partition is either assigned, or owned by a member that keeps
    # holding it until it acks the revocation.
    flat = {tp for ps in out.values() for tp in ps}
    wanted = all_partitions(meta, set().union(*members.values()))
    assert wanted - flat <= set(owner)
    # Follow-up rounds (each after the revocation acks) complete it: with identical
    # subscriptions in one round, with different ones within a few.
    for _ in range(6):
        owned = {m: list(out[m]) for m in members}  # after the acks, each owns its share
        out = CooperativeStickyAssignor().assign(meta, subs(members, owned))
        if {tp for ps in out.values() for tp in ps} == wanted:
            break
    check_valid(meta, members, out)
    assert is_balanced(meta, members, out)
