"""A real :class:`GroupMember` on a group log, without Spark or a broker (the tests that drive a
member by hand: close, leases, an ``assign`` query beside a subscriber)."""

from __future__ import annotations

from collections.abc import Mapping

from spark_kafka_group.group.assignors import load_assignor
from spark_kafka_group.member import GroupMember, SubscriptionSpec
from spark_kafka_group.options import GroupSettings


def group_member(
    store: str,
    group_id: str,
    topic_counts: Mapping[str, int],
    *,
    heartbeat_interval_ms: int = 500,
    session_timeout_ms: int = 30_000,
    rebalance_timeout_ms: int = 30_000,
    rebalance_listener: str | None = None,
) -> GroupMember:
    """A dynamic ``cooperative-sticky`` member subscribing to every topic of ``topic_counts``
    (topic -> partition count, as the broker would say), no initial rebalance delay."""
    counts = dict(topic_counts)
    return GroupMember(
        GroupSettings(
            group_id=group_id,
            store=store,
            storage_options={},
            heartbeat_interval_ms=heartbeat_interval_ms,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            assignment_strategy=(load_assignor("cooperative-sticky"),),
            instance_id=None,
            scheduled_rebalance_max_delay_ms=0,
            rebalance_listener=rebalance_listener,
            initial_rebalance_delay_ms=0,
        ),
        subscription=SubscriptionSpec(topics=tuple(sorted(counts))),
        topic_counts=lambda: counts,
    )
