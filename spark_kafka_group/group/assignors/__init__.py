"""Partition assignors, one per module; a new module with a concrete :class:`Assignor` is a new
built-in (see :mod:`.registry`, which finds them: :func:`builtin_assignors`). The classes are
imported here only so that users can name them."""

from __future__ import annotations

from spark_kafka_group.group.assignors.abstract import (
    Assignment,
    Assignor,
    MemberSubscription,
    RebalanceProtocol,
)
from spark_kafka_group.group.assignors.cooperative_sticky import CooperativeStickyAssignor
from spark_kafka_group.group.assignors.range import RangeAssignor
from spark_kafka_group.group.assignors.registry import (
    AssignorLookupError,
    builtin_assignors,
    load_assignor,
)
from spark_kafka_group.group.assignors.roundrobin import RoundRobinAssignor
from spark_kafka_group.group.assignors.sticky import StickyAssignor

__all__ = [
    "Assignment",
    "Assignor",
    "AssignorLookupError",
    "CooperativeStickyAssignor",
    "MemberSubscription",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "builtin_assignors",
    "load_assignor",
]
