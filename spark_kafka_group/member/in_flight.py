"""Batches in flight.

A query's member hands batches to Spark (``begin_batch``) and learns of their completion by a
commit: its own at the next trigger, or the progress listener's on its behalf, usually much
sooner (:func:`spark_kafka_group.listener.writes.commit_batch_for_member`, in its own commit
object for the member). Between the two the batch is in flight. That decides when a partition being
revoked may be released (once a commit reaches the end of its last batch; the pure step,
:mod:`.decide`), whether a closing member may leave yet (``GroupMember.close``) and which
revoked partitions the reader may release with a commit (no batch planned after the completed
one reads them).

It lives under ``member/`` because the member's holdings book keeps it (a batch is claimed
there, under the book's lock) and hands the current, immutable value to the pure step; the
reader only asks it questions, through the member. Which commits are written is the
protocol's rule (:mod:`spark_kafka_group.group.offsets`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.group.offsets import Committed


@dataclass(frozen=True)
class PlannedBatch:
    """One batch handed to Spark: its end offset per partition, and the generation and
    member it was planned under."""

    ends: Mapping[TopicPartition, int]
    generation: int
    member: str


@dataclass(frozen=True)
class BatchesInFlight:
    """What a member has handed to Spark and not yet seen committed (an immutable value: the
    member replaces it at each change and gives it to the pure step as it is)."""

    #: The end offset of the last batch that read each partition the member still holds.
    ends: Mapping[TopicPartition, int] = field(default_factory=dict)
    #: The last batch handed to Spark (None: none yet).
    last: PlannedBatch | None = None

    def begin(self, batch: PlannedBatch) -> BatchesInFlight:
        """``batch`` is handed to Spark: its partitions count as in flight up to its ends."""
        return BatchesInFlight(ends={**self.ends, **batch.ends}, last=batch)

    def retain(self, held: Iterable[TopicPartition]) -> BatchesInFlight:
        """Only the partitions still held (the others were released, revoked or lost: their
        commits are no longer this member's to wait for)."""
        keep = set(held)
        return BatchesInFlight(
            ends={tp: end for tp, end in self.ends.items() if tp in keep}, last=self.last
        )

    def finished(self, tp: TopicPartition, committed: Committed) -> bool:
        """No batch of the member still reads ``tp``: none ever did, or a commit (the member's
        own, or the progress listener's for it) is exactly at the end of the last one. A
        higher committed offset is an older commit that a reset by policy moved back from,
        not this batch's."""
        end = self.ends.get(tp)
        if end is None:
            return True
        offset = committed.get(tp)
        return offset is not None and offset.offset == end

    def uncommitted(self, committed: Committed) -> dict[TopicPartition, int]:
        """The partitions whose last batch is not committed yet, with its end offset."""
        return {tp: end for tp, end in self.ends.items() if not self.finished(tp, committed)}

    def reads_last(self, tp: TopicPartition) -> bool:
        """The last batch handed to Spark reads ``tp`` (it may still be running)."""
        return self.last is not None and tp in self.last.ends
