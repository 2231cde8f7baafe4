"""Group records <-> Arrow rows of the group log table.

One row per record: ``log_version`` (the Delta version of the append that wrote it) and ``seq``
(its position in that append) identify it; the record's fields are columns, its payload is
compact JSON. ``schema_version`` is :data:`RECORD_SCHEMA_VERSION` of the writer: a reader
refuses records from a newer one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from spark_kafka_group.errors import IncompatibleGroupStoreError
from spark_kafka_group.group.records import RECORD_SCHEMA_VERSION, GroupRecord

SCHEMA = pa.schema(
    [
        pa.field("log_version", pa.int64(), nullable=False),
        pa.field("seq", pa.int32(), nullable=False),
        pa.field("schema_version", pa.int32(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("timestamp_ms", pa.int64(), nullable=False),
        pa.field("member_id", pa.string()),
        pa.field("instance_id", pa.string()),
        pa.field("generation", pa.int64()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("payload", pa.string(), nullable=False),
    ]
)
#: Columns a table must have to be read as a group log.
REQUIRED_COLUMNS = frozenset(SCHEMA.names)


def to_arrow(records: Sequence[GroupRecord], version: int) -> pa.Table:
    """The rows of ``records`` appended together as log version ``version``."""
    n = len(records)
    return pa.Table.from_arrays(
        [
            pa.array([version] * n, pa.int64()),
            pa.array(range(n), pa.int32()),
            pa.array([RECORD_SCHEMA_VERSION] * n, pa.int32()),
            pa.array([r.kind for r in records], pa.string()),
            pa.array([r.timestamp_ms for r in records], pa.int64()),
            pa.array([r.member_id for r in records], pa.string()),
            pa.array([r.instance_id for r in records], pa.string()),
            pa.array([r.generation for r in records], pa.int64()),
            pa.array([r.topic for r in records], pa.string()),
            pa.array([r.partition for r in records], pa.int32()),
            pa.array([r.offset for r in records], pa.int64()),
            pa.array(
                [json.dumps(r.payload, separators=(",", ":"), sort_keys=True) for r in records],
                pa.string(),
            ),
        ],
        schema=SCHEMA,
    )


def from_arrow(uri: str, table: pa.Table) -> list[tuple[int, GroupRecord]]:
    """The records of rows read from the log at ``uri``: ``(version, record)`` in log order,
    each once."""
    if table.num_rows == 0:
        return []
    table = table.sort_by([("log_version", "ascending"), ("seq", "ascending")])
    table = drop_duplicate_rows(table)
    newest = pc.max(table["schema_version"]).as_py()
    if newest is not None and newest > RECORD_SCHEMA_VERSION:
        raise IncompatibleGroupStoreError(
            f"group log {uri} holds records of schema version {newest}, written by a newer "
            f"spark-kafka-group; this version reads up to {RECORD_SCHEMA_VERSION}. Upgrade "
            "spark-kafka-group on every member of the group"
        )
    cols = {name: table[name].to_pylist() for name in SCHEMA.names if name != "schema_version"}
    decode = PayloadDecoder()
    return [
        (
            version,
            GroupRecord(
                kind=kind,
                timestamp_ms=ts,
                member_id=member,
                instance_id=instance,
                generation=gen,
                topic=topic,
                partition=part,
                offset=off,
                payload=decode(payload),
            ),
        )
        for version, kind, ts, member, instance, gen, topic, part, off, payload in zip(
            cols["log_version"],
            cols["kind"],
            cols["timestamp_ms"],
            cols["member_id"],
            cols["instance_id"],
            cols["generation"],
            cols["topic"],
            cols["partition"],
            cols["offset"],
            cols["payload"],
            strict=True,
        )
    ]


def drop_duplicate_rows(table: pa.Table) -> pa.Table:
    """Keep one row per (log_version, seq) of a sorted table.

    A record is identified by its version and position in the append. Two compactions that
    raced (delta-rs rebases an ``optimize`` commit over a concurrent one without noticing that
    both rewrote the same files) leave every record in two live files; reading must still see
    each record once.
    """
    n = table.num_rows
    if n < 2:
        return table
    versions, seqs = table["log_version"], table["seq"]
    repeat = pc.and_(
        pc.equal(versions.slice(1), versions.slice(0, n - 1)),
        pc.equal(seqs.slice(1), seqs.slice(0, n - 1)),
    )
    if not pc.any(repeat).as_py():
        return table
    keep = pa.concat_arrays([pa.array([True]), pc.invert(repeat).combine_chunks()])
    return table.filter(keep)


class PayloadDecoder:
    """``json.loads`` for payloads, memoised for the flat payloads that repeat (most do).

    A flat dict (scalar values only) is handed out as a fresh shallow copy, so no two records
    share a mutable payload; nested payloads are decoded every time.
    """

    _SCALARS = (str, int, float, bool, type(None))
    _MAX = 4096

    def __init__(self) -> None:
        self._decode = json.JSONDecoder().decode
        self._memo: dict[str, dict[str, Any]] = {}

    def __call__(self, text: str) -> dict[str, Any]:
        flat = self._memo.get(text)
        if flat is not None:
            return dict(flat)
        value = self._decode(text)
        if len(self._memo) < self._MAX and all(
            isinstance(v, self._SCALARS) for v in value.values()
        ):
            self._memo[text] = value
            return dict(value)
        return value
