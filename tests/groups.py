"""What the tests ask of a group's state, through the public ``describe_group``."""

from __future__ import annotations

from collections.abc import Mapping

from spark_kafka_group.group import GroupDescription, TopicPartition
from spark_kafka_group.ops.admin import describe_group


def describe(
    store: str, group: str, *, storage_options: Mapping[str, str] | None = None
) -> GroupDescription:
    return describe_group(store, group, storage_options=storage_options)


def committed(
    store: str, group: str, *, storage_options: Mapping[str, str] | None = None
) -> dict[TopicPartition, int]:
    """The group's committed offsets (a fresh dict, equal to one keyed by plain pairs)."""
    return describe(store, group, storage_options=storage_options).committed


def stable_with(
    store: str,
    group: str,
    members: int,
    partitions: int,
    *,
    storage_options: Mapping[str, str] | None = None,
) -> bool:
    """The group is Stable with exactly ``members`` members that own ``partitions`` in all."""
    info = describe(store, group, storage_options=storage_options)
    owned = [tp for m in info.members for tp in m.assignment]
    return info.state == "Stable" and len(info.members) == members and len(owned) == partitions
