"""Which rows of a batch to write into a Delta table, and which application transactions to
write with them: pure decisions, no delta-rs, no Spark (``sink/delta.py`` does the I/O).

The table records, per Kafka partition, the end offset (exclusive) of what has landed in it: a
Delta application transaction whose id names the group, topic and partition and whose version
is that offset. A batch keeps a partition's rows at or above that offset, and its commit moves
the offset to the end of what it wrote, so every partition's landed rows stay one contiguous
range however many writers (old owners, new owners, zombies) try to write it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from spark_kafka_group.group.metadata import TopicPartition

#: The prefix of every application transaction id the helper writes.
APP_ID_PREFIX = "kafka-group"


@dataclass(frozen=True)
class Span:
    """The offsets of a batch's rows of one partition: ``first`` is the lowest, ``end`` one
    past the highest (Kafka's offsets of a batch need not be contiguous: compaction, markers)."""

    first: int
    end: int


@dataclass(frozen=True)
class Decision:
    """What to write for one batch."""

    keep_from: dict[TopicPartition, int]  # keep a partition's rows with offset >= this
    versions: dict[TopicPartition, int]  # the application transactions to commit
    dropped: dict[TopicPartition, Span]  # offsets of the batch the table already holds


def app_id(group: str, tp: TopicPartition) -> str:
    """The application transaction id of one partition of one group's topic (Kafka topic names
    hold no ``/``)."""
    return f"{APP_ID_PREFIX}/{group}/{tp.topic}/{tp.partition}"


def group_marker(group: str) -> str:
    """The application transaction id that says the table is written by this helper for
    ``group``: written once, with the group's first commit into the table."""
    return f"{APP_ID_PREFIX}/{group}"


def decide(spans: Mapping[TopicPartition, Span], landed: Mapping[TopicPartition, int]) -> Decision:
    """Keep what the table does not hold yet. ``landed``: the table's end offset per partition
    (absent: nothing landed). A partition whose rows all landed gets no transaction (its
    version stays); every other gets the end of the batch's rows."""
    keep_from: dict[TopicPartition, int] = {}
    versions: dict[TopicPartition, int] = {}
    dropped: dict[TopicPartition, Span] = {}
    for tp, span in spans.items():
        end = landed.get(tp)
        if end is None or end <= span.first:
            keep_from[tp] = span.first
            versions[tp] = span.end
            continue
        dropped[tp] = Span(span.first, min(span.end, end))
        if end < span.end:
            keep_from[tp] = end
            versions[tp] = span.end
    return Decision(keep_from, versions, dropped)


def moved_away(
    mine: Mapping[TopicPartition, int], table: Mapping[TopicPartition, int | None]
) -> dict[TopicPartition, tuple[int, int | None]]:
    """The partitions this writer wrote last whose landed end in the table is no longer what it
    wrote: another writer wrote them since, so they belong to another member now.
    ``mine``: the versions of this writer's last commit; ``table``: the table's now."""
    return {tp: (end, table.get(tp)) for tp, end in mine.items() if table.get(tp) != end}
