"""The group log's record envelope: the one contract between the protocol and the store.

The protocol (``spark_kafka_group.group``) decides which records to write and how replaying
them changes the group; the store (``spark_kafka_group.store``) only persists envelopes, in
order, and hands them back. Typed columns carry what operators query with SQL (who, which
generation, which partition, which offset); everything else goes in ``payload`` as JSON, whose
form each kind's type in :mod:`~spark_kafka_group.group.payloads` defines. Records are built by
:mod:`~spark_kafka_group.group.record_helpers`.

Adding a record kind or a payload field is backward compatible. Changing the meaning of a
column is not: bump :data:`RECORD_SCHEMA_VERSION` and teach the fold to read both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Version of the envelope layout (columns and their meaning), stored on every record.
RECORD_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class GroupRecord:
    """One entry of the group log.

    ``kind`` names the event (``JOIN``, ``SYNC``, ``HEARTBEAT``, ``LEAVE``, ``EXPIRE``,
    ``COMMIT``, ... as defined by the protocol). ``timestamp_ms`` is the writer's clock at the
    time of writing; replay never reads a wall clock, only these timestamps.
    """

    kind: str
    timestamp_ms: int
    member_id: str | None = None
    instance_id: str | None = None
    generation: int | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    payload: dict[str, Any] = field(default_factory=dict)
