"""Assignors of a user's own, named by ``module:Class`` in ``assignmentStrategy`` by the tests.

Spark's Python workers import it from PYTHONPATH (``tests/conftest.py`` puts the repository
there), as a user's driver imports theirs.
"""

from __future__ import annotations

from collections.abc import Mapping

from spark_kafka_group.group.assignors import Assignment, Assignor, MemberSubscription
from spark_kafka_group.group.assignors.abstract import member_order
from spark_kafka_group.group.metadata import TopicPartition


class OneAndRestAssignor(Assignor):
    """The first member (in member order) gets each topic's partition 0 only; the others share
    the rest round robin. No built-in assignor splits 4 partitions 1 / 3."""

    name = "one-and-rest"

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, MemberSubscription],
    ) -> Assignment:
        order = member_order(subscriptions)
        out: Assignment = {m: [] for m in order}
        for topic in sorted(partitions_per_topic):
            members = [m for m in order if topic in subscriptions[m].topics]
            if not members:
                continue
            first, rest = members[0], members[1:] or members[:1]
            out[first].append(TopicPartition(topic, 0))
            for i, p in enumerate(range(1, partitions_per_topic[topic])):
                out[rest[i % len(rest)]].append(TopicPartition(topic, p))
        return out


class NotAnAssignor:
    """Has the method, but is not an :class:`Assignor`."""

    name = "not-an-assignor"

    def assign(self, partitions_per_topic: object, subscriptions: object) -> dict:
        return {}


class RangeLookalike(OneAndRestAssignor):
    """Takes a built-in's protocol name: members would mistake one for the other."""

    name = "range"


class NeedsArguments(OneAndRestAssignor):
    name = "needs-arguments"

    def __init__(self, rack: str) -> None:
        self.rack = rack
