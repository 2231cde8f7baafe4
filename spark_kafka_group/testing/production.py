"""A steady Kafka producer for tests and benchmarks that read while records keep arriving."""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import Producer

from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.kafka.cluster import KafkaCluster


class SteadyProducer:
    """Produces ``per_round`` records to every partition every ``interval_s``, in a thread.

    One producer for the whole run, and every record a produce batch of its own
    (``batch.num.messages=1``), so the embedded broker's ListOffsets(latest) is exact at any
    moment (docs/contributing.md, "Test environment facts"). ``idempotent`` (Kafka's
    idempotent producer, acks=all) is for clusters whose brokers fail under it. Rounds start
    every ``interval_s`` whatever a round took. :attr:`produced` counts the records the broker
    acknowledged so far, per partition; record ``i`` of partition ``p`` has key ``k<i>`` and
    value ``v<p>-<i>``.

    :meth:`stop` returns what the topic holds, its end offsets, not the acknowledged counts: a
    reader must read every record in the log, and the log can hold more records than were
    acknowledged. A delivery that failed may have been written (librdkafka's "possibly
    persisted"), and during a leader change the idempotent producer can write a record twice
    (a known librdkafka defect: an epoch bump after an out-of-order-sequence error on another
    partition). Either way every later record of the partition sits one offset further on, so
    "offsets 0..acknowledged-1" would name the wrong records. :attr:`log_extra` counts such
    records; :attr:`failed` lists the failed deliveries. The topic must be this producer's
    alone.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        partitions: int,
        *,
        per_round: int = 5,
        interval_s: float = 0.2,
        idempotent: bool = False,
    ) -> None:
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap_servers,
                "linger.ms": 0,
                "batch.num.messages": 1,
                # On a cluster whose brokers fail: acks=all, and no record written twice by a
                # retry, so that offsets 0..n-1 are exactly the acknowledged records.
                "enable.idempotence": idempotent,
                "log_level": 0,
                # A produce request in flight to a hung (paused) leader waits this long before
                # the idempotent producer sends it again to the new leader; librdkafka's 60 s
                # default would hold the partition's records well past the failover the tests
                # measure on the reading side.
                **({"socket.timeout.ms": 5000} if idempotent else {}),
            }
        )
        self._bootstrap_servers = bootstrap_servers
        self._topic, self._partitions = topic, partitions
        self._per_round = per_round
        self._interval_s = interval_s
        self.produced: dict[int, int] = dict.fromkeys(range(partitions), 0)
        self.highest_acknowledged: dict[int, int] = {}  # partition: its highest acked offset
        self.failed: list[str] = []  # "partition p: error", a delivery that failed
        self.log_extra = 0  # records in the log beyond the acknowledged ones, set by stop()
        self._log_end: dict[int, int] | None = None
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
        """Stop producing; the topic's end offset per partition (every record of the log, the
        acknowledged ones among them)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._log_end is None:
            left = self._producer.flush(30)
            if left:
                raise RuntimeError(
                    f"SteadyProducer: {left} records of topic {self._topic!r} still undelivered "
                    "30 s after producing stopped; the brokers are not taking writes"
                )
            self._log_end = self._end_offsets()
            beyond = {
                p: offset
                for p, offset in self.highest_acknowledged.items()
                if offset >= self._log_end[p]
            }
            if beyond:
                raise RuntimeError(
                    f"topic {self._topic!r} lost acknowledged records: the highest acknowledged "
                    f"offsets {beyond} are at or past the end offsets {self._log_end}"
                )
            self.log_extra = sum(self._log_end.values()) - sum(self.produced.values())
        return dict(self._log_end)

    def _end_offsets(self) -> dict[int, int]:
        tps = [TopicPartition(self._topic, p) for p in range(self._partitions)]
        with KafkaCluster(self._bootstrap_servers) as cluster:
            return {tp.partition: end for tp, end in cluster.latest_offsets(tps).items()}

    def _delivered(self, error: Any, message: Any) -> None:
        if error is None:
            self.produced[message.partition()] += 1
            p = message.partition()
            self.highest_acknowledged[p] = max(
                message.offset(), self.highest_acknowledged.get(p, -1)
            )
        else:
            self.failed.append(f"partition {message.partition()}: {error}")

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
