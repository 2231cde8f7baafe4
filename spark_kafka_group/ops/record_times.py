"""The timestamp of the first record a group has not read yet, per partition: what the
exporter's lag in seconds is measured from.

Lag in seconds of a partition = the exporter's clock - the timestamp of the record at the
committed offset (the next record to read), 0 when nothing is left to read. It is read from
the record itself (one small fetch per lagging partition, at most once per cache window), not
interpolated from earlier log end offsets as kafka-lag-exporter does: it is right from the
first scrape and after a restart, and it needs no history. The timestamp is the record's
(CreateTime: the producer's clock; LogAppendTime: the broker's), so a producer whose clock is
off shows as lag off by as much.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from spark_kafka_group.group import TopicPartition
from spark_kafka_group.kafka.config import client_config

log = logging.getLogger(__name__)

#: One wait for records (seconds).
POLL_S = 0.2
#: Enough for the first batch of a partition; the broker returns at least one batch anyway.
FETCH_BYTES = 64 * 1024


def first_unread_timestamps(
    bootstrap_servers: str,
    client_conf: Mapping[str, str] | None,
    positions: Mapping[TopicPartition, int],
    *,
    timeout_s: float = 5.0,
) -> dict[TopicPartition, int]:
    """``{partition: timestamp ms}`` of the first record at or after each position (epoch ms).

    A partition missing from the answer had no record there within ``timeout_s`` (nothing
    left, or the broker did not answer): its lag in seconds is not served rather than guessed.
    """
    if not positions:
        return {}
    conf = client_config(bootstrap_servers, dict(client_conf or {}))
    conf.update(
        {
            # Assigned, never subscribed: no group is joined and nothing is committed.
            "group.id": "spark-kafka-group-exporter",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "max.partition.fetch.bytes": FETCH_BYTES,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer = Consumer(conf)
    found: dict[TopicPartition, int] = {}
    try:
        consumer.assign(
            [KafkaTopicPartition(tp.topic, tp.partition, int(o)) for tp, o in positions.items()]
        )
        # Bounded by polls of POLL_S each (librdkafka's wait), not by a clock: the exporter's
        # clock may be a test's, which does not move while this waits.
        for _ in range(max(1, round(timeout_s / POLL_S))):
            if len(found) == len(positions):
                break
            for msg in consumer.consume(num_messages=500, timeout=POLL_S):
                if msg.error() is not None:
                    continue
                tp = TopicPartition(str(msg.topic()), int(msg.partition() or 0))
                kind, ts = msg.timestamp()
                if tp in found or tp not in positions or kind == TIMESTAMP_NOT_AVAILABLE:
                    continue
                found[tp] = int(ts)
                consumer.pause([KafkaTopicPartition(tp.topic, tp.partition)])
    finally:
        consumer.close()
    if len(found) < len(positions):
        log.info(
            "no record timestamp within %.1f s for %d partition(s)",
            timeout_s, len(positions) - len(found),
        )  # fmt: skip
    return found
