"""Kafka's RoundRobinAssignor: all partitions in order, dealt to members in a circle."""

from __future__ import annotations

from collections.abc import Mapping

from spark_kafka_group.group.assignors.abstract import (
    Assignment,
    Assignor,
    MemberSubscription,
    member_order,
)
from spark_kafka_group.group.metadata import TopicPartition


class RoundRobinAssignor(Assignor):
    name = "roundrobin"

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, MemberSubscription],
    ) -> Assignment:
        order = member_order(subscriptions)
        out: Assignment = {m: [] for m in order}
        if not order:
            return out
        n = len(order)
        i = 0
        for topic in sorted(partitions_per_topic):
            if not any(topic in subscriptions[m].topics for m in order):
                continue
            for p in range(partitions_per_topic[topic]):
                # Advance the circle to the next member subscribed to this topic.
                while topic not in subscriptions[order[i % n]].topics:
                    i += 1
                out[order[i % n]].append(TopicPartition(topic, p))
                i += 1
        return out
