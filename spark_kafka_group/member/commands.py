"""What other threads ask of a member's step thread, which owns the member's state.

Spark's planning thread sends these (a completed batch's commit; the incarnation the member
replaces, whose checkpoint a restarted query resumes) and goes on at once; the step takes
them, in order, at its next step, before it decides what to write.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from spark_kafka_group.group.metadata import Partitions, TopicPartition


@dataclass(frozen=True)
class RecordCommit:
    """A completed batch's end offsets, and the revoked partitions it finished."""

    offsets: Mapping[TopicPartition, int]
    batch_generation: int
    batch_member: str
    release: Partitions = frozenset()


@dataclass(frozen=True)
class ReplaceIncarnation:
    """This member replaces ``member_id`` (an earlier incarnation of its query): the commits
    of batches that incarnation planned count as this member's."""

    member_id: str


Command = RecordCommit | ReplaceIncarnation
