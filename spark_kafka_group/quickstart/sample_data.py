"""Create topics and produce sample records: for the quickstart, benchmarks and tests.

Produced data always ends with a produce batch of exactly one record per partition, because
the embedded Tansu broker reports the high watermark as the last batch's base offset + 1
(docs/contributing.md, "Test environment facts"). On a real cluster that final flush costs nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(
    bootstrap_servers: str, topic: str, partitions: int, *, timeout_s: float = 30.0
) -> None:
    """Create ``topic`` with ``partitions`` partitions and wait until its metadata shows them."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
    )
    for future in futures.values():
        try:
            future.result(timeout=timeout_s)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=topic, timeout=5)
        meta = md.topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions:
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic!r} did not show {partitions} partitions in metadata")


def produce(
    bootstrap_servers: str,
    topic: str,
    records: Iterable[tuple[int, bytes | None, bytes | None]],
    *,
    headers: list[tuple[str, str | bytes | None]] | None = None,
    producer_config: dict[str, str | int] | None = None,
) -> dict[int, int]:
    """Produce ``(partition, key, value)`` records; return how many went to each partition.

    Ends with one extra flush per partition holding a single record when the previous batch
    to that partition may have held several (see module docstring); that record is counted.
    """
    config: dict[str, str | int] = {
        "bootstrap.servers": bootstrap_servers,
        "linger.ms": 5,
        "enable.idempotence": False,
    }
    config.update(producer_config or {})
    producer = Producer(config)
    counts: dict[int, int] = {}
    for partition, key, value in records:
        while True:
            try:
                producer.produce(topic, value=value, key=key, partition=partition, headers=headers)
                break
            except BufferError:
                producer.poll(0.05)
        counts[partition] = counts.get(partition, 0) + 1
    _flush(producer)
    for partition in sorted(counts):
        producer.produce(
            topic, value=b"end-of-batch", key=None, partition=partition, headers=headers
        )
        _flush(producer)
        counts[partition] += 1
    return counts


def produce_sample(
    bootstrap_servers: str,
    topic: str,
    *,
    partitions: int,
    per_partition: int,
    value_size: int = 0,
    start: int = 0,
) -> dict[int, int]:
    """Produce ``per_partition`` keyed records to each partition (values ``v<i>`` padded)."""

    def gen() -> Iterable[tuple[int, bytes | None, bytes | None]]:
        for i in range(start, start + per_partition):
            for p in range(partitions):
                value = f"v{p}-{i}".encode().ljust(value_size, b".")
                yield p, f"k{i}".encode(), value

    return produce(bootstrap_servers, topic, gen())


def _flush(producer: Producer) -> None:
    remaining = producer.flush(30)
    if remaining:
        raise TimeoutError(f"{remaining} records were not delivered within 30s")
