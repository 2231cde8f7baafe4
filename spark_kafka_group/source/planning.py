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


def records_within_bytes(
    backlog: Mapping[TopicPartition, int],
    bytes_per_record: Mapping[TopicPartition, float],
    max_bytes: int,
) -> int:
    """How many records of ``backlog`` take about ``max_bytes``, when they are split as
    :func:`limit_end_offsets` splits them (in proportion to each partition's backlog, so each
    partition gives the same share of its backlog, and the bytes the same share of the
    backlog's bytes); at least one while there is a backlog. A partition without a figure is
    taken at the mean of the others; with no figure at all, the whole backlog."""
    total = sum(max(0, n) for n in backlog.values())
    sizes = [bytes_per_record[tp] for tp in backlog if tp in bytes_per_record]
    if total == 0 or not sizes:
        return total
    mean = sum(sizes) / len(sizes)
    total_bytes = sum(max(0, n) * bytes_per_record.get(tp, mean) for tp, n in backlog.items())
    if total_bytes <= max_bytes:
        return total
    return max(1, math.floor(total * max_bytes / total_bytes))


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


#: A task reads at least this many records when the batch holds them: a Python data source's
#: task costs about 30 ms of Python worker CPU whatever it reads (measured on pyspark 4.3,
#: docs/performance.md), about what fetching 20,000 records costs.
MIN_TASK_RECORDS = 20_000
#: A task reads at most this many records (unless ``maxRecordsPerPartition`` says fewer), so
#: that a backlog still spreads over a cluster's executors when ``parallelism`` is left at the
#: driver's core count; a task's fixed cost is then well under 1% of its work.
MAX_TASK_RECORDS = 1_000_000


def task_count(
    records: int,
    *,
    parallelism: int,
    min_partitions: int | None,
    max_records_per_partition: int | None,
    min_task_records: int = MIN_TASK_RECORDS,
) -> int:
    """How many Spark tasks read a batch of ``records`` records: one per core
    (``parallelism``), fewer when they would read under ``min_task_records`` each, more
    when a task would read over :data:`MAX_TASK_RECORDS` (or ``maxRecordsPerPartition``),
    and at least ``minPartitions``; never more than there are records."""
    if records <= 0:
        return 0
    cap = min(max_records_per_partition or MAX_TASK_RECORDS, MAX_TASK_RECORDS)
    by_cores = min(parallelism, math.ceil(records / min_task_records))
    count = max(1, by_cores, math.ceil(records / cap), min_partitions or 0)
    return min(count, records)


def plan_tasks(
    ranges: list[OffsetRange],
    *,
    parallelism: int,
    min_partitions: int | None,
    max_records_per_partition: int | None,
    min_task_records: int = MIN_TASK_RECORDS,
) -> list[list[OffsetRange]]:
    """The Spark tasks of a batch, balanced by records, not by partition.

    The ranges are laid end to end in the order given and cut into :func:`task_count` runs
    whose sizes differ by at most one record. A task reads its pieces together, each in offset
    order; a range cut in two ends one task and starts the next. So 64 or 512
    partitions run as many tasks as 8 do, and a big range is split when ``minPartitions`` or
    ``maxRecordsPerPartition`` asks for more tasks than there are ranges (as Spark's
    ``KafkaOffsetRangeCalculator`` splits it).
    """
    ranges = [r for r in ranges if r.size > 0]
    total = sum(r.size for r in ranges)
    count = task_count(
        total,
        parallelism=parallelism,
        min_partitions=min_partitions,
        max_records_per_partition=max_records_per_partition,
        min_task_records=min_task_records,
    )
    tasks: list[list[OffsetRange]] = []
    task: list[OffsetRange] = []
    placed = 0  # records in the tasks so far, the current one included
    boundary = total // count if count else 0  # where the current task ends
    for r in ranges:
        start = r.from_offset
        while start < r.until_offset:
            end = start + min(r.until_offset - start, boundary - placed)
            task.append(OffsetRange(r.topic, r.partition, start, end))
            placed += end - start
            start = end
            if placed == boundary:
                tasks.append(task)
                task = []
                boundary = total * (len(tasks) + 1) // count
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
