"""Partition assignors, one per module, and the registry of the built-in ones."""

from __future__ import annotations

from spark_kafka_group.group.assignors.abstract import (
    Assignment,
    Assignor,
    MemberSubscription,
    RebalanceProtocol,
)
from spark_kafka_group.group.assignors.cooperative_sticky import CooperativeStickyAssignor
from spark_kafka_group.group.assignors.range import RangeAssignor
from spark_kafka_group.group.assignors.roundrobin import RoundRobinAssignor
from spark_kafka_group.group.assignors.sticky import StickyAssignor

#: The built-in assignors by protocol name.
BUILTIN_ASSIGNORS: dict[str, Assignor] = {
    a.name: a
    for a in (RangeAssignor(), RoundRobinAssignor(), StickyAssignor(), CooperativeStickyAssignor())
}

__all__ = [
    "BUILTIN_ASSIGNORS",
    "Assignment",
    "Assignor",
    "CooperativeStickyAssignor",
    "MemberSubscription",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
]
