"""Bytes per record of each partition, for ``maxBytesPerTrigger``.

Kafka's offsets count records, not bytes, so the planning process samples the records at a
partition's position: the first :data:`SAMPLE_RECORDS` from there, fetched by the executors'
own fetch path with a small fetch size, their keys, values and headers measured. A figure is
kept for :data:`SAMPLE_TTL_MS`, then sampled again at the partition's position then, so a
topic whose record sizes change is followed within a minute. The cache is pure (the sampler
and the time are passed in); :func:`sample_record_bytes` is the sampler.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace

import pyarrow as pa

from spark_kafka_group.fetcher import FetchSpec, fetch
from spark_kafka_group.fetcher.schema import payload_bytes
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.options import SourceOptions
from spark_kafka_group.source.input_partition import fetch_spec
from spark_kafka_group.source.planning import OffsetRange

#: Records sampled at a partition's position.
SAMPLE_RECORDS = 50
#: A partition's figure is sampled again after this long.
SAMPLE_TTL_MS = 60_000
#: The sample's fetch asks each partition for little: its first record batches (Kafka sends
#: at least one batch, however large; 50 records of 1 KiB fit).
SAMPLE_FETCH_CONF = {"max.partition.fetch.bytes": str(64 * 1024)}

#: ``{partition: (from, until)}`` -> bytes per record of the partitions it could sample.
Sampler = Callable[[Mapping[TopicPartition, tuple[int, int]]], dict[TopicPartition, float]]


@dataclass
class RecordSizes:
    """Bytes per record by partition, sampled when unknown or older than ``ttl_ms``."""

    sample: Sampler
    ttl_ms: int = SAMPLE_TTL_MS
    #: partition -> (bytes per record, when sampled on the reader's monotonic clock)
    known: dict[TopicPartition, tuple[float, int]] = field(default_factory=dict)

    def of(
        self, ranges: Mapping[TopicPartition, tuple[int, int]], *, now_ms: int
    ) -> dict[TopicPartition, float]:
        """Bytes per record of the partitions of ``ranges`` (``(position, latest)`` each),
        sampling those with a backlog and no fresh figure."""
        due = {
            tp: (start, end)
            for tp, (start, end) in ranges.items()
            if end > start and (tp not in self.known or now_ms - self.known[tp][1] >= self.ttl_ms)
        }
        if due:
            for tp, size in self.sample(due).items():
                self.known[tp] = (size, now_ms)
        return {tp: self.known[tp][0] for tp in ranges if tp in self.known}


def sample_record_bytes(
    options: SourceOptions, ranges: Mapping[TopicPartition, tuple[int, int]]
) -> dict[TopicPartition, float]:
    """Fetch up to :data:`SAMPLE_RECORDS` records at the start of each range, as the
    executors fetch with ``options`` but a small fetch size, and measure their bytes per
    record."""
    specs = []
    for tp, (start, end) in sorted(ranges.items()):
        spec = fetch_spec(options, OffsetRange(*tp, start, min(end, start + SAMPLE_RECORDS)))
        conf = FetchSpec.conf({**dict(spec.client_conf), **SAMPLE_FETCH_CONF})
        specs.append(replace(spec, client_conf=conf))
    totals: dict[TopicPartition, list[int]] = {}
    for batch in fetch(*specs):
        for tp, records in _by_partition(batch):
            seen = totals.setdefault(tp, [0, 0])
            seen[0] += payload_bytes(records)
            seen[1] += records.num_rows
    return {tp: size / count for tp, (size, count) in totals.items() if count}


def _by_partition(batch: pa.RecordBatch) -> Iterator[tuple[TopicPartition, pa.RecordBatch]]:
    """The records of each partition in ``batch`` (a fetched batch holds several)."""
    keys = list(
        zip(batch.column("topic").to_pylist(), batch.column("partition").to_pylist(), strict=True)
    )
    for topic, partition in dict.fromkeys(keys):
        mask = pa.array([k == (topic, partition) for k in keys])
        yield TopicPartition(topic, partition), batch.filter(mask)
