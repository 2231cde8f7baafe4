"""Kafka's StickyAssignor (eager): balanced, and moving as few owned partitions as possible.

Two paths, both O(P log M) for P partitions and M members (no loop over P x M):

* every member subscribes to the same topics: the quota algorithm. Each member keeps up to
  its quota (floor or ceil of P / M; the ceil slots go to the members owning the most) of what
  it owns, and the rest is dealt to the members below quota. This moves the minimum number of
  partitions any balanced assignment can.
* subscriptions differ: keep what is owned, give each unowned partition to the least loaded
  member that can take it (topics with the fewest candidates first), then move partitions
  from the most to the least loaded eligible member until no member holding a partition of
  topic T has two more partitions than a member subscribed to T (Kafka's ``isBalanced``).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from spark_kafka_group.group.assignors.abstract import (
    Assignment,
    Assignor,
    MemberSubscription,
    member_order,
)
from spark_kafka_group.group.metadata import TopicPartition


class StickyAssignor(Assignor):
    name = "sticky"

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, MemberSubscription],
    ) -> Assignment:
        return sticky_assign(partitions_per_topic, subscriptions)


def sticky_assign(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, MemberSubscription],
) -> Assignment:
    order = member_order(subscriptions)
    if not order:
        return {}
    topics_of = {
        m: frozenset(t for t in subscriptions[m].topics if partitions_per_topic.get(t, 0) > 0)
        for m in order
    }
    # What each member validly owns: subscribed, existing, and claimed by nobody before it.
    claimed: set[TopicPartition] = set()
    owned: dict[str, list[TopicPartition]] = {}
    for m in order:
        mine = []
        for tp in sorted(subscriptions[m].owned):
            if (
                tp.topic in topics_of[m]
                and 0 <= tp.partition < partitions_per_topic[tp.topic]
                and tp not in claimed
            ):
                claimed.add(tp)
                mine.append(tp)
        owned[m] = mine
    first = topics_of[order[0]]
    if all(topics_of[m] == first for m in order):
        return _quota_assign(order, first, partitions_per_topic, owned)
    return _general_assign(order, topics_of, partitions_per_topic, owned)


def _quota_assign(
    order: list[str],
    topics: frozenset[str],
    partitions_per_topic: Mapping[str, int],
    owned: dict[str, list[TopicPartition]],
) -> Assignment:
    total = sum(partitions_per_topic[t] for t in topics)
    n = len(order)
    min_quota, extra = divmod(total, n)
    max_quota = min_quota + (1 if extra else 0)
    max_slots = extra
    out: Assignment = {}
    kept: set[TopicPartition] = set()
    # Members owning the most get the ceil-quota slots: that keeps the most in place.
    for m in sorted(order, key=lambda x: -len(owned[x])):
        mine = owned[m]
        if len(mine) >= max_quota and max_slots > 0 and max_quota > min_quota:
            keep = mine[:max_quota]
            max_slots -= 1
        else:
            keep = mine[:min_quota]
        out[m] = keep
        kept.update(keep)
    free = [
        TopicPartition(t, p)
        for t in sorted(topics)
        for p in range(partitions_per_topic[t])
        if TopicPartition(t, p) not in kept
    ]
    free.reverse()  # pop() from the end hands out partitions in ascending order
    for m in order:
        need = min_quota - len(out[m])
        for _ in range(max(0, need)):
            out[m].append(free.pop())
    for m in order:
        if not free:
            break
        if len(out[m]) == min_quota and max_slots > 0:
            out[m].append(free.pop())
            max_slots -= 1
    if free:  # pragma: no cover - the quotas add up to the total
        raise AssertionError(f"sticky assignor left {len(free)} partitions unassigned")
    return {m: sorted(out[m]) for m in order}


def _general_assign(
    order: list[str],
    topics_of: dict[str, frozenset[str]],
    partitions_per_topic: Mapping[str, int],
    owned: dict[str, list[TopicPartition]],
) -> Assignment:
    rank = {m: i for i, m in enumerate(order)}
    eligible: dict[str, list[str]] = {}
    for m in order:
        for t in topics_of[m]:
            eligible.setdefault(t, []).append(m)
    count = {m: len(owned[m]) for m in order}
    # member -> topic -> partitions held, newest last
    held: dict[str, dict[str, list[TopicPartition]]] = {m: {} for m in order}
    originally: set[tuple[str, TopicPartition]] = set()
    for m in order:
        for tp in owned[m]:
            held[m].setdefault(tp.topic, []).append(tp)
            originally.add((m, tp))
    taken = {tp for _, tp in originally}
    # Unowned partitions to the least loaded candidate, scarce topics first.
    topics = sorted(eligible, key=lambda t: (len(eligible[t]), t))
    for t in topics:
        free = [p for p in range(partitions_per_topic[t]) if TopicPartition(t, p) not in taken]
        heap = [(count[m], rank[m], m) for m in eligible[t]]
        heapq.heapify(heap)
        for p in free:
            c, r, m = heapq.heappop(heap)
            held[m].setdefault(t, []).append(TopicPartition(t, p))
            count[m] = c + 1
            heapq.heappush(heap, (c + 1, r, m))
    # Balance: move from the most to the least loaded member eligible for the same topic.
    balancer = _Balancer(rank, count, held, originally)
    while any([balancer.balance(t, eligible[t]) for t in topics]):
        pass
    return {m: sorted(tp for ps in held[m].values() for tp in ps) for m in order}


class _Balancer:
    """Moves partitions of one topic from the most to the least loaded eligible member."""

    def __init__(
        self,
        rank: dict[str, int],
        count: dict[str, int],
        held: dict[str, dict[str, list[TopicPartition]]],
        originally: set[tuple[str, TopicPartition]],
    ) -> None:
        self.rank, self.count, self.held, self.originally = rank, count, held, originally

    def balance(self, t: str, members: list[str]) -> bool:
        """Balance topic ``t`` among ``members``; whether anything moved."""
        count, held, rank = self.count, self.held, self.rank
        if len(members) < 2:
            return False
        moved = False
        lo = [(count[m], rank[m], m) for m in members]
        hi = [(-count[m], rank[m], m) for m in members if held[m].get(t)]
        heapq.heapify(lo)
        heapq.heapify(hi)
        while lo and hi:
            c_u, r_u, u = lo[0]
            if c_u != count[u]:
                heapq.heapreplace(lo, (count[u], r_u, u))
                continue
            nc_v, r_v, v = hi[0]
            if -nc_v != count[v] or not held[v].get(t):
                heapq.heappop(hi)
                if held[v].get(t):
                    heapq.heappush(hi, (-count[v], r_v, v))
                continue
            if count[v] - count[u] <= 1:
                break
            tp = _pick_movable(held[v][t], v, self.originally)
            held[u].setdefault(t, []).append(tp)
            count[v] -= 1
            count[u] += 1
            moved = True
        return moved


def _pick_movable(
    partitions: list[TopicPartition], member: str, originally: set[tuple[str, TopicPartition]]
) -> TopicPartition:
    """Remove and return a partition to move, preferring one the member did not own before."""
    for i in range(len(partitions) - 1, -1, -1):
        if (member, partitions[i]) not in originally:
            return partitions.pop(i)
    return partitions.pop()
