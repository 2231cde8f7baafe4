"""Kafka's CooperativeStickyAssignor (KIP-429).

The sticky assignment, minus every partition that would change owner in this round: such a
partition is only revoked now (its owner's assignment no longer lists it) and is assigned to
its new owner by the follow-up rebalance that the owner's revocation ack triggers.
"""

from __future__ import annotations

from collections.abc import Mapping

from spark_kafka_group.group.assignors.abstract import (
    Assignment,
    Assignor,
    MemberSubscription,
    RebalanceProtocol,
)
from spark_kafka_group.group.assignors.sticky import sticky_assign
from spark_kafka_group.group.metadata import TopicPartition


class CooperativeStickyAssignor(Assignor):
    name = "cooperative-sticky"
    rebalance_protocol = RebalanceProtocol.COOPERATIVE

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, MemberSubscription],
    ) -> Assignment:
        target = sticky_assign(partitions_per_topic, subscriptions)
        owner: dict[TopicPartition, str] = {}
        for m, sub in subscriptions.items():
            for tp in sub.owned:
                owner.setdefault(tp, m)
        return {m: [tp for tp in parts if owner.get(tp, m) == m] for m, parts in target.items()}
