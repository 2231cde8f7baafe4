"""Records that a page's example reads but does not write itself: what the page says the
reader's producers wrote. The docs test (tests/integration/test_docs_blocks.py) writes them
before a block whose marker names them (``before=NAME``).

They are written as the producers the page names write them: Confluent's wire format (magic
byte 0, the schema id in 4 bytes big-endian, then the record) with the record encoded by
fastavro, the library confluent-kafka's ``AvroSerializer`` encodes with.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

#: The schema of docs/getting-started.md's Avro example (the producers' writer schema).
ORDER_AVRO_SCHEMA = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "int"}, {"name": "amount", "type": "double"}],
}
#: The id a schema registry gave that schema (any id: the example skips the header).
ORDER_SCHEMA_ID = 1
ORDERS = [{"id": i, "amount": 2.5 * i} for i in range(10)]


def _create_topic(bootstrap_servers: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    for future in admin.create_topics([NewTopic(topic, 2)]).values():
        try:
            future.result(timeout=30)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def _produce(bootstrap_servers: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap_servers})
    for value in values:
        producer.produce(topic, value=value)
    left = producer.flush(30)
    if left:
        raise RuntimeError(f"{left} records for topic {topic!r} not delivered in 30 s")


def confluent_avro(record: dict[str, Any], schema_id: int = ORDER_SCHEMA_ID) -> bytes:
    """One value in Confluent's Avro wire format."""
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(ORDER_AVRO_SCHEMA), record)
    return b"\x00" + struct.pack(">I", schema_id) + body.getvalue()


def orders_avro(bootstrap_servers: str, home: Path) -> None:
    """Topic ``orders-avro``: ten orders, as confluent-kafka's AvroSerializer writes them."""
    _create_topic(bootstrap_servers, "orders-avro")
    _produce(bootstrap_servers, "orders-avro", [confluent_avro(order) for order in ORDERS])


WRITERS: dict[str, Callable[[str, Path], None]] = {"orders-avro": orders_avro}


def write(name: str, bootstrap_servers: str, home: Path) -> None:
    """Write the records ``name`` (a key of :data:`WRITERS`) to the broker; ``home`` is the
    reader's working directory (for files that the producers' side leaves there)."""
    if name not in WRITERS:
        raise KeyError(f"before={name!r}: tests/docs_records.py writes only {sorted(WRITERS)}")
    WRITERS[name](bootstrap_servers, home)
