"""Kafka's RangeAssignor: each topic's partitions split into contiguous ranges, in member order."""

from __future__ import annotations

from collections.abc import Mapping

from spark_kafka_group.group.assignors.abstract import (
    Assignment,
    Assignor,
    MemberSubscription,
    member_order,
)
from spark_kafka_group.group.metadata import TopicPartition


class RangeAssignor(Assignor):
    name = "range"

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
            count = partitions_per_topic[topic]
            per, extra = divmod(count, len(members))
            start = 0
            for i, m in enumerate(members):
                n = per + (1 if i < extra else 0)
                out[m].extend(TopicPartition(topic, p) for p in range(start, start + n))
                start += n
        return out
