"""End-to-end latency of ``bench_throughput``: record timestamp to the sink, at a steady rate.

A producer process writes ``rate`` records a second, each stamped with its create time, with
librdkafka's default 5 ms linger. The readers take turns, each on a fresh topic, in one run,
after an unmeasured warm-up query (the session's first query starts the Python workers):

1. ``raw``: a plain confluent-kafka consumer assigned every partition (the floor of any
   client; no trigger);
2. ``kafka``: Spark's own Kafka source, ``format("kafka")`` (a JVM source);
3. ``kafka-group``: this source, ``format("kafka-group")``;
4. ``plain``: a minimal pyspark ``DataSourceStreamReader`` over the same topic that joins no
   group: ``latestOffset`` asks for the high watermarks, ``read()`` consumes the range with a
   consumer kept per Python worker (the floor of any Python streaming source).

The Spark readers run with the given trigger (Spark's default: the next batch as soon as the
last one ends; or a processing-time interval) into a ``foreachBatch`` sink, which takes the
batch's record timestamps; a record's latency is the time the sink has it minus its create
time. Each reader's records are measured for ``seconds`` from when it has caught up: at least
``warmup_s`` after its first batch (the join, the first batches), and
:data:`CAUGHT_UP_BATCHES` batches in a row whose oldest record is at most
:data:`CAUGHT_UP_INTERVALS` times the time since the previous batch old. A reader still
working through what piled up while it started delivers records many batch intervals old;
measured then, its p99 is its start, not its steady state. A reader that has not caught up
:data:`CATCH_UP_LIMIT_S` after its first batch is measured anyway, and says so
(:attr:`Latencies.caught_up`).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

#: The fetch settings the plain source shares with the source's consumers.
FETCH_TUNING_KEYS = (
    "max.partition.fetch.bytes",
    "fetch.max.bytes",
    "queued.max.messages.kbytes",
    "queued.min.messages",
    "fetch.wait.max.ms",
    "fetch.queue.backoff.ms",
)

#: A batch is fresh when its oldest record is at most this many times the time since the
#: previous batch old. Batch k starts where batch k-1 ended, at what was the end of the topic
#: when k-1 was planned; so its oldest record's age is about the time since the previous
#: batch plus the previous batch's duration: about twice the batch interval in a steady
#: state, and more while the batches still take longer than the ones after them (a reader
#: working through what piled up while it started).
CAUGHT_UP_INTERVALS = 3.0
#: Fresh batches in a row that make a reader caught up.
CAUGHT_UP_BATCHES = 3
#: Seconds after its first batch by which a reader is measured, caught up or not.
CATCH_UP_LIMIT_S = 60.0

#: Offsets JSON of the plain source: {"<partition>": offset}.
PlainOffsets = dict[str, int]


def produce_steadily(servers: str, topic: str, partitions: int, rate: float, stop: Any) -> None:
    """Producer process: ``rate`` records/s round-robin over the partitions until ``stop``."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": servers,
            # librdkafka's default linger: a produce batch holds the few records of 5 ms.
            "linger.ms": 5,
            "enable.idempotence": False,
            "log_level": 0,
        }
    )
    started = time.monotonic()
    sent = 0
    value = b"v" * 100
    while not stop.is_set():
        due = int((time.monotonic() - started) * rate) - sent
        now_ms = int(time.time() * 1000)
        try:
            for _ in range(max(0, due)):
                producer.produce(topic, value, key=b"%08d" % sent,
                                 partition=sent % partitions, timestamp=now_ms)  # fmt: skip
                sent += 1
        except BufferError:  # the broker does not keep up: wait, do not count it as sent
            print(f"producer: {len(producer)} records waiting for the broker", flush=True)
            producer.poll(1.0)
            started = time.monotonic() - sent / rate
            continue
        producer.poll(0)
        time.sleep(0.001)
    producer.flush(10)


@dataclass
class Latencies:
    """Per-record latencies (ms) of one reader, kept once it has caught up (the module's
    docstring)."""

    name: str
    warmup_s: float
    values: list[float] = field(default_factory=list)
    batches: int = 0
    first_batch_s: float | None = None  # wall clock of the first batch's arrival
    measuring_since: float | None = None  # wall clock from which batches are measured
    caught_up: bool = False  # False: measured from CATCH_UP_LIMIT_S on without catching up
    fresh_in_a_row: int = 0
    last_batch_s: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Pooled: the rounds whose records these are (:func:`pooled`).
    rounds: list[Latencies] = field(default_factory=list)

    def add(self, timestamps_ms: list[int], now_s: float) -> None:
        if not timestamps_ms:
            return
        with self.lock:
            self.batches += 1
            if self.measuring_since is None:
                self._warm_up(min(timestamps_ms) / 1000.0, now_s)
                return
            now_ms = now_s * 1000.0
            self.values.extend(now_ms - ts for ts in timestamps_ms)

    def _warm_up(self, oldest_s: float, now_s: float) -> None:
        """One batch of the warm-up; the next batches are measured if it leaves the reader
        caught up, or at CATCH_UP_LIMIT_S."""
        if self.first_batch_s is None:
            self.first_batch_s = now_s
        since_last = None if self.last_batch_s is None else now_s - self.last_batch_s
        self.last_batch_s = now_s
        fresh = since_last is not None and now_s - oldest_s <= CAUGHT_UP_INTERVALS * since_last
        self.fresh_in_a_row = self.fresh_in_a_row + 1 if fresh else 0
        warmed = now_s >= self.first_batch_s + self.warmup_s
        self.caught_up = warmed and self.fresh_in_a_row >= CAUGHT_UP_BATCHES
        if self.caught_up or now_s >= self.first_batch_s + CATCH_UP_LIMIT_S:
            self.measuring_since = now_s

    def measuring(self) -> bool:
        with self.lock:
            return self.measuring_since is not None

    def warm_up_shown(self) -> str:
        """How long the warm-up took, for the report."""
        if self.rounds:
            return "; ".join(r.warm_up_shown() for r in self.rounds)
        if self.measuring_since is None or self.first_batch_s is None:
            return "never measured"
        took = f"{self.measuring_since - self.first_batch_s:.0f} s warm-up"
        return took if self.caught_up else f"{took}, NOT caught up"

    def percentile(self, q: float) -> float:
        with self.lock:
            values = sorted(self.values)
        if not values:
            return float("nan")
        return values[min(len(values) - 1, int(q / 100.0 * len(values)))]


def measure_raw(
    servers: str, topic: str, partitions: int, warmup_s: float, seconds: float
) -> Latencies:
    """A plain consumer assigned every partition at its end, polling until ``seconds`` pass."""
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    result = Latencies("raw", warmup_s)
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": f"bench-latency-raw-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(partitions)])
    budget_s = 120 + CATCH_UP_LIMIT_S
    deadline = time.monotonic() + budget_s
    while not result.measuring() or time.time() < (result.measuring_since or 0.0) + seconds:
        if time.monotonic() > deadline:
            raise RuntimeError(f"raw: no records to measure in {budget_s:.0f} s")
        msgs = consumer.consume(num_messages=1000, timeout=0.1)
        now = time.time()
        result.add([m.timestamp()[1] for m in msgs if m.error() is None], now)
    consumer.close()
    return result


def timestamp_sink(result: Latencies) -> Any:
    """A foreachBatch function noting the latency of every record of the batch."""

    def sink(frame: Any, batch_id: int) -> None:
        # Through Arrow, not Row objects: at 20,000 records/s collect()'s pickled rows would
        # weigh on the measurement (the same for every reader).
        stamps = frame.selectExpr("unix_millis(timestamp) AS ts").toArrow()
        result.add(stamps.column("ts").to_pylist(), time.time())

    return sink


def measure_spark(
    spark: Any,
    name: str,
    reader: Any,
    work: str,
    warmup_s: float,
    seconds: float,
    trigger_s: float | None = None,
) -> tuple[Latencies, list[dict[str, Any]]]:
    """Run ``reader`` (a streaming DataFrameReader, loaded here) into the timestamp sink, with
    Spark's default trigger or a ``trigger_s`` processing-time trigger; its latencies and the
    progress of the measured batches."""
    result = Latencies(name, warmup_s)
    writer = (
        reader.load()
        .writeStream.foreachBatch(timestamp_sink(result))
        .option("checkpointLocation", os.path.join(work, f"checkpoint-latency-{uuid.uuid4().hex}"))
    )
    if trigger_s is not None:
        writer = writer.trigger(processingTime=f"{trigger_s} seconds")
    query = writer.start()
    try:
        # The first record (a Spark application's first query starts its Python workers),
        # then the warm-up until caught up.
        deadline = time.monotonic() + 120 + CATCH_UP_LIMIT_S
        while not result.measuring():
            if not query.isActive:
                raise RuntimeError(f"{name}: query failed: {query.exception()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name}: {result.batches} batches, none measured, in time")
            time.sleep(0.1)
        time.sleep(seconds)
        since = result.measuring_since or 0.0
        progress = [
            p
            for p in query.recentProgress
            if p.get("numInputRows", 0) > 0 and _epoch_s(p["timestamp"]) >= since
        ]
    finally:
        query.stop()
    return result, progress


def _epoch_s(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def phase_means(progress: list[dict[str, Any]]) -> str:
    """Mean ms per Spark progress phase over the batches, largest first."""
    if not progress:
        return "(no batch)"
    sums: dict[str, float] = {}
    for p in progress:
        for phase, ms in p["durationMs"].items():
            sums[phase] = sums.get(phase, 0.0) + ms
    means = {k: v / len(progress) for k, v in sums.items()}
    return ", ".join(f"{k}={v:.0f}" for k, v in sorted(means.items(), key=lambda kv: -kv[1]))


# ---------------------------------------------------------------------------- plain source


def plain_source() -> Any:
    """The do-nothing Python streaming source (pickled by value): no group, no commits."""
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    from spark_kafka_group.fetcher.pool import FETCH_DEFAULTS
    from spark_kafka_group.fetcher.schema import arrow_schema, spark_schema_ddl

    consumers: dict[str, Any] = {}  # one consumer per Python worker and servers

    def consumer_for(servers: str) -> Any:
        from confluent_kafka import Consumer

        if servers not in consumers:
            consumers[servers] = Consumer(
                {
                    "bootstrap.servers": servers,
                    "group.id": "bench-plain",
                    "enable.auto.commit": False,
                    "log_level": 0,
                    # The source's fetch settings, so that the two compare code, not settings.
                    **{k: FETCH_DEFAULTS[k] for k in FETCH_TUNING_KEYS if k in FETCH_DEFAULTS},
                }
            )
        return consumers[servers]

    class PlainRange(InputPartition):
        def __init__(self, partition: int, start: int, end: int) -> None:
            super().__init__((partition, start, end))
            self.partition, self.start, self.end = partition, start, end

    class PlainReader(DataSourceStreamReader):
        def __init__(self, options: dict[str, str]) -> None:
            self.servers = options["servers"]
            self.topic = options["topic"]
            self.count = int(options["partitions"])
            self._admin: Any = None

        def _ends(self) -> PlainOffsets:
            from confluent_kafka import TopicPartition
            from confluent_kafka.admin import AdminClient, OffsetSpec

            if self._admin is None:
                self._admin = AdminClient({"bootstrap.servers": self.servers, "log_level": 0})
            futures = self._admin.list_offsets(
                {TopicPartition(self.topic, p): OffsetSpec.latest() for p in range(self.count)}
            )
            return {str(tp.partition): f.result().offset for tp, f in futures.items()}

        def initialOffset(self) -> PlainOffsets:
            return self._ends()

        def latestOffset(self, start: Any = None, limit: Any = None) -> PlainOffsets:
            return self._ends()

        def partitions(self, start: PlainOffsets, end: PlainOffsets) -> list[InputPartition]:
            return [
                PlainRange(int(p), start.get(p, 0), e)
                for p, e in end.items()
                if e > start.get(p, 0)
            ]

        def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
            from confluent_kafka import TopicPartition

            assert isinstance(partition, PlainRange)
            consumer = consumer_for(self.servers)
            consumer.assign([TopicPartition(self.topic, partition.partition, partition.start)])
            rows: list[Any] = []
            position = partition.start
            while position < partition.end:
                # consume() waits for num_messages or the timeout: ask for what is left.
                wanted = min(1000, partition.end - position)
                for m in consumer.consume(num_messages=wanted, timeout=0.1):
                    if m.error() is None and m.offset() < partition.end:
                        rows.append(m)
                        position = m.offset() + 1
            consumer.unassign()
            ts = [m.timestamp() for m in rows]
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array([m.key() for m in rows], pa.binary()),
                    pa.array([m.value() for m in rows], pa.binary()),
                    pa.array([self.topic] * len(rows), pa.string()),
                    pa.array([partition.partition] * len(rows), pa.int32()),
                    pa.array([m.offset() for m in rows], pa.int64()),
                    pa.array([t[1] * 1000 for t in ts], pa.timestamp("us", tz="UTC")),
                    pa.array([t[0] - 1 for t in ts], pa.int32()),
                ],
                schema=arrow_schema(False),
            )

        def commit(self, end: PlainOffsets) -> None:
            pass

    class PlainSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench-plain-kafka"

        def schema(self) -> str:
            return spark_schema_ddl(False)

        def streamReader(self, schema: Any) -> DataSourceStreamReader:
            return PlainReader(dict(self.options))

    return PlainSource


# ---------------------------------------------------------------------------- the run


#: The readers of a latency run, in the order they take turns.
READERS = ("raw", "kafka", "kafka-group", "plain")


@dataclass
class LatencyRun:
    """One rate and trigger, one round or several pooled: each reader's latencies, and each
    Spark reader's query progress over the ``seconds`` it was measured."""

    readers: dict[str, Latencies]
    progress: dict[str, list[dict[str, Any]]]
    seconds: float

    def phases(self, name: str) -> str:
        """Mean ms per Spark phase of reader ``name``."""
        return phase_means(self.progress[name])

    def batches_per_s(self, name: str) -> float:
        return len(self.progress[name]) / self.seconds


def pooled(rounds: list[LatencyRun]) -> LatencyRun:
    """The rounds of one rate and trigger as one run: each reader's records and batches of
    every round."""
    run = LatencyRun({}, {}, sum(r.seconds for r in rounds))
    for one in rounds:
        for name, latencies in one.readers.items():
            run.readers.setdefault(name, Latencies(name, latencies.warmup_s))
            run.readers[name].values.extend(latencies.values)
            run.readers[name].rounds.append(latencies)
        for name, progress in one.progress.items():
            run.progress.setdefault(name, []).extend(progress)
    return run


def warm_up(spark: Any, servers: str, topic: str, partitions: int, work: str, *, rate: float,
            warmup_s: float) -> None:  # fmt: skip
    """An unmeasured query: the session's first streaming query starts the Python workers and
    warms the JVM; measured first, a reader would start with a backlog."""
    spark.dataSource.register(plain_source())
    with producing(servers, f"{topic}-warmup", partitions, rate):
        reader = spark_reader(spark, "plain", servers, f"{topic}-warmup", partitions, work, {})
        measure_spark(spark, "warmup", reader, work, warmup_s, 0.0)


def measure(
    spark: Any,
    servers: str,
    topic: str,
    partitions: int,
    work: str,
    *,
    rate: float,
    warmup_s: float,
    seconds: float,
    readers: tuple[str, ...] = READERS,
    trigger_s: float | None = None,
    source_options: dict[str, dict[str, str]] | None = None,
) -> LatencyRun:
    """The ``readers`` take turns (in :data:`READERS` order), each on a fresh topic
    ``<topic>-<reader>`` with the producer writing ``rate`` records a second. ``raw`` has no
    trigger; the Spark readers use ``trigger_s`` (None: Spark's default) and their options in
    ``source_options`` (by reader name)."""
    spark.dataSource.register(plain_source())
    run = LatencyRun({}, {}, seconds)
    for name in (r for r in READERS if r in readers):
        with producing(servers, f"{topic}-{name}", partitions, rate):
            if name == "raw":
                run.readers[name] = measure_raw(
                    servers, f"{topic}-{name}", partitions, warmup_s, seconds
                )
                continue
            reader = spark_reader(
                spark, name, servers, f"{topic}-{name}", partitions, work,
                (source_options or {}).get(name, {}),
            )  # fmt: skip
            run.readers[name], run.progress[name] = measure_spark(
                spark, name, reader, work, warmup_s, seconds, trigger_s
            )
    return run


def spark_reader(
    spark: Any,
    name: str,
    servers: str,
    topic: str,
    partitions: int,
    work: str,
    source_options: dict[str, str],
) -> Any:
    """The streaming DataFrameReader of one Spark reader, from the topic's end."""
    if name == "plain":
        return (
            spark.readStream.format("bench-plain-kafka")
            .option("servers", servers)
            .option("topic", topic)
            .option("partitions", str(partitions))
        )
    reader = (
        spark.readStream.format(name)
        .option("kafka.bootstrap.servers", servers)
        .option("subscribe", topic)
        .option("startingOffsets", "latest")
    )
    if name == "kafka-group":
        reader = reader.option("groupId", f"bench-latency-{uuid.uuid4().hex[:6]}").option(
            "groupStore", os.path.join(work, "groups")
        )
    for k, v in source_options.items():
        reader = reader.option(k, v)
    return reader


@contextlib.contextmanager
def producing(servers: str, topic: str, partitions: int, rate: float) -> Iterator[None]:
    """A fresh ``topic`` with a producer process writing ``rate`` records a second to it."""
    from spark_kafka_group.quickstart.sample_data import create_topic

    create_topic(servers, topic, partitions)
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    producer = ctx.Process(
        target=produce_steadily, args=(servers, topic, partitions, rate, stop), daemon=True
    )
    producer.start()
    try:
        time.sleep(1.0)  # the producer's connection
        yield
    finally:
        stop.set()
        producer.join(30)
