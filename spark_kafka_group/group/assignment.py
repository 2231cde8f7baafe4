"""The leader's side of SyncGroup: from the folded group and topic metadata to a SYNC payload.

On top of the chosen assignor, three rules hold whatever the assignor does:

* a partition still held by one member (assigned or being revoked) is never given to another
  in the same generation: it is revoked from the holder, and the follow-up rebalance after
  the holder's revocation ack assigns it (KIP-429; with eager assignors nothing is held,
  since joining gave everything up);
* partitions of a departed static member wait for it while a scheduled rebalance delay runs
  (KIP-415); with a cooperative assignor nothing moves during the delay, and when it
  expires a returned instance is treated as owning them again, so it gets them back;
* the assignment records the metadata snapshot it used (Kafka's
  ``ConsumerCoordinator.assignmentSnapshot``).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import Any

from spark_kafka_group.group.assignors import Assignor, MemberSubscription, RebalanceProtocol
from spark_kafka_group.group.clocks import Sightings, window_end_ms
from spark_kafka_group.group.metadata import (
    GroupMetadata,
    Partitions,
    ScheduledDelay,
    TopicPartition,
)
from spark_kafka_group.group.payloads import SyncPayload


def sync_payload(
    group: GroupMetadata,
    assignor: Assignor,
    metadata: Mapping[str, int],
    now_ms: int,
    seen: Sightings,
) -> SyncPayload:
    """The payload of the leader's SYNC record (``now_ms``: its timestamp; ``seen``: the
    leader's sightings, which judge what remains of each scheduled delay)."""
    snapshot = group.relevant_metadata(metadata)
    topics_of = {mid: m.profile.subscription.resolve(snapshot) for mid, m in group.members.items()}
    remaining = {
        i: window_end_ms(seen, s.opened, s.until_ms) - seen.now_ms
        for i, s in group.scheduled.items()
    }
    # What remains is written relative to this SYNC record, on the leader's clock.
    active = {
        i: ScheduledDelay(s.partitions, now_ms + remaining[i])
        for i, s in group.scheduled.items()
        if remaining[i] > 0
    }
    reserved: set[TopicPartition] = set()
    for s in active.values():
        reserved |= s.partitions

    def valid(tp: TopicPartition, mid: str) -> bool:
        return tp.topic in topics_of[mid] and 0 <= tp.partition < snapshot[tp.topic]

    if active and assignor.rebalance_protocol is RebalanceProtocol.COOPERATIVE:
        target = _frozen_assignment(group, topics_of, snapshot, reserved, valid)
    else:
        returning = _returning(group, {i for i in group.scheduled if remaining[i] <= 0})
        raw = _assign(group, assignor, snapshot, topics_of, returning)
        target = _valid_target(group, raw, reserved, valid)
    holder = group.holders()
    assignment: dict[str, Partitions] = {}
    revoking: dict[str, Partitions] = {}
    for mid, m in group.members.items():
        kept = frozenset(tp for tp in target[mid] if holder.get(tp, mid) == mid)
        assignment[mid] = kept
        revoking[mid] = m.held - kept
    delay_ms = min((remaining[i] for i in active), default=0)
    return SyncPayload(
        protocol=group.protocol,
        assignment=assignment,
        revoking=revoking,
        snapshot=snapshot,
        delay_ms=delay_ms,
        scheduled=active,
    )


def _returning(group: GroupMetadata, expired: set[str]) -> dict[str, set[TopicPartition]]:
    """The partitions of the scheduled delays that ran out (instance ids ``expired``) whose
    static instance is back, by its member."""
    returning: dict[str, set[TopicPartition]] = {}
    for inst in expired:
        mid = group.static_members.get(inst)
        if mid is not None:
            returning.setdefault(mid, set()).update(group.scheduled[inst].partitions)
    return returning


def _assign(
    group: GroupMetadata,
    assignor: Assignor,
    snapshot: Mapping[str, int],
    topics_of: Mapping[str, frozenset[str]],
    returning: dict[str, set[TopicPartition]],
) -> Mapping[str, Any]:
    """The assignor's answer, a returned instance counted as owning its old partitions."""

    def assign() -> Mapping[str, Any]:
        subs = {
            mid: MemberSubscription(
                topics=topics_of[mid],
                owned=frozenset(m.held | returning.get(mid, set())),
                instance_id=m.instance_id,
            )
            for mid, m in group.members.items()
        }
        return assignor.assign(snapshot, subs)

    raw = assign()
    if returning and assignor.rebalance_protocol is RebalanceProtocol.COOPERATIVE:
        # A returned instance does not hold its old partitions: what the assignor moves
        # away from it needs no revocation, so it may go to its new owner now rather
        # than wait for a follow-up rebalance that nothing would start.
        returning = {
            mid: {
                tp for tp in tps if tp in {TopicPartition(t, int(p)) for t, p in raw.get(mid, ())}
            }
            for mid, tps in returning.items()
        }
        raw = assign()
    return raw


def _valid_target(
    group: GroupMetadata,
    raw: Mapping[str, Any],
    reserved: set[TopicPartition],
    valid: Any,
) -> dict[str, set[TopicPartition]]:
    """The assignor's answer without what no assignor may give (defensive): a partition of a
    topic the member does not subscribe to or that does not exist, a reserved one, or one
    given twice."""
    target: dict[str, set[TopicPartition]] = {}
    given: set[TopicPartition] = set()
    for mid in group.members:
        mine = set()
        for tp in raw.get(mid, ()):
            tp = TopicPartition(tp[0], int(tp[1]))
            if valid(tp, mid) and tp not in reserved and tp not in given:
                mine.add(tp)
                given.add(tp)
        target[mid] = mine
    return target


def _frozen_assignment(
    group: GroupMetadata,
    topics_of: Mapping[str, frozenset[str]],
    snapshot: Mapping[str, int],
    reserved: set[TopicPartition],
    valid: Any,
) -> dict[str, set[TopicPartition]]:
    """While a scheduled delay runs: members keep what they hold; only partitions nobody holds
    or waits for go to the least loaded subscribed member."""
    target = {mid: {tp for tp in m.held if valid(tp, mid)} for mid, m in group.members.items()}
    taken = set(reserved)
    for mine in target.values():
        taken |= mine
    order = list(group.members)
    rank = {mid: i for i, mid in enumerate(order)}
    for topic in sorted(snapshot):
        candidates = [mid for mid in order if topic in topics_of[mid]]
        if not candidates:
            continue
        heap = [(len(target[mid]), rank[mid], mid) for mid in candidates]
        heapq.heapify(heap)
        for p in range(snapshot[topic]):
            tp = TopicPartition(topic, p)
            if tp in taken:
                continue
            n, r, mid = heapq.heappop(heap)
            target[mid].add(tp)
            heapq.heappush(heap, (n + 1, r, mid))
    return target
