"""A steady Kafka producer for tests and benchmarks that read while records keep arriving."""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import Producer


class SteadyProducer:
    """Produces ``per_round`` records to every partition every ``interval_s``, in a thread.

    One producer for the whole run, and every record a produce batch of its own
    (``batch.num.messages=1``), so the embedded broker's ListOffsets(latest) is exact at any
    moment (docs/contributing.md, "Test environment facts"). ``idempotent`` (Kafka's
    idempotent producer, acks=all) is for clusters whose brokers fail under it. Rounds start
    every ``interval_s`` whatever a round took. :attr:`produced` counts the records the broker
    acknowledged, per partition; record ``i`` of partition ``p`` has key ``k<i>`` and value
    ``v<p>-<i>``.
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
