"""Fetch positions for newly owned partitions: Kafka's ``updateFetchPositions``.

1. A partition already in the batch's start offset keeps Spark's checkpointed position
   (the reader handles that; this module is only asked about partitions new to the batch).
2. Else the group's committed offset from the group log.
3. Else, for a partition discovered after the member's query started (a new partition, a
   new topic matching ``subscribePattern``), or created while the group's members were all
   stopped (one the group's last assignment did not know), the earliest offset: every record
   written to it before its discovery is read, as Spark's and Flink's Kafka sources do for a
   partition that is not in a restarted query's checkpoint.
4. Else ``startingOffsets`` (earliest / latest / per-partition JSON, or a timestamp option)
   resolved with ListOffsets.
5. Else (``none``) :class:`NoOffsetForPartitionError` naming the partitions.

Every position is then checked against [log start, high watermark]: out of range fails with
:class:`OffsetOutOfRangeError` when ``failOnDataLoss`` is true; else it continues at the
nearest offset that still exists, as Spark does (below the log start: the log start; past the
end, e.g. the topic was recreated: the earliest offset) and the skipped count is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from spark_kafka_group.errors import (
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    TopicNotFoundError,
)
from spark_kafka_group.group.metadata import TopicPartition, partition_name
from spark_kafka_group.options import EARLIEST, LATEST, AtTimestamp, OffsetLimit

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LogBounds:
    """[log start offset, high watermark) of each partition, from ListOffsets."""

    earliest: Mapping[TopicPartition, int]
    latest: Mapping[TopicPartition, int]


#: Offsets of the first record at or after each timestamp (``None``: no such record);
#: :func:`spark_kafka_group.source.timestamps.offsets_for_timestamps` bound to a cluster.
TimestampResolver = Callable[[Mapping[TopicPartition, int]], Mapping[TopicPartition, int | None]]


def known_at_start(
    current: Iterable[TopicPartition],
    group_metadata: Mapping[str, int] | None,
    *,
    pattern: bool,
) -> frozenset[TopicPartition]:
    """Of the subscription's partitions when the query starts (``current``), those
    ``startingOffsets`` applies to: all of them for a group that never assigned partitions
    (``group_metadata`` None); else those the group's last assignment knew
    (``group_metadata``: partition count per topic). A partition beyond a known topic's count,
    or, under ``subscribePattern``, of a matching topic the group did not know, was created
    while the group's members were stopped: it is discovered. A topic a ``subscribe`` list
    names anew is a new subscription, not a discovery: ``startingOffsets`` applies to it."""
    if group_metadata is None:
        return frozenset(current)
    known: set[TopicPartition] = set()
    for tp in current:
        count = group_metadata.get(tp.topic)
        if (count is None and not pattern) or (count is not None and tp.partition < count):
            known.add(tp)
    return frozenset(known)


class PartitionsAtStart:
    """The partitions ``startingOffsets`` applies to, fixed when the member's query first
    starts (:func:`known_at_start`); a partition seen later without a commit was created
    since and starts at the earliest offset."""

    def __init__(self) -> None:
        self._known: frozenset[TopicPartition] | None = None

    def record(self, partitions: Iterable[TopicPartition]) -> None:
        """Remember ``partitions``; only the first call counts."""
        if self._known is None:
            self._known = frozenset(partitions)

    @property
    def recorded(self) -> bool:
        return self._known is not None

    def discovered(self, partitions: Iterable[TopicPartition]) -> frozenset[TopicPartition]:
        """Those of ``partitions`` that were not there at start."""
        known = self._known if self._known is not None else frozenset()
        return frozenset(tp for tp in partitions if tp not in known)


def initial_positions(
    partitions: Iterable[TopicPartition],
    *,
    committed: Mapping[TopicPartition, int],
    starting: OffsetLimit,
    bounds: LogBounds,
    group_id: str,
    discovered: Collection[TopicPartition] = frozenset(),
    at_timestamps: TimestampResolver | None = None,
) -> dict[TopicPartition, int]:
    """Positions for partitions new to this member (steps 2-5), unchecked."""
    positions: dict[TopicPartition, int] = {}
    missing: list[TopicPartition] = []
    timestamps: dict[TopicPartition, int] = {}
    for tp in sorted(partitions):
        if tp in committed:
            positions[tp] = committed[tp]
            continue
        policy = EARLIEST if tp in discovered else starting.for_partition(*tp)
        if policy is None:
            missing.append(tp)
        elif isinstance(policy, AtTimestamp):
            timestamps[tp] = policy.ms
        else:
            positions[tp] = resolve_offset(tp, policy, bounds)
    if timestamps:
        positions.update(
            offsets_at_timestamps(
                timestamps, starting=starting, bounds=bounds, resolve=at_timestamps
            )
        )
    if missing:
        names = ", ".join(partition_name(t, p) for t, p in missing)
        raise NoOffsetForPartitionError(
            f"No committed offset in group {group_id!r} for partition(s) {names}, and "
            "startingOffsets is 'none'. Set startingOffsets to 'earliest', 'latest' or a JSON "
            "of offsets for a new group, or import the offsets (kafka-group import-from-kafka)."
        )
    return positions


def resolve_offset(tp: TopicPartition, policy: int, bounds: LogBounds) -> int:
    """EARLIEST / LATEST / an exact offset as an offset of ``tp``."""
    if policy == EARLIEST:
        return bounds.earliest[tp]
    if policy == LATEST:
        return bounds.latest[tp]
    return policy


def offsets_at_timestamps(
    timestamps: Mapping[TopicPartition, int],
    *,
    starting: OffsetLimit,
    bounds: LogBounds,
    resolve: TimestampResolver | None,
) -> dict[TopicPartition, int]:
    """The first offset at or after each partition's timestamp; with no such record, the
    latest offset if ``starting.no_match_latest`` (Spark's strategy ``latest``), else an error."""
    if resolve is None:
        raise ValueError("timestamp positions need a resolver")
    found = resolve(timestamps)
    positions: dict[TopicPartition, int] = {}
    for tp, ms in sorted(timestamps.items()):
        offset = found.get(tp)
        if offset is not None:
            positions[tp] = offset
        elif starting.no_match_latest:
            positions[tp] = bounds.latest[tp]
        else:
            raise NoOffsetForPartitionError(
                f"No record of partition {partition_name(*tp)} has a timestamp at or after {ms} "
                "(startingTimestamp / startingOffsetsByTimestamp). Set "
                "startingOffsetsByTimestampStrategy=latest to start such partitions at the "
                "latest offset, or choose an earlier timestamp."
            )
    return positions


def check_in_range(
    positions: Mapping[TopicPartition, int],
    *,
    bounds: LogBounds,
    fail_on_data_loss: bool,
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
        what = (
            f"{source} for partition {partition_name(*tp)} is {position}, out of range "
            f"[log start {low}, high watermark {high}]"
        )
        if position < low:
            lost = f"offsets {position}..{low - 1} ({low - position}) were deleted (retention)"
        else:
            lost = (
                f"it is {position - high} offset(s) past the end: the topic was recreated or "
                "truncated (its records from the log start on are new)"
            )
        if fail_on_data_loss:
            raise OffsetOutOfRangeError(
                f"The {what}: {lost}. Set failOnDataLoss=false to continue from offset {low} "
                "instead, or reset the group's offsets (kafka-group reset-offsets)."
            )
        log.warning(
            "The %s: %s; failOnDataLoss=false, continuing from offset %d (%d offset(s) skipped).",
            what, lost, low, max(0, low - position),
        )  # fmt: skip
        checked[tp] = low
    return checked


def skip_vanished(
    partitions: Sequence[TopicPartition],
    *,
    existing: Mapping[str, int],
    fail_on_data_loss: bool,
    error: Exception,
) -> list[TopicPartition]:
    """Of the member's ``partitions``, those that still exist (``existing``: partition count
    per topic in the cluster's metadata), once ListOffsets said some do not (``error``). Their
    topic was deleted before the group reassigned them: with ``failOnDataLoss=true`` the
    ``error`` (which names them) fails the query; with false they are left out of the batch
    with a WARNING, as Spark does, and the rebalance that follows drops them."""
    present = [tp for tp in partitions if tp.partition < existing.get(tp.topic, 0)]
    gone = sorted(set(partitions) - set(present))
    if fail_on_data_loss or not gone:
        raise error
    log.warning(
        "Partition(s) %s no longer exist (the topic was deleted): their records not read yet "
        "are lost; failOnDataLoss=false, reading the other partitions.",
        ", ".join(partition_name(*tp) for tp in gone),
    )
    return present


class DeletedTopics:
    """Partitions of the last batch that the member no longer reads because their topic was
    deleted (a ``subscribePattern`` no longer matches it, and the group dropped it), as
    Spark's Kafka source reports them: an error with ``failOnDataLoss=true``, else one WARNING
    per partition."""

    def __init__(self) -> None:
        self._reported: set[TopicPartition] = set()

    def check(
        self,
        dropped: Iterable[TopicPartition],
        *,
        existing: Mapping[str, int],
        fail_on_data_loss: bool,
    ) -> None:
        """``dropped``: partitions of the last batch not in this one; ``existing``: partition
        count per topic in the cluster now. Those still there moved to another member."""
        gone = sorted(
            tp
            for tp in dropped
            if tp.partition >= existing.get(tp.topic, 0) and tp not in self._reported
        )
        if not gone:
            return
        names = ", ".join(partition_name(*tp) for tp in gone)
        topics = ", ".join(sorted({repr(tp.topic) for tp in gone}))
        if fail_on_data_loss:
            raise TopicNotFoundError(
                f"Partition(s) {names} no longer exist: topic(s) {topics} were deleted while the "
                "query read them, and records not read yet may be lost. Set "
                "failOnDataLoss=false to go on with the other partitions (a topic created again "
                "under that name is read from its earliest offset)."
            )
        log.warning(
            "Partition(s) %s no longer exist (topic(s) %s deleted); failOnDataLoss=false, going "
            "on with the other partitions.",
            names,
            topics,
        )
        self._reported.update(gone)
