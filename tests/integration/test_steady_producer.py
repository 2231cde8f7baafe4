"""SteadyProducer's final count is what the topic holds, not what was acknowledged: a record
in the log beyond the acknowledged ones (a failed delivery that was written, or one the
idempotent producer wrote twice in a leader change) moves every later record one offset on,
and a reader must read it too."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from spark_kafka_group.quickstart.sample_data import create_topic
from spark_kafka_group.testing.production import SteadyProducer
from spark_kafka_group.testing.waiting import wait_until

pytestmark = pytest.mark.broker


def test_stop_returns_the_end_offsets_and_counts_the_records_beyond_the_acknowledged(
    bootstrap_servers: str, topic_name: str
) -> None:
    create_topic(bootstrap_servers, topic_name, 2)
    producer = SteadyProducer(bootstrap_servers, topic_name, 2, per_round=3, interval_s=0.05)
    producer.start()
    try:
        wait_until(lambda: min(producer.produced.values()) >= 6, 30, "some records acknowledged")
        # One record the steady producer never saw acknowledged, in partition 1's log.
        other = Producer({"bootstrap.servers": bootstrap_servers})
        other.produce(topic_name, value=b"outside", partition=1)
        assert other.flush(30) == 0
        final = producer.stop()
    finally:
        producer.stop()
    assert producer.failed == []
    assert final[0] == producer.produced[0]
    assert final[1] == producer.produced[1] + 1
    assert producer.log_extra == 1
    assert producer.stop() == final, "a second stop() returns the same ends"
