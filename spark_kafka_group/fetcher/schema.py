"""The row schema: identical to Spark's built-in Kafka source (``format("kafka")``).

``timestampType`` follows the Java client: 0 = CreateTime, 1 = LogAppendTime, -1 = none.
``headers`` (only with ``includeHeaders``) is null for a record without headers, like Spark.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

_BASE_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
_HEADERS_DDL = "headers array<struct<key:string,value:binary>>"

#: Arrow type of the ``headers`` column, as pyspark converts ``array<struct<...>>``.
HEADERS_TYPE = pa.list_(
    pa.field(
        "element",
        pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]),
        nullable=True,
    )
)

TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TIMESTAMP_TYPE),
    pa.field("timestampType", pa.int32()),
]

_SCHEMAS = {
    False: pa.schema(_BASE_FIELDS),
    True: pa.schema([*_BASE_FIELDS, pa.field("headers", HEADERS_TYPE)]),
}


def spark_schema_ddl(include_headers: bool) -> str:
    """The DDL string of the source's schema (as returned by ``DataSource.schema()``)."""
    return f"{_BASE_DDL}, {_HEADERS_DDL}" if include_headers else _BASE_DDL


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema of every RecordBatch :func:`fetch` yields (what pyspark 4.2+ checks:
    ``binary`` not ``large_binary``, ``timestamp[us, tz=UTC]``, all fields nullable)."""
    return _SCHEMAS[bool(include_headers)]


def payload_bytes(batch: pa.RecordBatch) -> int:
    """Bytes of the keys and values of ``batch``, and of its header keys and values: what
    ``maxBytesPerTrigger`` and the size of a batch handed to Spark count."""
    total = 0
    for name in ("key", "value"):
        total += pc.sum(pc.binary_length(batch.column(name))).as_py() or 0
    if "headers" in batch.schema.names:
        headers = pc.list_flatten(batch.column("headers"))
        for name in ("key", "value"):
            total += pc.sum(pc.binary_length(pc.struct_field(headers, name))).as_py() or 0
    return total
