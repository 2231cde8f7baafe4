"""Helpers to run real kafka-group streaming queries and collect what each batch read. (The
steady producer and the group-log reader the benchmarks share are in
:mod:`spark_kafka_group.testing`.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from spark_kafka_group.testing.waiting import wait_until


@dataclass
class Collected:
    """Rows per micro-batch, gathered by a foreachBatch sink in the test process."""

    batches: dict[int, list[tuple[int, int, bytes | None]]] = field(default_factory=dict)
    #: Wall-clock time (s) at which each batch reached the sink, with all its rows.
    times: dict[int, float] = field(default_factory=dict)
    #: Wall-clock time (s) at which each batch's sink began, before its rows were fetched.
    began: dict[int, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sink(self, frame: DataFrame, batch_id: int) -> None:
        began = time.time()  # collect() fetches the batch's records from Kafka
        rows = frame.select("partition", "offset", "value").collect()
        with self.lock:
            self.batches[batch_id] = [(r.partition, r.offset, r.value) for r in rows]
            self.times[batch_id] = time.time()
            self.began[batch_id] = began

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
    collected: Collected | Callable[[DataFrame, int], None],
    *,
    available_now: bool = True,
    processing_time: str = "500 milliseconds",
) -> StreamingQuery:
    """A kafka-group query whose foreachBatch sink is ``collected``'s (or the function given)."""
    reader = spark.readStream.format("kafka-group")
    for key, value in options.items():
        reader = reader.option(key, value)
    sink = collected.sink if isinstance(collected, Collected) else collected
    writer = reader.load().writeStream.foreachBatch(sink)
    writer = writer.option("checkpointLocation", checkpoint)
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=processing_time)
    return writer.start()


def stop_between_batches(query: StreamingQuery) -> None:
    """Stop a query between two batches, as a test that checks nothing is read twice must: a
    stop that interrupts a batch whose foreachBatch sink already ran leaves it out of Spark's
    commit log, and the restarted query (or the partition's next owner) reads it again, which
    at-least-once allows (``check_delivery`` does) and exactly-once checks do not."""
    wait_until(
        lambda: not query.status["isTriggerActive"],
        60,
        "the query between two batches",
        poll_s=0.02,
    )
    query.stop()


def run_available_now(
    spark: SparkSession, options: Mapping[str, str], checkpoint: str, *, timeout_s: int = 180
) -> Collected:
    """Run a query with Trigger.AvailableNow to completion. Its member closes (the final
    commit, the LEAVE) in the streaming-source process, which the JVM does not wait for: this
    may return before the group log has them."""

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
