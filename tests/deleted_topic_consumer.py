"""A consumer meets a topic that is deleted and created again; run as a subprocess, since the
crash it looks for (SIGSEGV in librdkafka) kills the process (tests/integration/
test_topic_deletion.py).

``python -m tests.deleted_topic_consumer SERVERS client``: a plain confluent-kafka consumer
assigns a partition, polls one record and unassigns; the topic is deleted at once (a fetch may
still be in flight), created again and written; the same consumer reads it again.

``python -m tests.deleted_topic_consumer SERVERS pool``: the same through the source's fetch
and its consumer pool, as a Python worker runs one batch before and one after.

Prints ``survived <values>`` and exits 0 if the process lived through it.
"""

from __future__ import annotations

import sys
import time
import uuid

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from spark_kafka_group.quickstart.sample_data import create_topic, produce
from spark_kafka_group.testing.waiting import wait_until


def _write(servers: str, topic: str, values: list[bytes]) -> None:
    create_topic(servers, topic, 1)
    produce(servers, topic, ((0, None, v) for v in values))


def _delete(servers: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": servers, "log_level": 0})
    admin.delete_topics([topic])[topic].result(15)
    wait_until(lambda: topic not in admin.list_topics(timeout=5).topics, 30, "the topic to go")


def _poll_one(consumer: Consumer, topic: str) -> bytes:
    consumer.assign([TopicPartition(topic, 0, 0)])
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            consumer.unassign()
            return message.value() or b""
    raise AssertionError(f"no record of {topic} within 15 s")


def client(servers: str, topic: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": "deleted-topic-probe",
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
            "log_level": 0,
        }
    )
    _write(servers, topic, [b"old"])
    seen = [_poll_one(consumer, topic)]
    _delete(servers, topic)
    time.sleep(1.0)
    _write(servers, topic, [b"new"])
    seen.append(_poll_one(consumer, topic))
    time.sleep(1.0)
    consumer.close()
    return seen


def pool(servers: str, topic: str) -> list[bytes]:
    from spark_kafka_group.fetcher import FetchSpec, consumer_pool, fetch

    def read() -> list[bytes]:
        spec = FetchSpec(topic, 0, 0, 1, servers)
        return [v for batch in fetch(spec) for v in batch.column("value").to_pylist()]

    _write(servers, topic, [b"old"])
    seen = read()
    time.sleep(1.0)  # the batch is over; the consumer waits in the pool
    _delete(servers, topic)
    time.sleep(1.0)
    _write(servers, topic, [b"new"])
    seen += read()
    time.sleep(1.0)
    consumer_pool().clear()
    return seen


def main() -> None:
    servers, mode = sys.argv[1], sys.argv[2]
    topic = f"deleted-{mode}-{uuid.uuid4().hex[:8]}"
    seen = {"client": client, "pool": pool}[mode](servers, topic)
    print("survived", b",".join(seen).decode(), flush=True)


if __name__ == "__main__":
    main()
