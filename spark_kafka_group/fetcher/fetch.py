"""Executor-side fetch of offset ranges into Arrow (Kafka's ``Fetcher``).

:func:`fetch` gets everything it needs from pickled :class:`FetchSpec` s; the only state it
keeps is the per-process consumer pool (:mod:`.pool`). A task's ranges (distinct partitions)
are fetched together by one consumer assigned all of them; the records in each
``[from_offset, until_offset)`` come back in ``pyarrow.RecordBatch`` es, one per ``consume()``
(of several partitions), each partition's records in offset order.

When a range ends, given that offsets may have gaps (compaction, transaction markers,
aborted records under read_committed):

* a record at or beyond ``until - 1`` arrives, or
* librdkafka reports end of partition (``enable.partition.eof``) at an offset >= ``until``:
  every record below ``until`` has been delivered.

When no range makes progress, the loop asks the broker for the watermarks of each stalled
partition (at most twice a second) and decides: below the log start or beyond the high
watermark is out of range (data loss, or a wrong range); at the end of a partition that ends
before ``until`` is data loss after a grace period; otherwise it waits, up to
``fetch_timeout_s`` without progress, then fails with the servers and the positions in the
message. ``failOnDataLoss=false`` turns data loss into a
WARNING and skips to the log start (or stops).

Each range's position is a :class:`~.ranges.FetchRange`; the conversion to Arrow is
:class:`~.ranges.ArrowRecords`'.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from itertools import chain
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, KafkaException, Message

from spark_kafka_group.errors import (
    BrokerUnavailableError,
    KafkaGroupError,
    OffsetOutOfRangeError,
    OptionError,
    TopicNotFoundError,
)
from spark_kafka_group.fetcher.pool import PooledConsumer, PoolKey, consumer_pool
from spark_kafka_group.fetcher.ranges import ArrowRecords, FetchRange, task_max_rows
from spark_kafka_group.fetcher.schema import payload_bytes
from spark_kafka_group.fetcher.spec import DESCRIBED_RANGES, FetchSpec, describe_ranges
from spark_kafka_group.kafka.config import (
    SEND_TIMEOUT_S,
    error_text,
    refused_message,
    unreachable_message,
)

log = logging.getLogger(__name__)

#: Without progress, ask the broker for the watermarks this often.
STALL_CHECK_S = 0.5
#: A partition that ends before ``until`` for this long is data loss (not a slow broker).
END_GRACE_S = 2.0
#: How long a stalled fetch waits for the leader's watermarks. The leader answers within
#: milliseconds; one that does not is dead or hung, and the fetch goes on with a new consumer.
WATERMARK_QUERY_S = 0.5
#: Fail fast when the client has never reached any broker and all are down for this long.
UNREACHABLE_FAST_FAIL_S = 10.0
#: Stalled ranges whose watermarks one check asks for (the least recently checked first): a
#: task of hundreds of ranges waiting on a slow broker must not spend its time asking.
RANGES_CHECKED_PER_STALL = 4
#: About this many bytes of keys and values per ``consume()`` (so per batch handed to Spark),
#: within ``max_batch_rows``: records of 1 KiB come 4,000 at a time, of 100 bytes 20,000. A
#: Python worker holds a few batches at once, and their size sets its memory; a smaller batch
#: was no slower (measured over 64 partitions of 1 KiB records: 20,000 rows 291-292k
#: records/s and 300-330 MB resident, 5,000 rows 321-348k/s and 208-225 MB).
BATCH_BYTES = 4 << 20
#: Done ranges leave the assignment together once this share of the task's ranges is done
#: (each ``incremental_unassign`` is a round trip to librdkafka's main thread).
UNASSIGN_SHARE = 8

_I64 = pa.int64()

# Records consumed without an error always carry an offset (the stub's Optional covers
# messages being produced).
_offset = cast(Callable[[Message], int], Message.offset)
_partition = cast(Callable[[Message], int], Message.partition)
_topic = Message.topic
_error = Message.error

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


def fetch(*specs: FetchSpec) -> Iterator[pa.RecordBatch]:
    """Yield the records of each range ``[from_offset, until_offset)`` of ``specs`` as
    RecordBatches of :func:`arrow_schema`: a batch holds the records of one ``consume()``,
    of one or more partitions, each partition's records in offset order.

    The ranges are fetched together, through one pooled consumer assigned all of them at
    once: librdkafka fetches them in its own threads (one request per broker for all of its
    partitions) while this thread converts what has arrived, and a range that is done leaves
    the assignment. So a task of many small ranges pays one assignment and one round trip,
    not one of each per range; the consumer's queue (``queued.max.messages.kbytes``) bounds
    the records waiting in memory, whatever the number of ranges."""
    for together in _fetch_groups([s for s in specs if s.until_offset > s.from_offset]):
        yield from _fetch_together(together)


def _fetch_groups(specs: list[FetchSpec]) -> list[list[FetchSpec]]:
    """``specs`` in groups fetched through one consumer each: one cluster, client
    configuration and schema (``include_headers``) per group, a partition at most once in
    each."""
    groups: list[tuple[tuple[PoolKey, bool], set[tuple[str, int]], list[FetchSpec]]] = []
    for spec in specs:
        key, tp = (_pool_key(spec), spec.include_headers), (spec.topic, spec.partition)
        group = next((g for g in groups if g[0] == key and tp not in g[1]), None)
        if group is None:
            group = (key, set(), [])
            groups.append(group)
        group[1].add(tp)
        group[2].append(spec)
    return [g[2] for g in groups]


def _pool_key(spec: FetchSpec) -> PoolKey:
    return (spec.bootstrap_servers, tuple(spec.client_conf))


def _fetch_together(specs: list[FetchSpec]) -> Iterator[pa.RecordBatch]:
    first = specs[0]
    topics = sorted({s.topic for s in specs})
    pool = consumer_pool()
    try:
        entry = pool.acquire(_pool_key(first), topics)
    except (KafkaException, ValueError, TypeError) as exc:
        raise OptionError(
            f"Cannot create a Kafka consumer for {describe_ranges(specs)} with the kafka.* "
            f"options {dict(first.client_conf)}: {error_text(exc)}"
        ) from None
    ok = False
    task = _TaskFetch(specs, entry)
    try:
        yield from task.run()
        ok = True
    except KafkaGroupError:
        raise
    except KafkaException as exc:
        raise KafkaGroupError(
            f"Fetching {describe_ranges(specs)} from {first.bootstrap_servers!r} failed: "
            f"{error_text(exc)}"
        ) from None
    finally:
        entry = task.entry  # replaced if a request of the first went unanswered
        if ok:
            pool.release(entry)
        else:
            entry.close()
        if entry.stale:
            # A topic vanished: no consumer that knew it may fetch it again.
            for topic in topics:
                pool.forget_topic(topic)


class _TaskFetch:
    """The ranges of one task (distinct partitions of one cluster), fetched together by one
    consumer, which this object owns.

    Its times are on a clock that stops while the task's batches are with Spark (the
    generator suspended at its ``yield``): a stall, and ``fetch_timeout_s``, count the time
    the fetch waited for the broker, not the time Spark took to take the records."""

    def __init__(self, specs: list[FetchSpec], entry: PooledConsumer) -> None:
        first = specs[0]
        self.specs = specs
        self.servers = first.bootstrap_servers
        self.poll_timeout_s = first.poll_timeout_s
        self.fetch_timeout_s = first.fetch_timeout_s
        self.entry = entry
        self.consumer = entry.consumer
        #: Seconds the task spent suspended, handing batches over: not on its clock.
        self.suspended = 0.0
        self.started = self._now()
        self.last_progress = self.started
        self.last_check = self.started
        self.ranges = {(s.topic, s.partition): FetchRange(s, self.started) for s in specs}
        self.topics = sorted({s.topic for s in specs})
        self.by_partition = (
            {p: r for (_, p), r in self.ranges.items()} if len(self.topics) == 1 else None
        )
        self.active = dict(self.ranges)
        self.max_rows = task_max_rows(specs)
        self.arrow = ArrowRecords(first.include_headers, self.max_rows, self.topics)
        #: Records per ``consume()``: ``max_rows`` until the first records show their size.
        self.batch_rows = self.max_rows

    def describe(self) -> str:
        return describe_ranges([r.spec for r in self._waiting()] or self.specs)

    def _waiting(self) -> list[FetchRange]:
        """The ranges not done yet."""
        return [r for r in self.active.values() if not r.done]

    def _assign_waiting(self) -> None:
        """Assign the ranges not done yet, each at its position, replacing the assignment."""
        self.consumer.assign([r.at(r.next_offset) for r in self._waiting()])
        self.entry.assigned = True
        self.entry.assigns += 1

    def _now(self) -> float:
        return time.monotonic() - self.suspended

    # ------------------------------------------------------------------ main loop

    def run(self) -> Iterator[pa.RecordBatch]:
        self._refresh_if_a_broker_failed()
        self._assign_waiting()
        # The cyclic GC is paused while a batch is consumed and converted (never across the
        # yield): the tens of thousands of short-lived tuples and Message objects per batch
        # otherwise trigger collections that cost more than the conversion itself.
        gc_enabled = gc.isenabled()
        while self.active:
            batch = None
            if gc_enabled:
                gc.disable()
            try:
                left = sum(r.until - r.next_offset for r in self.active.values())
                # self.consumer, not a bound method kept: _renew_consumer replaces it.
                msgs = self.consumer.consume(min(self.batch_rows, left), self.poll_timeout_s)
                now = self._now()
                if msgs:
                    batch = self._step(msgs, now)
                if (
                    batch is None
                    and self.active
                    and now - self.last_progress >= STALL_CHECK_S
                    and now - self.last_check >= STALL_CHECK_S
                ):
                    self.last_check = now
                    self._check_positions(now)
                self._leave_done()
            finally:
                if gc_enabled:
                    gc.enable()
            if batch is not None:
                handed = time.monotonic()
                yield batch
                self.suspended += time.monotonic() - handed

    def _step(self, msgs: list[Message], now: float) -> pa.RecordBatch | None:
        """Handle one ``consume()`` result: its records in range as one batch."""
        errors = list(map(_error, msgs))
        # any(), not count(None): KafkaError.__eq__(None) raises (confluent-kafka 2.x).
        if not any(errors):
            data, events = msgs, []
        else:
            data = [m for m, e in zip(msgs, errors, strict=True) if e is None]
            events = [(m, e) for m, e in zip(msgs, errors, strict=True) if e is not None]
        batch = None
        if data:
            self.last_progress = now
            self.entry.connected = True
            batch = self._in_range(data, now)
        for msg, err in events:
            self._on_event(msg, err, now)
        if batch is not None:
            size = payload_bytes(batch) / batch.num_rows
            self.batch_rows = max(1, min(self.max_rows, int(BATCH_BYTES / max(size, 1.0))))
        return batch

    def _in_range(self, data: list[Message], now: float) -> pa.RecordBatch | None:
        """The records of ``data`` within their ranges, as one batch (None: none are); each
        range moves past its records. librdkafka hands a partition's records over in runs, so
        the ranges take them by runs (found by Arrow), not record by record."""
        offsets = list(map(_offset, data))
        if len(self.ranges) == 1:
            rng = next(iter(self.ranges.values()))
            lo, hi = rng.take(offsets, now)
            if hi <= lo:
                return None
            if hi - lo < len(data):
                data, offsets = data[lo:hi], offsets[lo:hi]
            return self.arrow.batch(data, offsets, rng.spec.partition)
        parts = list(map(_partition, data))
        keys: list[Any]
        if self.by_partition is not None:
            lookup = cast(Mapping[Any, FetchRange], self.by_partition)
            keys = ids = parts
        else:
            lookup = cast(Mapping[Any, FetchRange], self.ranges)
            keys = list(zip(map(_topic, data), parts, strict=True))
            ids = [id(lookup.get(k)) for k in keys]
        run_ends = pc.run_end_encode(pa.array(ids, _I64)).run_ends.to_pylist()
        kept: list[tuple[int, int]] = []
        start = 0
        for end in run_ends:
            owner = lookup.get(keys[start])
            if owner is not None:
                lo, hi = owner.take(offsets[start:end], now)
                if hi > lo:
                    kept.append((start + lo, start + hi))
            start = end
        if not kept:
            return None
        if sum(hi - lo for lo, hi in kept) < len(data):
            data = list(chain.from_iterable(data[lo:hi] for lo, hi in kept))
            offsets = list(chain.from_iterable(offsets[lo:hi] for lo, hi in kept))
            parts = list(chain.from_iterable(parts[lo:hi] for lo, hi in kept))
        return self.arrow.batch(data, offsets, parts[0] if len(kept) == 1 else parts)

    def _range_of(self, msg: Message) -> FetchRange | None:
        return self.ranges.get((msg.topic(), msg.partition()))  # type: ignore[arg-type]

    def _leave_done(self) -> None:
        """Ranges that are done leave the assignment, so their partitions are not fetched on
        (their records past the range would fill the queue): together, once
        1/:data:`UNASSIGN_SHARE` of the task's ranges are done; the last ones when the
        consumer goes back to the pool."""
        done = [tp for tp, r in self.active.items() if r.done]
        if len(done) == len(self.active):
            self.active.clear()
        elif len(done) >= max(1, len(self.ranges) // UNASSIGN_SHARE):
            self.consumer.incremental_unassign([self.active.pop(tp).tp for tp in done])

    def _reassign(self, rng: FetchRange, offset: int) -> None:
        """Fetch ``rng`` on from ``offset`` (after an out-of-range answer, or data loss)."""
        self.consumer.incremental_unassign([rng.tp])
        self.consumer.incremental_assign([rng.at(offset)])
        rng.next_offset = offset

    # ------------------------------------------------------------------ events and stalls

    def _on_event(self, msg: Message, err: KafkaError, now: float) -> None:
        code = err.code()
        rng = self._range_of(msg)
        if code == KafkaError._PARTITION_EOF:
            self.entry.connected = True
            self.last_progress = now
            if rng is not None and not rng.done:
                rng.last_progress = now
                if _offset(msg) >= rng.until:
                    # Everything below ``until`` has been delivered; the rest were gaps.
                    rng.finish()
            return
        if code in _OUT_OF_RANGE:
            if rng is not None and not rng.done:
                self._check_position(rng, now, out_of_range=err)
            return
        if code in _GONE:
            self.entry.stale = True
            gone = [rng] if rng is not None else self._ranges_of_topic(msg.topic())
            for lost in gone:
                if lost.done:
                    continue
                self._data_loss(
                    lost,
                    f"Partition {lost.spec.partition_name} no longer exists on "
                    f"{self.servers!r} ({err.str()}) while fetching offset {lost.next_offset} "
                    f"(range {lost.spec.describe()}); the topic was probably deleted.",
                    exc_type=TopicNotFoundError,
                )
                lost.finish()
            return
        if code in _DENIED or err.fatal():
            raise KafkaGroupError(
                f"Fetching {self.describe()} from {self.servers!r} failed: "
                f"{err.str()}. Check the ACLs / credentials in the kafka.* options."
            )
        log.debug("fetch %s: transient error %s", self.describe(), err)

    def _ranges_of_topic(self, topic: str | None) -> list[FetchRange]:
        """The active ranges an error about ``topic`` (None: about no topic) concerns."""
        return [r for r in self.active.values() if topic is None or r.spec.topic == topic]

    def _check_positions(self, now: float) -> None:
        """No range made progress: compare stalled ranges' positions with the watermarks
        (:data:`RANGES_CHECKED_PER_STALL` of them, the least recently checked first); go on
        with a new consumer when the leader does not answer."""
        stalled = [r for r in self._waiting() if now - r.last_progress >= STALL_CHECK_S]
        stalled.sort(key=lambda r: r.checked_at)
        for rng in stalled[:RANGES_CHECKED_PER_STALL]:
            rng.checked_at = now
            if not self._check_position(rng, now):
                return
        self._raise_if_stuck(now, "")

    def _check_position(
        self, rng: FetchRange, now: float, out_of_range: KafkaError | None = None
    ) -> bool:
        """Compare ``rng``'s position with its partition's watermarks (after a stall, or an
        out-of-range answer); False when the leader did not answer and the consumer was
        renewed."""
        spec = rng.spec
        try:
            low, high = self.consumer.get_watermark_offsets(
                rng.tp, timeout=WATERMARK_QUERY_S, cached=False
            )
        except KafkaException as exc:
            self._raise_if_stuck(self._now(), error_text(exc))
            self._renew_consumer()
            return False
        self.entry.connected = True
        self.entry.errors.connected()
        until, next_offset = rng.until, rng.next_offset
        stalled = now - rng.last_progress
        if next_offset < low:
            self._data_loss(
                rng,
                f"Offsets [{next_offset}, {min(low, until)}) of {spec.partition_name} "
                f"are no longer available: the log start offset is {low} (high watermark "
                f"{high}); the records were deleted (retention) before this fetch of "
                f"{spec.describe()}.",
            )
            if low >= until:
                rng.finish()
                return True
            log.warning(
                "Continuing %s from the log start offset %d: %d offset(s) skipped",
                spec.partition_name,
                low,
                low - next_offset,
            )
            self._reassign(rng, low)
            rng.last_progress = self._now()
            return True
        if next_offset > high or (next_offset == high and high < until and stalled >= END_GRACE_S):
            what = "beyond" if next_offset > high else "at"
            self.entry.stale = True  # the topic may have been re-created
            self._data_loss(
                rng,
                f"Fetch position {next_offset} of {spec.partition_name} is {what} the "
                f"high watermark {high} (log start {low}) but the range {spec.describe()} asks "
                f"for records up to {until - 1}; the partition was truncated, or the topic "
                "was deleted and re-created.",
            )
            rng.finish()
            return True
        if out_of_range is not None:
            log.debug(
                "fetch %s: %s, but %d in [%d, %d]",
                spec.describe(),
                out_of_range,
                next_offset,
                low,
                high,
            )
            self._reassign(rng, next_offset)
        return True

    def _refresh_if_a_broker_failed(self) -> None:
        """A pooled consumer that lost a broker connection while it sat idle refreshes its
        metadata before it fetches: librdkafka refreshed it once at the disconnect, before
        Kafka elected new leaders, and would fetch from the dead leader first. ``poll(0)`` of
        the unassigned consumer serves the error callbacks that tell."""
        entry = self.entry
        self.consumer.poll(0)
        if entry.errors.connectivity_errors != entry.refreshed_at_errors:
            entry.refreshed_at_errors = entry.errors.connectivity_errors
            self._refresh_leaders()

    def _renew_consumer(self) -> None:
        """The leader did not answer the watermark query: go on from each range's position
        with a new consumer, which asks a broker that answers who leads the partitions now.
        This one would send its metadata refreshes to the broker that did not answer
        ("Unanswered handles" in :mod:`spark_kafka_group.kafka.config`): after a leader's
        SIGKILL or a hang, a fetch under way read on about 0.5 s after Kafka named the new
        leader."""
        self.entry = consumer_pool().replace(self.entry)
        self.consumer = self.entry.consumer
        self._assign_waiting()

    def _refresh_leaders(self) -> None:
        """Ask a live broker for the partitions' metadata, so that the consumer can learn the
        leaders Kafka elected after the old one died. librdkafka refreshes its metadata once
        when a leader's connection drops, before the controller has fenced that broker;
        Kafka's Java consumer refreshes on every disconnect."""
        for topic in self.topics:
            try:
                self.consumer.list_topics(topic, timeout=SEND_TIMEOUT_S)
            except KafkaException as exc:
                log.debug("fetch %s: metadata refresh failed: %s", self.describe(), exc)

    def _raise_if_stuck(self, now: float, last: str) -> None:
        stalled = now - self.last_progress
        errors = self.entry.errors
        fast = (
            not self.entry.connected
            and errors.all_brokers_down_at is not None
            and now - self.started >= min(UNREACHABLE_FAST_FAIL_S, self.fetch_timeout_s)
            and not self._cluster_answers()
        )
        where = "; ".join(r.describe() for r in self._waiting()[:DESCRIBED_RANGES])
        if errors.hopeless is not None:
            raise BrokerUnavailableError(
                f"Fetching {where}: " + refused_message(self.servers, errors.hopeless)
            )
        if fast or stalled >= self.fetch_timeout_s:
            reason = errors.reason() or last
            raise BrokerUnavailableError(
                f"Fetching {where} made no progress for {stalled:.0f}s. "
                + unreachable_message(self.servers, round(stalled, 1), reason)
            )

    def _cluster_answers(self) -> bool:
        """Whether a broker answers a metadata request now. librdkafka reports "all brokers
        down" also when a new client's first bootstrap server refuses before its other
        connections are up (its brokers count as down until connected): a fetch whose
        leader died, with the other brokers up, waits for Kafka to elect a new leader, up
        to ``fetch_timeout_s``; it does not fail as if no broker were reachable."""
        try:
            self.consumer.list_topics(self.topics[0], timeout=WATERMARK_QUERY_S)
        except KafkaException:
            return False
        self.entry.connected = True
        self.entry.errors.connected()
        return True

    def _data_loss(
        self,
        rng: FetchRange,
        message: str,
        exc_type: type[KafkaGroupError] = OffsetOutOfRangeError,
    ) -> None:
        if rng.spec.fail_on_data_loss:
            raise exc_type(
                message + " Some data may have been lost. If that is acceptable, set the "
                "option failOnDataLoss=false to skip it with a warning."
            )
        log.warning("%s Skipping it because failOnDataLoss=false.", message)
