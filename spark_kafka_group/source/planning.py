"""Pure batch planning: how far each partition advances, and how ranges become Spark tasks.

No I/O here, so the arithmetic is unit- and property-tested on its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from spark_kafka_group.group.metadata import TopicPartition


def limit_end_offsets(
    starts: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    max_records: int | None,
) -> dict[TopicPartition, int]:
    """End offsets that take at most ``max_records`` records in total.

    Split in proportion to each partition's backlog (as Spark's Kafka source does), by the
    largest-remainder method so the total is exactly ``min(max_records, backlog)``: never
    above the limit, and never zero for everyone while there is data.
    """
    backlog = {tp: max(0, latest[tp] - starts[tp]) for tp in starts}
    total = sum(backlog.values())
    if max_records is None or total <= max_records:
        return {tp: starts[tp] + backlog[tp] for tp in starts}
    shares = {tp: max_records * size / total for tp, size in backlog.items()}
    take = {tp: math.floor(share) for tp, share in shares.items()}
    left = max_records - sum(take.values())
    by_remainder = sorted(shares, key=lambda tp: (-(shares[tp] - take[tp]), tp))
    for tp in by_remainder[:left]:
        take[tp] += 1
    return {tp: starts[tp] + min(take[tp], backlog[tp]) for tp in starts}


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def split_ranges(
    ranges: list[OffsetRange],
    *,
    min_partitions: int | None,
    max_records_per_partition: int | None,
) -> list[OffsetRange]:
    """Spark input partitions for the batch: one per non-empty range, split further when
    ``maxRecordsPerPartition`` caps a task's size or ``minPartitions`` asks for more tasks
    (big ranges are split in proportion to their size, like Spark's KafkaOffsetRangeCalculator,
    then the largest piece is halved until there are ``min_partitions`` pieces or every piece
    holds one record).
    """
    ranges = [r for r in ranges if r.size > 0]
    total = sum(r.size for r in ranges)
    result: list[OffsetRange] = []
    for r in ranges:
        parts = 1
        if max_records_per_partition:
            parts = max(parts, math.ceil(r.size / max_records_per_partition))
        if min_partitions and len(ranges) < min_partitions and total:
            parts = max(parts, round(r.size / total * min_partitions))
        parts = max(1, min(parts, r.size))
        step, extra = divmod(r.size, parts)
        start = r.from_offset
        for i in range(parts):
            end = start + step + (1 if i < extra else 0)
            result.append(OffsetRange(r.topic, r.partition, start, end))
            start = end
    while result and min_partitions and len(result) < min_partitions:
        biggest = max(result, key=lambda r: r.size)
        if biggest.size < 2:
            break
        middle = biggest.from_offset + biggest.size // 2
        index = result.index(biggest)
        result[index : index + 1] = [
            OffsetRange(biggest.topic, biggest.partition, biggest.from_offset, middle),
            OffsetRange(biggest.topic, biggest.partition, middle, biggest.until_offset),
        ]
    return result


#: Ranges smaller than this share a Spark task (:func:`pack_ranges`). A Python data source's
#: task costs about 30 ms of Python worker CPU whatever it reads (measured on pyspark 4.3,
#: docs/performance.md), about what fetching 20,000 records costs.
SHARED_TASK_RECORDS = 20_000
#: At most this many ranges share a task: a task fetches its ranges one after the other, each
#: first fetch waiting about a broker round trip, so a cluster with many cores still runs
#: many partitions' small ranges in parallel.
SHARED_TASK_RANGES = 4


def pack_ranges(
    ranges: list[OffsetRange],
    *,
    max_records: int = SHARED_TASK_RECORDS,
    max_ranges: int = SHARED_TASK_RANGES,
) -> list[list[OffsetRange]]:
    """Spark tasks for the input partitions ``ranges``: up to ``max_ranges`` consecutive
    ranges share a task while their records add up to at most ``max_records``; a bigger
    range gets a task of its own.

    A trigger of a few hundred records on each of four partitions then runs one task instead
    of four, and a backlog still runs one task per range.
    """
    tasks: list[list[OffsetRange]] = []
    size = 0
    for r in ranges:
        if tasks and size + r.size <= max_records and len(tasks[-1]) < max_ranges:
            tasks[-1].append(r)
            size += r.size
        else:
            tasks.append([r])
            size = r.size
    return tasks


@dataclass
class TriggerMinimum:
    """``minOffsetsPerTrigger`` with ``maxTriggerDelay``, as in Spark's Kafka source: a trigger
    with fewer new records than the minimum plans no batch, unless the delay has passed since
    the last batch. The first trigger never waits. Times are on the reader's monotonic clock."""

    min_records: int
    max_delay_ms: int
    last_batch_ms: int | None = None

    def hold(self, available: int, *, now_ms: int) -> bool:
        """Whether this trigger waits, given ``available`` new records; records the time of a
        trigger that does not wait."""
        waited = None if self.last_batch_ms is None else now_ms - self.last_batch_ms
        if waited is not None and waited < self.max_delay_ms and available < self.min_records:
            return True
        self.last_batch_ms = now_ms
        return False
