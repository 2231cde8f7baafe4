"""The values the offsets rules (:mod:`.offsets`) and the commit-object store
(:mod:`spark_kafka_group.store.commit_objects`) share: what a commit not yet in the log is.

A committed offset is the group's :class:`~spark_kafka_group.group.metadata.OffsetAndMetadata`
(with its commit's metadata, time, generation and member); a commit not in the log yet is a
:class:`RecordedOffset`: the offset and the generation of the member when it recorded it (what
the fence needs), as the commit objects (:class:`CommitObject`) hold them. How an object is
named and stored is the store's business.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from spark_kafka_group.group.metadata import OffsetAndMetadata, Partitions, TopicPartition

#: The group's committed offsets, as folded (``GroupMetadata.offsets``).
Committed = Mapping[TopicPartition, OffsetAndMetadata]

#: An offset to commit: the offset alone, or with its metadata (the other fields are the
#: commit's own: its time, generation and member).
CommitValue = int | OffsetAndMetadata

#: The writer of the progress listener's commit objects (``CommitObject.writer``).
LISTENER = "listener"


@dataclass(frozen=True)
class RecordedOffset:
    """One partition's offset as a member recorded it, and the member's generation then (a
    commit not in the log yet; the fence needs the generation)."""

    offset: int
    generation: int


@dataclass(frozen=True)
class CommitObject:
    """A member's newest recorded offsets (``seq`` grows with every object its writer writes),
    written by the member itself (``writer`` "") or by its query's progress listener
    (:data:`LISTENER`). ``rewinds``: the partitions whose offset moves the committed one back
    (a reset by policy), which the fold writes although it otherwise only moves forward."""

    member_id: str
    seq: int
    offsets: Mapping[TopicPartition, RecordedOffset] = field(default_factory=dict)
    writer: str = ""
    rewinds: Partitions = frozenset()
