"""The source's offset: what Spark checkpoints for every micro-batch.

Spark stores it as JSON and hands it back as ``start``/``end``; it must be deterministic
(fixed key order, only primitives) because Spark compares and replays it. It carries:

* ``group`` and ``store``: the group id and group store, so that whoever reads the offset
  from Spark's checkpoint or query progress knows which group log it belongs to.
* ``generation`` and ``member``: the group generation and member id the batch was planned
  in. A rebalance changes the generation, so it always yields a new batch and hence a
  ``commit()`` of the previous one (docs/design.md, "Spark facts that shape the reader");
  the member id lets a commit made on the member's behalf (the StreamingQueryListener path)
  be checked like the member's own.
* ``offsets``: the end position (exclusive) of every partition planned in the batch.
* ``starts``: the start position of partitions that are new in this batch (newly assigned,
  newly discovered, reset by ``failOnDataLoss=false``; every position of the initial offset),
  and of those the previous offset started that nothing was read from since. Keeping them in
  the end offset makes ``partitions(start, end)`` self-contained, so replaying a checkpointed
  batch plans exactly the same ranges, and tells whoever commits the batch where it began (a
  start below the group's committed offset is a rewind).
* ``sinkBatches`` (only when true): the query writes through Spark's Delta sink with
  ``deltaSinkTable``, so the progress listener records each completed batch for the member
  (:mod:`spark_kafka_group.sink.takeover`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_kafka_group.group.metadata import TopicPartition


def _nested(positions: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    nested: dict[str, dict[str, int]] = {}
    for tp, offset in sorted(positions.items()):
        nested.setdefault(tp.topic, {})[str(tp.partition)] = int(offset)
    return nested


def _flat(nested: Mapping[str, Mapping[str, int]] | None) -> dict[TopicPartition, int]:
    return {
        TopicPartition(topic, int(partition)): int(offset)
        for topic, partitions in (nested or {}).items()
        for partition, offset in partitions.items()
    }


@dataclass(frozen=True)
class SourceOffset:
    group: str
    store: str
    generation: int
    member: str
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    starts: Mapping[TopicPartition, int] = field(default_factory=dict)
    sink_batches: bool = False

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {
            "group": self.group,
            "store": self.store,
            "generation": self.generation,
            "member": self.member,
            "offsets": _nested(self.offsets),
            "starts": _nested(self.starts),
        }
        if self.sink_batches:  # left out otherwise: the offsets of every other query unchanged
            value["sinkBatches"] = True
        return value

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> SourceOffset:
        return cls(
            group=str(value.get("group", "")),
            store=str(value.get("store", "")),
            generation=int(value.get("generation", -1)),
            member=str(value.get("member", "")),
            offsets=_flat(value.get("offsets")),
            starts=_flat(value.get("starts")),
            sink_batches=bool(value.get("sinkBatches", False)),
        )

    def start_of(self, tp: TopicPartition, previous: SourceOffset | None) -> int | None:
        """Where ``tp``'s range in the batch ending at ``self`` starts (None: not planned)."""
        if tp in self.starts:
            return self.starts[tp]
        if previous is not None and tp in previous.offsets:
            return previous.offsets[tp]
        return None
