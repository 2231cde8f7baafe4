"""One range of a task's fetch (:mod:`spark_kafka_group.fetcher.fetch`): where it stands; and
the records of one ``consume()`` turned into Arrow.

Per batch the Python work is a handful of C-level ``map`` passes over the returned messages
and one ``pa.array`` per column; no per-record Python code runs on the fast path.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from operator import itemgetter

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from spark_kafka_group.fetcher.schema import HEADERS_TYPE, TIMESTAMP_TYPE, arrow_schema
from spark_kafka_group.fetcher.spec import FetchSpec

_BIN = pa.binary()
_I32 = pa.int32()
_I64 = pa.int64()

# librdkafka timestamp types (0 none, 1 create, 2 log append) -> Java's ids (-1, 0, 1).
_TS_TYPE = {0: -1, 1: 0, 2: 1}

_key = Message.key
_value = Message.value
_timestamp = Message.timestamp
_headers = Message.headers
_first = itemgetter(0)
_second = itemgetter(1)
_topic = Message.topic

#: Constant int32 columns a task keeps (partition numbers of single-partition batches,
#: timestamp types): one of ``max_rows`` each.
_CONSTANTS_KEPT = 8


def task_max_rows(specs: Sequence[FetchSpec]) -> int:
    """Records per ``consume()`` (so per batch handed to Spark) at most, for a task fetching
    ``specs`` together: ``max_batch_rows``, within what the whole task reads. By the task, not
    by its largest range: a batch holds the records of several partitions, and a task of 256
    ranges of 2,000 records each must not hand Spark its records 2,000 at a time. consume()
    allows at most 1M; a small trigger's task must not ask for (or build the constant columns
    of) 20,000 rows."""
    wanted = sum(s.until_offset - s.from_offset for s in specs)
    return max(1, min(max(int(s.max_batch_rows) for s in specs), 1_000_000, wanted))


class FetchRange:
    """One range of a task's fetch: where it stands."""

    def __init__(self, spec: FetchSpec, now: float) -> None:
        self.spec = spec
        self.tp = KafkaTopicPartition(spec.topic, spec.partition)
        self.until = spec.until_offset
        self.next_offset = spec.from_offset
        self.done = False
        self.last_progress = now
        self.checked_at = now

    def describe(self) -> str:
        return f"{self.spec.describe()} at offset {self.next_offset}"

    def at(self, offset: int) -> KafkaTopicPartition:
        return KafkaTopicPartition(self.spec.topic, self.spec.partition, offset)

    def take(self, offsets: list[int], now: float) -> tuple[int, int]:
        """Of a run of this range's records in one ``consume()`` (``offsets``, in order), the
        slice ``[lo, hi)`` in the range, and this range moved past it; the range is done when
        one at or past its end arrives."""
        if self.done:
            return 0, 0  # queued before the range left the assignment
        self.last_progress = now
        lo, hi = 0, len(offsets)
        if offsets[0] < self.next_offset:  # never expected; be exact anyway
            lo = bisect_left(offsets, self.next_offset)
        if offsets[-1] >= self.until:
            # Past the range (possible only across a gap): drop the rest, done.
            hi = bisect_left(offsets, self.until, lo)
            self.done = True
        if hi > lo:
            self.next_offset = offsets[hi - 1] + 1
        if self.done or self.next_offset >= self.until:
            self.finish()
        return lo, hi

    def finish(self) -> None:
        self.done = True
        self.next_offset = max(self.next_offset, self.until)


class ArrowRecords:
    """The records of one ``consume()`` as one RecordBatch of :func:`arrow_schema`, with the
    columns that are the same for every record (one topic, one partition, one timestamp type)
    built once per task and sliced."""

    def __init__(self, include_headers: bool, max_rows: int, topics: list[str]) -> None:
        self.include_headers = include_headers
        self.schema = arrow_schema(include_headers)
        self.max_rows = max_rows
        self._topic_col = (
            pa.repeat(pa.scalar(topics[0], pa.string()), max_rows) if len(topics) == 1 else None
        )
        self._constants: dict[int, pa.Array] = {}

    def batch(
        self, data: list[Message], offsets: list[int], partitions: list[int] | int
    ) -> pa.RecordBatch:
        """``data`` (with their ``offsets``, and their ``partitions``, or the one partition of
        them all) as a RecordBatch."""
        n = len(data)
        ts = list(map(_timestamp, data))
        types = list(map(_first, ts))
        first = types[0]
        if types.count(first) == n:
            ts_type = self._constant(_TS_TYPE.get(first, -1), n)
        else:
            ts_type = pa.array([_TS_TYPE.get(t, -1) for t in types], _I32)
        if isinstance(partitions, int):
            partition_col = self._constant(partitions, n)
        else:
            partition_col = pa.array(partitions, _I32)
        columns = [
            pa.array(list(map(_key, data)), _BIN),
            pa.array(list(map(_value, data)), _BIN),
            (
                self._topic_col.slice(0, n)
                if self._topic_col is not None and n <= self.max_rows
                else pa.array(list(map(_topic, data)), pa.string())
            ),
            partition_col,
            pa.array(offsets, _I64),
            pc.multiply(pa.array(list(map(_second, ts)), _I64), 1000).cast(TIMESTAMP_TYPE),
            ts_type,
        ]
        if self.include_headers:
            columns.append(pa.array(list(map(_headers, data)), HEADERS_TYPE))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def _constant(self, value: int, n: int) -> pa.Array:
        """An int32 column of ``n`` times ``value`` (cached for the task's common values)."""
        if n > self.max_rows:
            return pa.repeat(pa.scalar(value, _I32), n)
        col = self._constants.get(value)
        if col is None:
            if len(self._constants) >= _CONSTANTS_KEPT:
                return pa.repeat(pa.scalar(value, _I32), n)
            col = pa.repeat(pa.scalar(value, _I32), self.max_rows)
            self._constants[value] = col
        return col.slice(0, n)
