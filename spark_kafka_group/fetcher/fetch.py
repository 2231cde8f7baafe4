"""Executor-side fetch of one offset range of one partition into Arrow (Kafka's ``Fetcher``).

:func:`fetch` gets everything it needs from a pickled :class:`FetchSpec`; the only state it
keeps is the per-process consumer pool (:mod:`.pool`). Records in
``[from_offset, until_offset)`` come back as ``pyarrow.RecordBatch`` es in offset order.

How the loop ends, given that offsets may have gaps (compaction, transaction markers,
aborted records under read_committed):

* a record at or beyond ``until - 1`` arrives, or
* librdkafka reports end of partition (``enable.partition.eof``) at an offset >= ``until``:
  every record below ``until`` has been delivered.

When nothing arrives, the loop asks the broker for the watermarks (at most twice a second) and
decides: below the log start or beyond the high watermark is out of range (data loss, or a
wrong range); at the end of a partition that ends before ``until`` is data loss after a
grace period; otherwise it waits, up to ``fetch_timeout_s`` without progress, then fails with
the servers and the position in the message. ``failOnDataLoss=false`` turns data loss into a
WARNING and skips to the log start (or stops).

Per batch the Python work is a handful of C-level ``map`` passes over the returned messages
and one ``pa.array`` per column; no per-record Python code runs on the fast path.
"""

from __future__ import annotations

import gc
import logging
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import cast

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from spark_kafka_group.errors import (
    BrokerUnavailableError,
    KafkaGroupError,
    OffsetOutOfRangeError,
    OptionError,
    TopicNotFoundError,
)
from spark_kafka_group.fetcher.pool import PooledConsumer, consumer_pool
from spark_kafka_group.fetcher.schema import HEADERS_TYPE, TIMESTAMP_TYPE, arrow_schema
from spark_kafka_group.group.metadata import TopicPartition, partition_name
from spark_kafka_group.kafka.config import (
    SEND_TIMEOUT_S,
    error_text,
    refused_message,
    unreachable_message,
)

log = logging.getLogger(__name__)

#: Default rows per RecordBatch (and per ``consume()`` call).
DEFAULT_MAX_BATCH_ROWS = 20_000
#: Without progress, ask the broker for the watermarks this often.
STALL_CHECK_S = 0.5
#: A partition that ends before ``until`` for this long is data loss (not a slow broker).
END_GRACE_S = 2.0
#: How long a stalled fetch waits for the leader's watermarks. The leader answers within
#: milliseconds; one that does not is dead or hung, and the fetch goes on with a new consumer.
WATERMARK_QUERY_S = 0.5
#: Fail fast when the client has never reached any broker and all are down for this long.
UNREACHABLE_FAST_FAIL_S = 10.0

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
_error = Message.error
_first = itemgetter(0)
_second = itemgetter(1)

_OUT_OF_RANGE = frozenset({KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE})
_GONE = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC}
)
_DENIED = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
    }
)


@dataclass(frozen=True)
class FetchSpec:
    """One range of one partition to fetch; picklable, built on the driver.

    ``client_conf`` holds the user's ``kafka.*`` options (prefix stripped) as sorted pairs,
    see :meth:`conf`. ``poll_timeout_s`` bounds one ``consume()`` call; ``fetch_timeout_s``
    is how long the fetch may make no progress before it fails.
    """

    topic: str
    partition: int
    from_offset: int
    until_offset: int
    bootstrap_servers: str
    client_conf: tuple[tuple[str, str], ...] = ()
    include_headers: bool = False
    fail_on_data_loss: bool = True
    poll_timeout_s: float = 0.1
    fetch_timeout_s: float = 120.0
    max_batch_rows: int = DEFAULT_MAX_BATCH_ROWS

    @staticmethod
    def conf(options: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
        """Normalise a ``kafka.*`` mapping for :attr:`client_conf` (and the pool key)."""
        return tuple(sorted((str(k), str(v)) for k, v in options.items()))

    @property
    def partition_name(self) -> str:
        return partition_name(self.topic, self.partition)

    def describe(self) -> str:
        return f"{self.partition_name} [{self.from_offset}, {self.until_offset})"


def fetch(spec: FetchSpec) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``spec.topic``/``spec.partition`` with
    ``from_offset <= offset < until_offset`` as RecordBatches of :func:`arrow_schema`."""
    if spec.until_offset <= spec.from_offset:
        return
    pool = consumer_pool()
    try:
        entry = pool.acquire((spec.bootstrap_servers, tuple(spec.client_conf)), spec.topic)
    except (KafkaException, ValueError, TypeError) as exc:
        raise OptionError(
            f"Cannot create a Kafka consumer for {spec.describe()} with the kafka.* options "
            f"{dict(spec.client_conf)}: {error_text(exc)}"
        ) from None
    ok = False
    range_fetch = _RangeFetch(spec, entry)
    try:
        yield from range_fetch.run()
        ok = True
    except KafkaGroupError:
        raise
    except KafkaException as exc:
        raise KafkaGroupError(
            f"Fetching {spec.describe()} from {spec.bootstrap_servers!r} failed: {error_text(exc)}"
        ) from None
    finally:
        entry = range_fetch.entry  # replaced if a request of the first went unanswered
        if ok:
            pool.release(entry)
        else:
            entry.close()
        if entry.stale:
            # The topic vanished: no consumer that knew it may fetch it again.
            pool.forget_topic(spec.topic)


class _RangeFetch:
    def __init__(self, spec: FetchSpec, entry: PooledConsumer) -> None:
        self.spec = spec
        self.entry = entry
        self.consumer = entry.consumer
        self.schema = arrow_schema(spec.include_headers)
        self.tp = KafkaTopicPartition(spec.topic, spec.partition)
        # consume() allows <= 1M; the constant columns below are sized to what the range
        # can hold (a small trigger's task must not build 20,000-row columns).
        rows = min(
            max(1, int(spec.max_batch_rows)), 1_000_000, spec.until_offset - spec.from_offset
        )
        self.max_rows = rows
        self._topic_col = pa.repeat(pa.scalar(spec.topic, pa.string()), rows)
        self._partition_col = pa.repeat(pa.scalar(spec.partition, _I32), rows)
        self._ts_type_cols: dict[int, pa.Array] = {}
        self.started = time.monotonic()
        self.last_progress = self.started
        self.last_check = self.started
        self.stop = False

    # ------------------------------------------------------------------ main loop

    def run(self) -> Iterator[pa.RecordBatch]:
        spec = self.spec
        until = spec.until_offset
        self._refresh_if_a_broker_failed()
        self._assign(spec.from_offset)
        next_offset = spec.from_offset
        timeout = spec.poll_timeout_s
        # The cyclic GC is paused while a batch is consumed and converted (never across the
        # yield): the tens of thousands of short-lived tuples and Message objects per batch
        # otherwise trigger collections that cost more than the conversion itself.
        gc_enabled = gc.isenabled()
        while next_offset < until and not self.stop:
            batch = None
            if gc_enabled:
                gc.disable()
            try:
                # self.consumer, not a bound method kept: _renew_consumer replaces it.
                msgs = self.consumer.consume(min(self.max_rows, until - next_offset), timeout)
                now = time.monotonic()
                if msgs:
                    batch, next_offset = self._step(msgs, next_offset, now)
                if (
                    batch is None
                    and not self.stop
                    and now - self.last_progress >= STALL_CHECK_S
                    and now - self.last_check >= STALL_CHECK_S
                ):
                    self.last_check = now
                    next_offset = self._check_position(next_offset, now)
            finally:
                if gc_enabled:
                    gc.enable()
            if batch is not None:
                yield batch

    def _step(
        self, msgs: list[Message], next_offset: int, now: float
    ) -> tuple[pa.RecordBatch | None, int]:
        """Handle one ``consume()`` result: the batch of records in range, the next offset."""
        until = self.spec.until_offset
        batch = None
        errors = list(map(_error, msgs))
        # any(), not count(None): KafkaError.__eq__(None) raises (confluent-kafka 2.x).
        if not any(errors):
            data, events = msgs, []
        else:
            data = [m for m, e in zip(msgs, errors, strict=True) if e is None]
            events = [(m, e) for m, e in zip(msgs, errors, strict=True) if e is not None]
        if data:
            self.last_progress = now
            offsets = list(map(_offset, data))
            if offsets[0] < next_offset:  # never expected; be exact anyway
                skip = bisect_left(offsets, next_offset)
                data, offsets = data[skip:], offsets[skip:]
            if offsets and offsets[-1] >= until:
                # Past the range (possible only across a gap): drop the rest, done.
                cut = bisect_left(offsets, until)
                data, offsets = data[:cut], offsets[:cut]
                self.stop = True
            if data:
                batch = self._batch(data, offsets)
                next_offset = offsets[-1] + 1
            if self.stop:
                next_offset = until
        for msg, err in events:
            next_offset = self._on_event(msg, err, next_offset, now)
        return batch, next_offset

    def _assign(self, offset: int) -> None:
        self.consumer.assign([KafkaTopicPartition(self.spec.topic, self.spec.partition, offset)])
        self.entry.assigned = TopicPartition(self.spec.topic, self.spec.partition)
        self.entry.assigns += 1

    # ------------------------------------------------------------------ Arrow

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

    # ------------------------------------------------------------------ events and stalls

    def _on_event(self, msg: Message, err: KafkaError, next_offset: int, now: float) -> int:
        code = err.code()
        spec = self.spec
        if code == KafkaError._PARTITION_EOF:
            self.entry.connected = True
            self.last_progress = now
            if _offset(msg) >= spec.until_offset:
                # Everything below ``until`` has been delivered; the rest were gaps.
                self.stop = True
                return max(next_offset, spec.until_offset)
            return next_offset
        if code in _OUT_OF_RANGE:
            return self._check_position(next_offset, now, out_of_range=err)
        if code in _GONE:
            self.entry.stale = True
            self._data_loss(
                f"Partition {spec.partition_name} no longer exists on "
                f"{spec.bootstrap_servers!r} ({err.str()}) while fetching offset {next_offset} "
                f"(range {spec.describe()}); the topic was probably deleted.",
                exc_type=TopicNotFoundError,
            )
            self.stop = True
            return next_offset
        if code in _DENIED or err.fatal():
            raise KafkaGroupError(
                f"Fetching {spec.describe()} from {spec.bootstrap_servers!r} failed: "
                f"{err.str()}. Check the ACLs / credentials in the kafka.* options."
            )
        log.debug("fetch %s: transient error %s", spec.describe(), err)
        return next_offset

    def _check_position(
        self, next_offset: int, now: float, out_of_range: KafkaError | None = None
    ) -> int:
        """No progress (or an out-of-range error): compare the position with the watermarks."""
        spec = self.spec
        stalled = now - self.last_progress
        try:
            low, high = self.consumer.get_watermark_offsets(
                self.tp,
                timeout=max(0.5, min(WATERMARK_QUERY_S, spec.fetch_timeout_s - stalled)),
                cached=False,
            )
        except KafkaException as exc:
            self._raise_if_stuck(next_offset, time.monotonic(), error_text(exc))
            self._renew_consumer(next_offset)
            return next_offset
        self.entry.connected = True
        self.entry.errors.connected()
        until = spec.until_offset
        if next_offset < low:
            self._data_loss(
                f"Offsets [{next_offset}, {min(low, until)}) of {spec.partition_name} "
                f"are no longer available: the log start offset is {low} (high watermark "
                f"{high}); the records were deleted (retention) before this fetch of "
                f"{spec.describe()}."
            )
            if low >= until:
                self.stop = True
                return next_offset
            log.warning(
                "Continuing %s from the log start offset %d: %d offset(s) skipped",
                spec.partition_name,
                low,
                low - next_offset,
            )
            self._assign(low)
            self.last_progress = time.monotonic()
            return low
        if next_offset > high or (next_offset == high and high < until and stalled >= END_GRACE_S):
            what = "beyond" if next_offset > high else "at"
            self.entry.stale = True  # the topic may have been re-created
            self._data_loss(
                f"Fetch position {next_offset} of {spec.partition_name} is {what} the "
                f"high watermark {high} (log start {low}) but the range {spec.describe()} asks "
                f"for records up to {until - 1}; the partition was truncated, or the topic "
                "was deleted and re-created."
            )
            self.stop = True
            return next_offset
        if out_of_range is not None:
            log.debug(
                "fetch %s: %s, but %d in [%d, %d]",
                spec.describe(),
                out_of_range,
                next_offset,
                low,
                high,
            )
            self._assign(next_offset)
        self._raise_if_stuck(next_offset, now, "")
        return next_offset

    def _refresh_if_a_broker_failed(self) -> None:
        """A pooled consumer that lost a broker connection while it sat idle refreshes its
        metadata before it fetches: librdkafka refreshed it once at the disconnect, before
        Kafka elected new leaders, and would fetch from the dead leader first. ``poll(0)`` of
        the unassigned consumer serves the error callbacks that tell."""
        entry = self.entry
        self.consumer.poll(0)
        if entry.errors.connectivity_errors != entry.refreshed_at_errors:
            entry.refreshed_at_errors = entry.errors.connectivity_errors
            self._refresh_leader()

    def _renew_consumer(self, next_offset: int) -> None:
        """The leader did not answer the watermark query: go on from ``next_offset`` with a
        new consumer, which asks a broker that answers who leads the partition now. This one
        would send its metadata refreshes to the broker that did not answer ("Unanswered
        handles" in :mod:`spark_kafka_group.kafka.config`): after a leader's SIGKILL or a
        hang, a fetch under way read on about 0.5 s after Kafka named the new leader."""
        self.entry = consumer_pool().replace(self.entry)
        self.consumer = self.entry.consumer
        self._assign(next_offset)

    def _refresh_leader(self) -> None:
        """Ask a live broker for the partition's metadata, so that the consumer can learn the
        leader Kafka elected after the old one died. librdkafka refreshes its metadata once
        when a leader's connection drops, before the controller has fenced that broker;
        Kafka's Java consumer refreshes on every disconnect."""
        try:
            self.consumer.list_topics(self.spec.topic, timeout=SEND_TIMEOUT_S)
        except KafkaException as exc:
            log.debug("fetch %s: metadata refresh failed: %s", self.spec.describe(), exc)

    def _raise_if_stuck(self, next_offset: int, now: float, last: str) -> None:
        spec = self.spec
        stalled = now - self.last_progress
        errors = self.entry.errors
        fast = (
            not self.entry.connected
            and errors.all_brokers_down_at is not None
            and now - self.started >= min(UNREACHABLE_FAST_FAIL_S, spec.fetch_timeout_s)
        )
        if errors.hopeless is not None:
            raise BrokerUnavailableError(
                f"Fetching {spec.describe()} at offset {next_offset}: "
                + refused_message(spec.bootstrap_servers, errors.hopeless)
            )
        if fast or stalled >= spec.fetch_timeout_s:
            reason = errors.reason() or last
            raise BrokerUnavailableError(
                f"Fetching {spec.describe()} made no progress at offset {next_offset} for "
                f"{stalled:.0f}s. "
                + unreachable_message(spec.bootstrap_servers, round(stalled, 1), reason)
            )

    def _data_loss(
        self, message: str, exc_type: type[KafkaGroupError] = OffsetOutOfRangeError
    ) -> None:
        if self.spec.fail_on_data_loss:
            raise exc_type(
                message + " Some data may have been lost. If that is acceptable, set the "
                "option failOnDataLoss=false to skip it with a warning."
            )
        log.warning("%s Skipping it because failOnDataLoss=false.", message)
