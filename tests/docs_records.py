"""Records that a page's example reads but does not write itself: what the page says the
reader's producers wrote. The docs test (tests/integration/test_docs_blocks.py) writes them
before a block whose marker names them (``before=NAME``).

They are written as the producers the page names write them: Confluent's wire format (magic
byte 0, the schema id in 4 bytes big-endian, then the record; for Protobuf the message's
indexes in its schema before the message, the single byte 0 for the first message type), the
Avro record encoded by fastavro, the library confluent-kafka's ``AvroSerializer`` encodes with,
the Protobuf message by the protobuf package, as ``ProtobufSerializer`` does. The Avro
producers register their schema with the suite's schema registry first, as ``AvroSerializer``
does (``auto.register.schemas``), and put the id it gave in each record.
"""

from __future__ import annotations

import io
import json
import struct
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message_factory import GetMessageClass

#: The schema of docs/getting-started.md's Avro example (the producers' writer schema).
ORDER_AVRO_SCHEMA = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "int"}, {"name": "amount", "type": "double"}],
}
#: The subject of that schema: the topic's value, as confluent-kafka's serializers name it.
ORDER_AVRO_SUBJECT = "orders-avro-value"
#: The id a schema registry gave the Protobuf schema (any id: the example skips the header).
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


def confluent_avro(record: dict[str, Any], schema_id: int) -> bytes:
    """One value in Confluent's Avro wire format."""
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(ORDER_AVRO_SCHEMA), record)
    return b"\x00" + struct.pack(">I", schema_id) + body.getvalue()


def register_schema(registry_url: str, subject: str, schema: dict[str, Any]) -> int:
    """Register ``schema`` (Avro) under ``subject`` with a Confluent-compatible registry, the
    request AvroSerializer makes before its first record; the schema's id."""
    request = urllib.request.Request(
        f"{registry_url}/subjects/{subject}/versions",
        data=json.dumps({"schema": json.dumps(schema)}).encode(),
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.load(response)
    if not isinstance(answer, dict) or not isinstance(answer.get("id"), int):
        raise RuntimeError(f"registering {subject!r} at {registry_url} answered {answer!r}")
    return int(answer["id"])


def orders_avro(bootstrap_servers: str, home: Path, registry_url: str) -> None:
    """Topic ``orders-avro``: ten orders, as confluent-kafka's AvroSerializer writes them, their
    schema registered under ``orders-avro-value``."""
    schema_id = register_schema(registry_url, ORDER_AVRO_SUBJECT, ORDER_AVRO_SCHEMA)
    _create_topic(bootstrap_servers, "orders-avro")
    _produce(
        bootstrap_servers, "orders-avro", [confluent_avro(order, schema_id) for order in ORDERS]
    )


def order_proto_file() -> descriptor_pb2.FileDescriptorProto:
    """docs/getting-started.md's orders.proto, as protoc compiles it."""
    proto = descriptor_pb2.FileDescriptorProto(name="orders.proto", syntax="proto3")
    message = proto.message_type.add(name="Order")
    optional = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    for number, (name, kind) in enumerate(
        [("id", descriptor_pb2.FieldDescriptorProto.TYPE_INT32),
         ("amount", descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE)], start=1
    ):  # fmt: skip
        message.field.add(name=name, number=number, type=kind, label=optional, json_name=name)
    return proto


def orders_pb2_module(proto: descriptor_pb2.FileDescriptorProto) -> str:
    """The module ``protoc --python_out=. orders.proto`` writes (its runtime part: no protoc
    runs here), which the page's example imports."""
    serialized = proto.SerializeToString()
    return (
        "from google.protobuf import descriptor_pool as _descriptor_pool\n"
        "from google.protobuf.internal import builder as _builder\n\n"
        f"DESCRIPTOR = _descriptor_pool.Default().AddSerializedFile({serialized!r})\n"
        "_builder.BuildMessageAndEnumDescriptors(DESCRIPTOR, globals())\n"
        '_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, "orders_pb2", globals())\n'
    )


def orders_protobuf(bootstrap_servers: str, home: Path, registry_url: str) -> None:
    """Topic ``orders-protobuf``: ten orders, as confluent-kafka's ProtobufSerializer writes
    them; and the reader's ``orders_pb2.py`` in ``home``."""
    proto = order_proto_file()
    (home / "orders_pb2.py").write_text(orders_pb2_module(proto), encoding="utf-8")
    pool = descriptor_pool.DescriptorPool()
    order = GetMessageClass(
        pool.AddSerializedFile(proto.SerializeToString()).message_types_by_name["Order"]
    )
    header = b"\x00" + struct.pack(">I", ORDER_SCHEMA_ID) + b"\x00"  # message index [0]
    _create_topic(bootstrap_servers, "orders-protobuf")
    _produce(
        bootstrap_servers,
        "orders-protobuf",
        [header + order(**values).SerializeToString() for values in ORDERS],
    )


def events(bootstrap_servers: str, home: Path, registry_url: str) -> None:
    """Topic ``events``: ten records of an application's events (docs/concepts.md's Delta
    example reads them)."""
    _create_topic(bootstrap_servers, "events")
    _produce(bootstrap_servers, "events", [f"event-{i}".encode() for i in range(10)])


#: Each writer takes the broker's bootstrap servers, the reader's working directory (for files
#: that the producers' side leaves there) and the schema registry's URL.
WRITERS: dict[str, Callable[[str, Path, str], None]] = {
    "events": events,
    "orders-avro": orders_avro,
    "orders-protobuf": orders_protobuf,
}


def write(name: str, bootstrap_servers: str, home: Path, registry_url: str) -> None:
    """Write the records ``name`` (a key of :data:`WRITERS`) to the broker; ``home`` is the
    reader's working directory (for files that the producers' side leaves there),
    ``registry_url`` the schema registry's Confluent-compatible API."""
    if name not in WRITERS:
        raise KeyError(f"before={name!r}: tests/docs_records.py writes only {sorted(WRITERS)}")
    WRITERS[name](bootstrap_servers, home, registry_url)
