"""Where a partition's new owner starts when its previous owner wrote through Spark's own Delta
sink (``writeStream.format("delta")``) and died before its last batches' ends reached the group
log: pure rules, no delta-rs, no Spark (``sink/spark_delta.py`` does the I/O).

Spark's Delta sink commits each batch with the application transaction (query id, batch id),
so the table tells which batches of a query landed, never which offsets they held. The group
keeps the missing link, per member, beside its log:

* the member's **plans**: every batch it hands to Spark, written before Spark runs it (end
  offsets, and the offset it continues, ``after``), so consecutive plans form a chain;
* its progress listener's **completed batch**: the query id, the batch id and the end offset of
  the newest batch Spark reported complete.

The plan whose ``after`` is the completed batch's end is the next batch id, and so on along the
chain: the query's transaction version in the table (the last batch id that landed) names the
last plan that landed, and so what the member wrote past the group's committed offset.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spark_kafka_group.group.metadata import TopicPartition

if TYPE_CHECKING:
    from spark_kafka_group.source.offsets import SourceOffset

#: Plans a member keeps in its object: the listener trails Spark by a batch or two.
PLANS_KEPT = 16


@dataclass(frozen=True)
class BatchEnd:
    """The end offset of one batch as the source hands it to Spark: the generation and member
    it was planned in and each partition's end (exclusive)."""

    generation: int
    member: str
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)

    def key(self) -> tuple[int, str, tuple[tuple[TopicPartition, int], ...]]:
        return self.generation, self.member, tuple(sorted(self.offsets.items()))


def batch_end(offset: SourceOffset) -> BatchEnd:
    """The :class:`BatchEnd` of a source offset (the planner's and the listener's view of one
    batch's end are the same value)."""
    return BatchEnd(offset.generation, offset.member, dict(offset.offsets))


@dataclass(frozen=True)
class PlannedBatch:
    """A batch handed to Spark: it continues the batch that ended at ``after`` and ends at
    ``end``; ``starts``: where its partitions new to the member begin."""

    after: BatchEnd
    end: BatchEnd
    starts: Mapping[TopicPartition, int] = field(default_factory=dict)

    def start_of(self, tp: TopicPartition) -> int | None:
        if tp in self.starts:
            return self.starts[tp]
        return self.after.offsets.get(tp)


@dataclass(frozen=True)
class CompletedBatch:
    """Batch ``batch_id`` of query ``query_id`` completed, ending at ``end``."""

    query_id: str
    batch_id: int
    end: BatchEnd


@dataclass(frozen=True)
class LandedRange:
    """A partition's offsets [since, end) that a member's query landed in the table, after the
    completed batch's start of it: a new owner positioned in it continues at ``end``."""

    since: int
    end: int


@dataclass(frozen=True)
class Unresolved:
    """The chain does not reach the landed batch (its plans were not kept, or never written)."""

    reason: str


def landed_ranges(
    completed: CompletedBatch, plans: Sequence[PlannedBatch], landed_version: int | None
) -> dict[TopicPartition, LandedRange] | Unresolved:
    """What the member's query landed past ``completed``, per partition, given the query's
    transaction version in the table (``None``: the table has none of its batches). Batch
    ``completed.batch_id + k`` is the k-th plan along the chain from ``completed.end``;
    ``plans``: every member's, in any order (a query restarted on its checkpoint goes on
    under a new member)."""
    ranges = {tp: LandedRange(end, end) for tp, end in completed.end.offsets.items()}
    if landed_version is None or landed_version <= completed.batch_id:
        return ranges
    by_after: dict[Any, dict[Any, PlannedBatch]] = {}
    for plan in plans:
        by_after.setdefault(plan.after.key(), {})[plan.end.key()] = plan
    current = completed.end
    for batch_id in range(completed.batch_id + 1, landed_version + 1):
        found = _plan_that_ran(current, by_after.get(current.key(), {}))
        if isinstance(found, str):
            return Unresolved(
                f"batch {batch_id} of query {completed.query_id} landed in the table, but "
                f"{found} (the newest completed batch known is {completed.batch_id})"
            )
        plan = found
        for tp, end in plan.end.offsets.items():
            known = ranges.get(tp)
            start = plan.start_of(tp)
            if known is None or start is None or start != known.end:
                since = end if start is None else start  # a new or restarted range
                ranges[tp] = LandedRange(min(since, end), end)
            else:
                ranges[tp] = LandedRange(known.since, end)
        current = plan.end
    return ranges


def _plan_that_ran(after: BatchEnd, candidates: Mapping[Any, PlannedBatch]) -> PlannedBatch | str:
    """The plan Spark ran after the batch ending at ``after``, or why it is not known. Two
    plans after one end come from two incarnations of the query: the member that planned
    ``after`` planned the next batch and died before Spark's offset log had it, so the query's
    next incarnation, resuming from ``after``, planned that batch again. The later
    incarnation's plan is the one that ran; two later incarnations' plans cannot be told
    apart."""
    if len(candidates) > 1:
        candidates = {k: p for k, p in candidates.items() if p.end.member != after.member}
    if len(candidates) == 1:
        return next(iter(candidates.values()))
    if not candidates:
        return "the members' plans do not go back to it"
    return f"{len(candidates)} incarnations of the query planned a batch after the same end"


def take_over(
    positions: Mapping[TopicPartition, int],
    landed: Iterable[Mapping[TopicPartition, LandedRange]],
) -> dict[TopicPartition, int]:
    """The new owner's positions: one that lies in a range a previous owner landed
    (``since <= position < end``) moves to that range's end, again until none contains it.
    Positions below every range (an operator's reset before it) stay: they re-read what the
    user asked to read again."""
    ranges: dict[TopicPartition, list[LandedRange]] = {}
    for member_ranges in landed:
        for tp, r in member_ranges.items():
            if tp in positions and r.since < r.end:
                ranges.setdefault(tp, []).append(r)
    moved = dict(positions)
    for tp, candidates in ranges.items():
        position = moved[tp]
        changed = True
        while changed:
            changed = False
            for r in candidates:
                if r.since <= position < r.end:
                    position, changed = r.end, True
        moved[tp] = position
    return moved


@dataclass(frozen=True)
class Superseded:
    """The files of an earlier incarnation of query ``query_id``, which went on (restarted on
    its checkpoint) under another member: that member's files account for its batches."""

    query_id: str


#: What a new owner learnt from one other member's files.
Found = Mapping[TopicPartition, LandedRange] | Unresolved | Superseded


def spent(
    found: Mapping[str, Found], committed: Mapping[TopicPartition, int], members: Collection[str]
) -> set[str]:
    """The members whose files no new owner will need again, to be deleted: gone from the
    group (not in ``members``) and either superseded, unresolved (their plans will never reach
    the table's version: a gone member writes none), or with every partition their query landed
    committed by the group at or past the landed end (a new owner starts there anyway). A
    member still in the group, or whose landed records a later owner may still meet above the
    group's commit, keeps its files."""
    gone = {member: what for member, what in found.items() if member not in members}
    return {
        member
        for member, what in gone.items()
        if isinstance(what, (Unresolved, Superseded))
        or all(committed.get(tp, -1) >= r.end for tp, r in what.items())
    }


# -- the objects' JSON -----------------------------------------------------------------------


def _pairs(offsets: Mapping[TopicPartition, int]) -> list[list[Any]]:
    return [[tp.topic, tp.partition, o] for tp, o in sorted(offsets.items())]


def _offsets(pairs: Iterable[Sequence[Any]]) -> dict[TopicPartition, int]:
    return {TopicPartition(str(t), int(p)): int(o) for t, p, o in pairs}


def _end_json(end: BatchEnd) -> dict[str, Any]:
    return {"generation": end.generation, "member": end.member, "offsets": _pairs(end.offsets)}


def _end(d: Mapping[str, Any]) -> BatchEnd:
    return BatchEnd(int(d["generation"]), str(d["member"]), _offsets(d["offsets"]))


def encode_plans(plans: Sequence[PlannedBatch]) -> bytes:
    body = [
        {"after": _end_json(p.after), "end": _end_json(p.end), "starts": _pairs(p.starts)}
        for p in plans
    ]
    return json.dumps({"plans": body}, separators=(",", ":")).encode()


def decode_plans(data: bytes) -> list[PlannedBatch]:
    return [
        PlannedBatch(_end(p["after"]), _end(p["end"]), _offsets(p.get("starts", ())))
        for p in json.loads(data)["plans"]
    ]


def encode_completed(completed: CompletedBatch) -> bytes:
    body = {
        "query_id": completed.query_id,
        "batch_id": completed.batch_id,
        "end": _end_json(completed.end),
    }
    return json.dumps(body, separators=(",", ":")).encode()


def decode_completed(data: bytes) -> CompletedBatch:
    d = json.loads(data)
    return CompletedBatch(str(d["query_id"]), int(d["batch_id"]), _end(d["end"]))
