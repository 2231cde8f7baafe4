"""One range of a task's fetch (:mod:`spark_kafka_group.fetcher.fetch`): where it stands, and
its records turned into Arrow.

Per batch the Python work is a handful of C-level ``map`` passes over the returned messages
and one ``pa.array`` per column; no per-record Python code runs on the fast path.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from operator import itemgetter
from typing import cast

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
# Records consumed without an error always carry an offset (the stub's Optional covers
# messages being produced).
_offset = cast(Callable[[Message], int], Message.offset)
_timestamp = Message.timestamp
_headers = Message.headers
_first = itemgetter(0)
_second = itemgetter(1)


class FetchRange:
    """One range of a task's fetch: where it stands, and its constant columns."""

    def __init__(self, spec: FetchSpec, now: float) -> None:
        self.spec = spec
        self.tp = KafkaTopicPartition(spec.topic, spec.partition)
        self.until = spec.until_offset
        self.next_offset = spec.from_offset
        self.done = False
        self.last_progress = now
        self.checked_at = now
        self.schema = arrow_schema(spec.include_headers)
        # consume() allows <= 1M; the constant columns below are sized to what the range
        # can hold (a small trigger's task must not build 20,000-row columns).
        rows = min(max(1, int(spec.max_batch_rows)), 1_000_000, self.until - self.next_offset)
        self.max_rows = rows
        self._topic_col = pa.repeat(pa.scalar(spec.topic, pa.string()), rows)
        self._partition_col = pa.repeat(pa.scalar(spec.partition, _I32), rows)
        self._ts_type_cols: dict[int, pa.Array] = {}

    def describe(self) -> str:
        return f"{self.spec.describe()} at offset {self.next_offset}"

    def at(self, offset: int) -> KafkaTopicPartition:
        return KafkaTopicPartition(self.spec.topic, self.spec.partition, offset)

    def take(self, data: list[Message], now: float) -> pa.RecordBatch | None:
        """This range's records of one ``consume()`` (in offset order): those in range as a
        batch; the range is done when one at or past its end arrives."""
        if self.done:
            return None  # queued before the range left the assignment
        self.last_progress = now
        offsets = list(map(_offset, data))
        if offsets[0] < self.next_offset:  # never expected; be exact anyway
            skip = bisect_left(offsets, self.next_offset)
            data, offsets = data[skip:], offsets[skip:]
        if offsets and offsets[-1] >= self.until:
            # Past the range (possible only across a gap): drop the rest, done.
            cut = bisect_left(offsets, self.until)
            data, offsets = data[:cut], offsets[:cut]
            self.done = True
        batch = None
        if data:
            batch = self._batch(data, offsets)
            self.next_offset = offsets[-1] + 1
        if self.done or self.next_offset >= self.until:
            self.finish()
        return batch

    def finish(self) -> None:
        self.done = True
        self.next_offset = max(self.next_offset, self.until)

    def _batch(self, data: list[Message], offsets: list[int]) -> pa.RecordBatch:
        n = len(data)
        ts = list(map(_timestamp, data))
        types = list(map(_first, ts))
        first = types[0]
        if types.count(first) == n:
            ts_type = self._ts_type_col(first, n)
        else:
            ts_type = pa.array([_TS_TYPE.get(t, -1) for t in types], _I32)
        columns = [
            pa.array(list(map(_key, data)), _BIN),
            pa.array(list(map(_value, data)), _BIN),
            self._topic_col.slice(0, n),
            self._partition_col.slice(0, n),
            pa.array(offsets, _I64),
            pc.multiply(pa.array(list(map(_second, ts)), _I64), 1000).cast(TIMESTAMP_TYPE),
            ts_type,
        ]
        if self.spec.include_headers:
            columns.append(pa.array(list(map(_headers, data)), HEADERS_TYPE))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def _ts_type_col(self, rd_type: int, n: int) -> pa.Array:
        col = self._ts_type_cols.get(rd_type)
        if col is None:
            col = pa.repeat(pa.scalar(_TS_TYPE.get(rd_type, -1), _I32), self.max_rows)
            self._ts_type_cols[rd_type] = col
        return col.slice(0, n)
