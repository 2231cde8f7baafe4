"""The member's holdings bookkeeping (as the consumer side of kafka-python's coordinator):
what it holds after each step, since which generation, the batches it handed to Spark, and
what the user's rebalance listener hears (assigned, revoked, lost).

Since which generation each partition is held is the group's record
(``MemberMetadata.held_since``, kept by the fold); the book only lowers it for the partitions
whose checkpointed positions a restarted query resumes (:meth:`HoldingsBook.resume_checkpoint`),
for as long as the group's record of them stays what it was then."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import replace

from spark_kafka_group.group import GroupMetadata, GroupState, Partitions, TopicPartition
from spark_kafka_group.group.messages import MemberView
from spark_kafka_group.group.offsets import fence
from spark_kafka_group.group.types import Committed
from spark_kafka_group.member.error_text import names
from spark_kafka_group.member.in_flight import BatchesInFlight, PlannedBatch
from spark_kafka_group.member.listener import RebalanceListenerRunner
from spark_kafka_group.member.view import Holdings

log = logging.getLogger(__name__)


class HoldingsBook:
    """One member's holdings and batches in flight: the hand-off between Spark's planning
    thread and the member's step thread.

    The step publishes the holdings here after each step; a trigger claims a batch's
    partitions here (:meth:`begin_batch`) and a restarted query resumes its checkpoint
    (:meth:`resume_checkpoint`), both answered at once. A claim and the step's reservation of the
    partitions it is releasing must not interleave, and the trigger needs the answer now, so
    a queue cannot serve: this is the member's one lock, held only for a few assignments,
    never across a read or write of the store or a call of the user's listener."""

    def __init__(self, member_id: str, listener: RebalanceListenerRunner, group_id: str) -> None:
        self._listener = listener
        self._group_id = group_id
        self._lock = threading.Lock()
        self.holdings = Holdings(generation=-1, member_id=member_id)
        #: The batches handed to Spark: a partition being revoked is released once a commit
        #: reaches the end of its last batch (decide.py).
        self.in_flight = BatchesInFlight()
        #: Partitions the member's step decided to release and is appending the release of:
        #: no batch may claim them meanwhile (the decision saw none of theirs in flight).
        self.releasing: Partitions = frozenset()
        #: The group's record of since when each held partition is held, as of the last step.
        self._group_since: Mapping[TopicPartition, int] = {}
        #: Partitions whose checkpointed position was resumed: the group's record of them
        #: then, and the checkpoint's generation (they count as held since then while the
        #: group's record stays the same).
        self._resumed: dict[TopicPartition, tuple[int, int]] = {}

    def reset(self, member_id: str) -> None:
        """Not a member of any generation (yet, or any more)."""
        with self._lock:
            self.holdings = Holdings(generation=-1, member_id=member_id)
            self.releasing = frozenset()
            self._group_since, self._resumed = {}, {}

    def _held_since(self) -> dict[TopicPartition, int]:
        """The group's record of since when each partition is held, lowered where a
        checkpoint was resumed (under the lock)."""
        since = dict(self._group_since)
        for tp, (_, generation) in self._resumed.items():
            since[tp] = min(since.get(tp, generation), generation)
        return since

    def lose(self, partitions: Iterable[TopicPartition], why: str) -> bool:
        """The member lost ``partitions`` (fenced, expired): the listener hears "lost" and its
        batches in flight no longer count. Whether it held any."""
        lost = sorted(partitions)
        if not lost:
            return False
        log.warning(
            "Member %s of group %s lost %s: %s", self.holdings.member_id, self._group_id,
            names(lost), why,
        )  # fmt: skip
        with self._lock:
            self.in_flight = BatchesInFlight()
        self._listener.lost(lost)
        return True

    def update(self, view: MemberView, group: GroupMetadata) -> None:
        """The holdings of a member the group knows, after a step; the listener hears what
        was assigned and revoked (outside the lock: the user's code may take its time)."""
        with self._lock:
            previous = self.holdings
            member_id = previous.member_id
            held = view.assignment | view.revoking
            self.in_flight = self.in_flight.retain(held)
            generation = view.member_generation
            # The group's record (a replaced incarnation's partitions keep their generation
            # there, so its batches stay valid); a resumption lasts while the record stays.
            member = group.member(member_id)
            self._group_since = member.held_since if member is not None else {}
            self._resumed = {
                tp: r for tp, r in self._resumed.items() if self._group_since.get(tp) == r[0]
            }
            stable = view.state == GroupState.STABLE and generation == view.group_generation
            self.holdings = Holdings(
                generation=generation,
                member_id=member_id,
                held=held,
                # An eager rejoin gives everything up: revoked, as far as the reader goes.
                revoking=held if view.gives_up_at_join else view.revoking,
                held_since=self._held_since(),
                stable=stable,
                settled=stable and not any(m.revoking for m in group.members.values()),
            )
            self.releasing = frozenset()
        # Still a member: what it no longer holds was revoked (released after its final
        # commit, or given up by an eager rejoin), not lost.
        revoked = previous.held - held
        if revoked:
            log.info("Revoked from %s: %s", member_id, names(revoked))
            self._listener.revoked(sorted(revoked))
        new = held - previous.held
        if generation != previous.generation:
            log.info(
                "Joined group %s as member %s (generation %d, protocol %s, leader: %s)",
                self._group_id, member_id, generation, view.protocol, view.is_leader,
            )  # fmt: skip
        if new:
            log.info("Newly assigned to %s: %s", member_id, names(new))
            self._listener.assigned(sorted(new))
        newly_revoking = self.holdings.revoking - previous.revoking
        if newly_revoking:
            log.info("Revoking from %s: %s (finishing the in-flight batch)", member_id,
                     names(newly_revoking))  # fmt: skip

    def left(self) -> None:
        """The member left the group: it holds nothing, and, as Kafka's onLeavePrepare, the
        listener hears "revoked", not "lost"."""
        given_up = sorted(self.holdings.held)
        log.info(
            "Left group %s as member %s%s", self._group_id, self.holdings.member_id,
            f", giving up {names(given_up)}" if given_up else "",
        )  # fmt: skip
        with self._lock:
            self.in_flight = BatchesInFlight()
            self.holdings = Holdings(generation=-1, member_id=self.holdings.member_id)
            self.releasing = frozenset()
            self._group_since, self._resumed = {}, {}
        if given_up:
            self._listener.revoked(given_up)

    def snapshot(self) -> tuple[Holdings, BatchesInFlight]:
        """The holdings and the batches in flight, read together (what a step decides on)."""
        with self._lock:
            return self.holdings, self.in_flight

    def reserve_releases(
        self, keeps: Partitions, *, decided_on: BatchesInFlight | None = None
    ) -> bool:
        """Before a step appends records that take partitions from this member (released,
        given up, lost): everything held but ``keeps`` may no longer be claimed by a batch
        until the step's outcome is published. False, reserving nothing, if a batch began
        since the step took ``decided_on`` (its decision did not see it: decide again)."""
        with self._lock:
            if decided_on is not None and self.in_flight is not decided_on:
                return False
            self.releasing = frozenset(self.holdings.held - keeps)
            return True

    def begin_batch(
        self, ends: Mapping[TopicPartition, int], *, batch_generation: int
    ) -> Partitions:
        """The partitions of a batch about to run that the member may read (held without
        interruption since ``batch_generation``, and not being released right now); they
        count as in flight from now."""
        with self._lock:
            holdings = self.holdings
            ours = frozenset(fence(holdings.held_since, ends, batch_generation)) - self.releasing
            batch = PlannedBatch(
                {tp: ends[tp] for tp in ours}, batch_generation, holdings.member_id
            )
            self.in_flight = self.in_flight.begin(batch)
            return ours

    def resume_checkpoint(
        self,
        previous_member: str,
        generation: int,
        positions: Mapping[TopicPartition, int],
        committed: Committed,
    ) -> Partitions:
        """The partitions whose checkpointed ``positions`` (of ``previous_member``, planned in
        ``generation``, the incarnation this member replaces) stay valid: held again, and
        nobody else committed since. They count as held since ``generation``."""
        with self._lock:
            resumed = frozenset(
                tp
                for tp, position in positions.items()
                if tp in self.holdings.held
                and (
                    tp not in committed
                    or (
                        committed[tp].member_id == previous_member
                        and committed[tp].offset <= position
                    )
                )
            )
            for tp in resumed:
                earlier = self._resumed.get(tp, (0, generation))[1]
                self._resumed[tp] = (self._group_since.get(tp, -1), min(earlier, generation))
            if resumed:
                self.holdings = replace(self.holdings, held_since=self._held_since())
            return resumed
