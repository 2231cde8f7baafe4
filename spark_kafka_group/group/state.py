"""The group state machine of Kafka's classic group (``ClassicGroupState``).

Each state names the states it may be entered from; :meth:`GroupState.check_transition` is
the single place that enforces it. Staying in a state is not a transition.
"""

from __future__ import annotations

from enum import Enum

from spark_kafka_group.group.errors import IllegalStateTransitionError


class GroupState(str, Enum):
    """Empty, PreparingRebalance, CompletingRebalance, Stable, Dead."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @property
    def valid_previous_states(self) -> frozenset[GroupState]:
        """The states this one may be entered from."""
        return _PREVIOUS[self]

    def can_transition_to(self, target: GroupState) -> bool:
        return self in _PREVIOUS[target]

    def check_transition(self, target: GroupState) -> None:
        """Raise :class:`IllegalStateTransitionError` unless ``self -> target`` is legal."""
        if not self.can_transition_to(target):
            raise IllegalStateTransitionError(
                f"group state {self.value} -> {target.value} is not a legal transition; "
                f"{target.value} may only follow "
                f"{sorted(s.value for s in _PREVIOUS[target])}"
            )

    def __str__(self) -> str:
        return self.value


_S = GroupState
_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    _S.DEAD: frozenset(
        {_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}
    ),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
}
