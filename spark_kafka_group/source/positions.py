"""Fetch positions for newly owned partitions: seed 004's ``updateFetchPositions``.

1. A partition already in the batch's start offset keeps Spark's checkpointed position
   (the reader handles that; this module is only asked about partitions new to the batch).
2. Else the group's committed offset from the group log.
3. Else ``startingOffsets`` (earliest / latest / per-partition JSON) resolved with ListOffsets.
4. Else (``none``) :class:`NoOffsetForPartitionError` naming the partitions.

Every position is then checked against [log start, high watermark]: out of range fails with
:class:`OffsetOutOfRangeError` when ``failOnDataLoss`` is true, else is reset by the reset
policy as Kafka's ``auto.offset.reset`` does (``startingOffsets`` latest: the high watermark;
otherwise the log start) and reported at WARN.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from spark_kafka_group.errors import NoOffsetForPartitionError, OffsetOutOfRangeError
from spark_kafka_group.options import EARLIEST, LATEST, StartingOffsets
from spark_kafka_group.source.offsets import TopicPartition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LogBounds:
    """[log start offset, high watermark) of each partition, from ListOffsets."""

    earliest: Mapping[TopicPartition, int]
    latest: Mapping[TopicPartition, int]


def initial_positions(
    partitions: Iterable[TopicPartition],
    *,
    committed: Mapping[TopicPartition, int],
    starting: StartingOffsets,
    bounds: LogBounds,
    group_id: str,
) -> dict[TopicPartition, int]:
    """Positions for partitions new to this member (steps 2-4), unchecked."""
    positions: dict[TopicPartition, int] = {}
    missing: list[TopicPartition] = []
    for tp in sorted(partitions):
        if tp in committed:
            positions[tp] = committed[tp]
            continue
        policy = starting.for_partition(*tp)
        if policy is None:
            missing.append(tp)
        elif policy == EARLIEST:
            positions[tp] = bounds.earliest[tp]
        elif policy == LATEST:
            positions[tp] = bounds.latest[tp]
        else:
            positions[tp] = policy
    if missing:
        names = ", ".join(f"{t}-{p}" for t, p in missing)
        raise NoOffsetForPartitionError(
            f"No committed offset in group {group_id!r} for partition(s) {names}, and "
            "startingOffsets is 'none'. Set startingOffsets to 'earliest', 'latest' or a JSON "
            "of offsets for a new group, or import the offsets (kafka-group import-from-kafka)."
        )
    return positions


def check_in_range(
    positions: Mapping[TopicPartition, int],
    *,
    bounds: LogBounds,
    fail_on_data_loss: bool,
    starting: StartingOffsets,
    source: str,
) -> dict[TopicPartition, int]:
    """Positions checked against the log bounds; see the module docstring for the policy.

    ``source`` says where the positions came from (for the message), e.g. "committed offset".
    """
    checked: dict[TopicPartition, int] = {}
    for tp, position in positions.items():
        low, high = bounds.earliest[tp], bounds.latest[tp]
        if low <= position <= high:
            checked[tp] = position
            continue
        reset = high if starting.for_partition(*tp) == LATEST else low
        what = (
            f"{source} for partition {tp[0]}-{tp[1]} is {position}, out of range "
            f"[log start {low}, high watermark {high}]"
        )
        if fail_on_data_loss:
            raise OffsetOutOfRangeError(
                f"The {what}: records were deleted (retention) or the topic was recreated. "
                f"Set failOnDataLoss=false to continue from offset {reset} instead "
                "(records in between are lost), or reset the group's offsets "
                "(kafka-group reset-offsets)."
            )
        log.warning("The %s; failOnDataLoss=false, continuing from %d.", what, reset)
        checked[tp] = reset
    return checked
