"""The group state machine: Kafka's ``ClassicGroupState`` table, encoded once and enforced."""

from __future__ import annotations

import itertools

import pytest

from spark_kafka_group.group import GroupState, IllegalStateTransitionError

S = GroupState
PREVIOUS = {
    S.DEAD: {S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD},
    S.COMPLETING_REBALANCE: {S.PREPARING_REBALANCE},
    S.STABLE: {S.COMPLETING_REBALANCE},
    S.PREPARING_REBALANCE: {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY},
    S.EMPTY: {S.PREPARING_REBALANCE},
}


def test_previous_states_match_kafkas_classic_group_state() -> None:
    for state, previous in PREVIOUS.items():
        assert state.valid_previous_states == previous


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(S, S)))
def test_every_pair_is_enforced(src: GroupState, dst: GroupState) -> None:
    if src in PREVIOUS[dst]:
        src.check_transition(dst)
        assert src.can_transition_to(dst)
    else:
        with pytest.raises(IllegalStateTransitionError, match=f"{src.value} -> {dst.value}"):
            src.check_transition(dst)


def test_state_names_are_kafkas() -> None:
    assert [s.value for s in S] == [
        "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"
    ]  # fmt: skip
