"""The assignor interface: the leader's partition assignment, one strategy per module.

An assignor is a pure function of the topic metadata and the members' subscriptions (with the
partitions each member owns now). It must be deterministic: every member may re-run it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

from spark_kafka_group.group.metadata import Partitions, TopicPartition


class RebalanceProtocol(str, Enum):
    #: Every member gives up all its partitions when a rebalance starts.
    EAGER = "eager"
    #: Members keep what does not move; moved partitions are revoked first (KIP-429).
    COOPERATIVE = "cooperative"


@dataclass(frozen=True)
class MemberSubscription:
    """What the assignor knows about one member."""

    #: Subscribed topics that exist (patterns already resolved).
    topics: frozenset[str]
    #: Partitions the member owns now (sticky assignors keep them where they can).
    owned: Partitions = frozenset()
    instance_id: str | None = None


Assignment = dict[str, list[TopicPartition]]


class Assignor(ABC):
    """One partition assignment strategy."""

    name: ClassVar[str]
    rebalance_protocol: ClassVar[RebalanceProtocol] = RebalanceProtocol.EAGER

    @abstractmethod
    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, MemberSubscription],
    ) -> Assignment:
        """Member id -> the partitions it gets (every member appears, maybe with [])."""

    # An assignor is a pure function of its arguments: instances of one class are the same
    # strategy (so settings holding them compare equal).
    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def member_order(subscriptions: Mapping[str, MemberSubscription]) -> list[str]:
    """Members sorted by instance id (static members keep their place), then member id."""
    return sorted(subscriptions, key=lambda m: (subscriptions[m].instance_id or m, m))


def topic_partitions(topic: str, count: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(count)]
