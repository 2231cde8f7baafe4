"""Helpers to run real kafka-group streaming queries and collect what each batch read, to
produce steadily meanwhile, and to read a group's log (also used by the benchmarks)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

if TYPE_CHECKING:
    from spark_kafka_group.group import GroupRecord


@dataclass
class Collected:
    """Rows per micro-batch, gathered by a foreachBatch sink in the test process."""

    batches: dict[int, list[tuple[int, int, bytes | None]]] = field(default_factory=dict)
    #: Wall-clock time (s) at which each batch reached the sink.
    times: dict[int, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sink(self, frame: DataFrame, batch_id: int) -> None:
        rows = frame.select("partition", "offset", "value").collect()
        with self.lock:
            self.batches[batch_id] = [(r.partition, r.offset, r.value) for r in rows]
            self.times[batch_id] = time.time()

    @property
    def records(self) -> list[tuple[int, int]]:
        with self.lock:
            return sorted((p, o) for rows in self.batches.values() for p, o, _ in rows)

    def first_record_time(self) -> float | None:
        with self.lock:
            return min((self.times[b] for b, rows in self.batches.items() if rows), default=None)

    def count(self) -> int:
        with self.lock:
            return sum(len(rows) for rows in self.batches.values())


def group_records(
    store: str, group: str, *, storage_options: Mapping[str, str] | None = None
) -> list[GroupRecord]:
    """Every record of a group's log, in log order."""
    from spark_kafka_group.store import GroupLog, group_log_uri

    log = GroupLog.open(group_log_uri(store, group), storage_options=storage_options, create=False)
    return [r for _, r in log.read()]


def source_options(
    bootstrap_servers: str, topic: str, group_id: str, group_store: str, **extra: Any
) -> dict[str, str]:
    options = {
        "kafka.bootstrap.servers": bootstrap_servers,
        "subscribe": topic,
        "groupId": group_id,
        "groupStore": group_store,
        "startingOffsets": "earliest",
        # Short timeouts keep the tests fast; the defaults are Kafka's.
        "heartbeatIntervalMs": "500",
        "sessionTimeoutMs": "6000",
        "rebalanceTimeoutMs": "10000",
        "initialRebalanceDelayMs": "0",
    }
    options.update({k: str(v) for k, v in extra.items()})
    return options


def start_query(
    spark: SparkSession,
    options: Mapping[str, str],
    checkpoint: str,
    collected: Collected,
    *,
    available_now: bool = True,
    processing_time: str = "500 milliseconds",
) -> StreamingQuery:
    reader = spark.readStream.format("kafka-group")
    for key, value in options.items():
        reader = reader.option(key, value)
    writer = reader.load().writeStream.foreachBatch(collected.sink)
    writer = writer.option("checkpointLocation", checkpoint)
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=processing_time)
    return writer.start()


def run_available_now(
    spark: SparkSession, options: Mapping[str, str], checkpoint: str, *, timeout_s: int = 180
) -> Collected:
    """Run a query with Trigger.AvailableNow to completion (its member leaves as it ends)."""

    collected = Collected()
    query = start_query(spark, options, checkpoint, collected)
    finished = query.awaitTermination(timeout_s)
    if not finished:
        query.stop()
        raise AssertionError(f"query did not finish within {timeout_s}s")
    if query.exception() is not None:
        raise AssertionError(f"query failed: {query.exception()}")
    return collected


def expected_records(counts: Mapping[int, int], start: Mapping[int, int] | None = None) -> list:
    start = start or {}
    return sorted(
        (p, o) for p, n in counts.items() for o in range(start.get(p, 0), start.get(p, 0) + n)
    )


class SteadyProducer:
    """Produces ``per_round`` records to every partition every ``interval_s``, in a thread.

    One producer for the whole run, and every record a produce batch of its own
    (``batch.num.messages=1``), so the embedded broker's ListOffsets(latest) is exact at any
    moment (docs/design.md, "Test environment facts"). Rounds start every ``interval_s``
    whatever a round took. :attr:`produced` counts the records the broker acknowledged, per
    partition; record ``i`` of partition ``p`` has key ``k<i>`` and value ``v<p>-<i>``.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        partitions: int,
        *,
        per_round: int = 5,
        interval_s: float = 0.2,
    ) -> None:
        from confluent_kafka import Producer

        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap_servers,
                "linger.ms": 0,
                "batch.num.messages": 1,
                "enable.idempotence": False,
                "log_level": 0,
            }
        )
        self._topic, self._partitions = topic, partitions
        self._per_round = per_round
        self._interval_s = interval_s
        self.produced: dict[int, int] = dict.fromkeys(range(partitions), 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="steady-producer")

    def start(self) -> SteadyProducer:
        self._thread.start()
        return self

    def __enter__(self) -> SteadyProducer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> dict[int, int]:
        """Stop producing; the final count per partition."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self._producer.flush(30)
        return dict(self.produced)

    def expected(self) -> list[tuple[int, int]]:
        return sorted((p, o) for p, n in self.produced.items() for o in range(n))

    def _delivered(self, error: Any, message: Any) -> None:
        if error is None:
            self.produced[message.partition()] += 1

    def _run(self) -> None:
        tick = time.monotonic()
        sent = 0
        while not self._stop.is_set():
            for i in range(sent, sent + self._per_round):
                for p in range(self._partitions):
                    self._producer.produce(
                        self._topic, key=b"k%d" % i, value=b"v%d-%d" % (p, i), partition=p,
                        on_delivery=self._delivered,
                    )  # fmt: skip
            sent += self._per_round
            self._producer.flush(30)
            tick += self._interval_s
            self._stop.wait(max(0.0, tick - time.monotonic()))
