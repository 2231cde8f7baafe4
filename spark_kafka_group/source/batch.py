"""Batch reads: ``spark.read.format("kafka-group")``, Spark's batch Kafka source semantics.

The range is fixed on the driver when Spark plans the read (``partitions()``):

* start: ``startingOffsets`` (default ``earliest``; JSON with -2 for earliest; ``group`` for
  the group's committed offsets, where partitions without a commit start at earliest) or a
  timestamp option (``startingTimestamp``, ``startingOffsetsByTimestamp``);
* end (exclusive): ``endingOffsets`` (default ``latest``; JSON with -1 for latest) or
  ``endingTimestamp`` / ``endingOffsetsByTimestamp`` (no record at or after the time: latest).

A batch read never joins the group and never commits: the group log is only read, for
``startingOffsets=group``. The trigger options are ignored, as in Spark.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from spark_kafka_group.errors import OffsetOutOfRangeError, OptionError
from spark_kafka_group.fetcher import fetch
from spark_kafka_group.group.metadata import TopicPartition, partition_name
from spark_kafka_group.options import AtTimestamp, OffsetLimit, SourceOptions
from spark_kafka_group.source.input_partition import input_partitions
from spark_kafka_group.source.planning import OffsetRange
from spark_kafka_group.source.positions import (
    LogBounds,
    TimestampResolver,
    check_in_range,
    initial_positions,
    offsets_at_timestamps,
    resolve_offset,
)

log = logging.getLogger(__name__)

#: The group's committed offsets, read only when needed (``startingOffsets=group``).
CommittedOffsets = Callable[[], Mapping[TopicPartition, int]]


class KafkaGroupBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self._opts = options

    def partitions(self) -> Sequence[InputPartition]:
        from spark_kafka_group.kafka.cluster import cluster_for_source
        from spark_kafka_group.source.subscription import subscription_partitions
        from spark_kafka_group.source.timestamps import offsets_for_timestamps

        opts = self._opts
        with cluster_for_source(opts) as cluster:
            tps = subscription_partitions(cluster, opts)
            bounds = LogBounds(
                earliest=cluster.earliest_offsets(tps), latest=cluster.latest_offsets(tps)
            )
            ranges = plan_batch(
                opts,
                tps,
                bounds=bounds,
                committed=lambda: _group_committed(opts),
                at_timestamps=lambda ts: offsets_for_timestamps(cluster, ts, bounds=bounds),
            )
        return input_partitions(opts, ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # An empty range list reaches here as one bare InputPartition.
        yield from fetch(*getattr(partition, "specs", ()))


def plan_batch(
    options: SourceOptions,
    partitions: Sequence[TopicPartition],
    *,
    bounds: LogBounds,
    committed: CommittedOffsets,
    at_timestamps: TimestampResolver,
) -> list[OffsetRange]:
    """The ``[start, end)`` range of every partition, checked against the log bounds."""
    starting = options.starting_offsets
    from_group: Mapping[TopicPartition, int] = {}
    if starting.mode == "group":
        from_group = {tp: o for tp, o in committed().items() if tp in set(partitions)}
        starting = dataclasses.replace(starting, mode="earliest")
    starts = initial_positions(
        partitions,
        committed=from_group,
        starting=starting,
        bounds=bounds,
        group_id=options.group.group_id,
        at_timestamps=at_timestamps,
    )
    starts = check_in_range(
        starts,
        bounds=bounds,
        fail_on_data_loss=options.fail_on_data_loss,
        source="batch start",
    )
    ends = _ends(
        partitions,
        options.ending_offsets or OffsetLimit(mode="latest"),
        bounds=bounds,
        at_timestamps=at_timestamps,
        fail_on_data_loss=options.fail_on_data_loss,
    )
    ranges: list[OffsetRange] = []
    for tp in sorted(partitions):
        start, end = starts[tp], ends[tp]
        if start > end:
            raise OptionError(
                f"Partition {partition_name(*tp)}: the batch starts at offset {start} "
                f"(startingOffsets or a starting timestamp), after its end {end} (endingOffsets "
                "or an ending timestamp). Choose a start at or before the end."
            )
        ranges.append(OffsetRange(tp[0], tp[1], start, end))
    log.info(
        "batch read of %d partition(s), %d record offset(s): %s",
        len(ranges), sum(r.size for r in ranges),
        ", ".join(
            f"{partition_name(r.topic, r.partition)}[{r.from_offset},{r.until_offset})"
            for r in ranges
        ),
    )  # fmt: skip
    return ranges


def _ends(
    partitions: Sequence[TopicPartition],
    ending: OffsetLimit,
    *,
    bounds: LogBounds,
    at_timestamps: TimestampResolver,
    fail_on_data_loss: bool,
) -> dict[TopicPartition, int]:
    ends: dict[TopicPartition, int] = {}
    timestamps: dict[TopicPartition, int] = {}
    for tp in partitions:
        policy = ending.for_partition(*tp)
        if isinstance(policy, AtTimestamp):
            timestamps[tp] = policy.ms
        else:
            assert policy is not None  # endingOffsets has no 'none' or 'group'
            ends[tp] = resolve_offset(tp, policy, bounds)
    if timestamps:
        ends.update(
            offsets_at_timestamps(timestamps, starting=ending, bounds=bounds, resolve=at_timestamps)
        )
    for tp, end in ends.items():
        high = bounds.latest[tp]
        if end > high:
            message = (
                f"endingOffsets for partition {partition_name(*tp)} is {end}, beyond its high "
                f"watermark {high}: those records do not exist (yet)"
            )
            if fail_on_data_loss:
                raise OffsetOutOfRangeError(
                    f"{message}. Use -1 (latest) or an offset up to {high}, or set "
                    "failOnDataLoss=false to read up to the high watermark."
                )
            log.warning("%s; failOnDataLoss=false, reading up to %d.", message, high)
            ends[tp] = high
    return ends


def _group_committed(options: SourceOptions) -> dict[TopicPartition, int]:
    """The group's committed offsets, read from its log (read only: no join, no commit)."""
    from spark_kafka_group.ops.admin import describe_group

    info = describe_group(
        options.group.store,
        options.group.group_id,
        storage_options=dict(options.group.storage_options) or None,
    )
    if info.version < 0:
        log.warning(
            "startingOffsets=group: group %r has no log in %s yet; every partition starts at "
            "earliest.",
            options.group.group_id,
            options.group.store,
        )
    return dict(info.committed)
