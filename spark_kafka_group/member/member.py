"""The group member that lives in a query's streaming-source process on the driver.

It drives the pure protocol (:mod:`spark_kafka_group.group`, see its package docstring for
the sequence) over the group log: join, wait for the others, sync (the leader assigns),
heartbeat, commit, release revoked partitions, rejoin when fenced. A background thread
(:mod:`.heartbeat`) steps it every heartbeat interval, and at once when the reader asks (a
``commit``, or a ``latestOffset`` during a rebalance); from then on that thread owns the
member's state. The reader never waits on the group log: it reads what the last step
published (the holdings, the committed offsets), sends its commits as commands
(:mod:`.commands`), and claims a batch's partitions through the holdings book, whose small
lock no step holds across a read or write of the store.

What the reader sees is a :class:`Holdings`: the partitions it may plan (``held``
minus ``revoking``), the ones it must finish and release (``revoking``), and for each partition
the generation since which this member holds it continuously (``held_since``): a batch
planned before that generation must neither supply a position nor commit for it.

The reader tells the member which partitions each batch reads and up to where
(:meth:`GroupMember.begin_batch`). A partition being revoked is released by the first step
after a commit reaches that end: the reader's own commit at the next trigger, or, usually
much sooner, the progress listener's commit of the completed batch (its commit object for
this member, read by the heartbeat thread while such a partition waits), so the new owner does
not wait for this query's next trigger.

This module is the query's side of the member: start (the join wait, :mod:`.join`), close
(the grace period, :mod:`.close`), the batches and their commits. Its place in the group and
the protocol step are :class:`~spark_kafka_group.member.membership.Membership`. Every wait
counts on the injected clock.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from spark_kafka_group.errors import GroupJoinTimeoutError, GroupStoreError
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.member import error_text
from spark_kafka_group.member.close import LEAVE_GRACE_S, await_final_commit
from spark_kafka_group.member.commands import RecordCommit, ReplaceIncarnation
from spark_kafka_group.member.in_flight import BatchesInFlight
from spark_kafka_group.member.join import (
    SubscriptionSpec,
    has_assignment,
    join_wait_ms,
    new_member_id,
    wait_for_assignment,
)
from spark_kafka_group.member.membership import Membership
from spark_kafka_group.member.view import Holdings
from spark_kafka_group.options import SourceOptions

if TYPE_CHECKING:
    from spark_kafka_group.kafka.cluster import KafkaCluster

__all__ = ["LEAVE_GRACE_S", "GroupMember", "SubscriptionSpec", "new_member_id"]

log = logging.getLogger(__name__)


class GroupMember(Membership):
    """The member of one ``kafka-group`` query (see the module docstring)."""

    @classmethod
    def for_source(cls, opts: SourceOptions, *, cluster: KafkaCluster) -> GroupMember:
        """The member of a ``kafka-group`` query."""
        subscription = SubscriptionSpec(topics=opts.subscribe or (), pattern=opts.subscribe_pattern)
        # Fail fast, with the cluster's own words, when a subscribed topic does not exist.
        cluster.topic_partitions(subscribe=opts.subscribe, pattern=opts.subscribe_pattern)
        return cls(
            opts.group,
            subscription=subscription,
            # Kafka's client.id names the client in describe output and member ids.
            client_id=opts.kafka_params.get("client.id", "spark-kafka-group"),
            topic_counts=lambda: cluster.topic_partitions(pattern=".*"),
        )

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, *, replaces: str | None = None, must_complete_join: bool = False) -> Holdings:
        """Join and wait for the first assignment; then heartbeat in the background.

        ``replaces``: the member id of this query's previous incarnation (from its
        checkpoint). If it is still in the group (stopped by a crash, or still finishing its
        close), this member replaces it: it takes its place and its partitions at once,
        without waiting for its session timeout, and the old id is fenced.

        As a Kafka consumer's first poll, it waits for the rebalance its join started to give
        it partitions: with the cooperative protocol that is the second round at the earliest
        (the first only revokes them from the others). Otherwise the query's first batch is
        empty and its first records come a trigger later. The wait is short (two heartbeats
        and 2 s) unless ``must_complete_join`` (Trigger.AvailableNow, which reads only what it
        is assigned now): then it waits for a stable generation that includes it, bounded by
        ``rebalanceTimeoutMs`` + ``sessionTimeoutMs`` (a member that stopped heartbeating must
        expire first), and raises :class:`GroupJoinTimeoutError` past that bound.
        """
        with self._stepping_here() as open_:
            if not open_:
                return self._book.holdings  # closed before it started
            if replaces:
                self.replace(replaces)
            wait_ms = join_wait_ms(self.settings, must_complete_join=must_complete_join)
            deadline = self._clock.monotonic_ms() + wait_ms
            self._metadata.refresh()  # a clear error now if the cluster cannot be reached
            self._metadata.start()
            holdings, closed = wait_for_assignment(
                self._poll(),
                self._poll,
                clock=self._clock,
                deadline_ms=deadline,
                poll_s=self._rebalance_poll_s,
                closing=self._closing,
            )
            if closed:
                return holdings  # the query stopped while it waited
            if must_complete_join and not has_assignment(holdings):
                self._metadata.stop()
                seen = self._client.sightings()
                group = self._client.coordinator.group
                raise GroupJoinTimeoutError(
                    error_text.join_timeout(self.settings, self.member_id, group, seen, wait_ms)
                )
            self._heartbeat.start()  # the heartbeat thread owns the member from here
            return holdings

    @contextmanager
    def _stepping_here(self) -> Iterator[bool]:
        """The calling thread steps the member until the heartbeat thread takes over (the
        join in :meth:`start`, and what precedes it): a close() on another thread waits for
        it to end. Yields False if the member is closing already."""
        self._not_starting.clear()
        try:
            yield not self._closing.is_set()
        finally:
            self._not_starting.set()

    def group_metadata(self) -> Mapping[str, int] | None:
        """The partition count of each subscribed topic in the group's last assignment or
        metadata change, as folded from the log now (call before :meth:`start` to see what
        the group knew before this member)."""
        with self._stepping_here():
            known = self._client.fold().group.latest_metadata
            return None if known is None else dict(known)

    def refresh_metadata(self) -> None:
        """Fetch topic metadata now (the background refresher does it every few heartbeats)."""
        self._metadata.refresh()

    def close(self, *, grace_s: float = LEAVE_GRACE_S) -> None:
        """Stop heartbeating; a dynamic member also leaves (Kafka's consumer.close()).

        Idempotent. Before the LEAVE it waits up to ``grace_s`` (on the member's clock) for the
        commit of a batch it handed to Spark (see :data:`LEAVE_GRACE_S`); a static member
        commits what it has and stays, as in Kafka: its partitions wait for it until its
        session timeout.
        """
        self._closing.set()  # first, so that a join wait or a background step stops now
        try:
            self._close_token.get_nowait()
        except queue.Empty:  # another thread is closing it: return once it has finished
            self._closed.wait()
            return
        try:
            # Take the member over: a join under way on the planning thread sees the closing
            # and returns; the heartbeat thread finishes its step and ends.
            self._not_starting.wait()
            self._heartbeat.stop()
            self._metadata.stop()
            if self._fatal is not None:
                return  # fenced or expired: the group gave its partitions to someone else
            self._close_owned(grace_s)
        finally:
            self._closed.set()

    def _close_owned(self, grace_s: float) -> None:
        try:
            if self.settings.instance_id is not None:
                self.write_final_commits()
                return
            if await_final_commit(
                self._uncommitted,
                clock=self._clock,
                grace_s=grace_s,
                group_id=self.settings.group_id,
            ):
                self.leave()
            else:
                # Gone already: the progress listener committed the last batch and wrote the
                # LEAVE first. What the log accepted from this member is still copied.
                self._report_durable()
        except Exception as exc:  # close() must not fail the query
            log.warning("group %s: leaving on close failed: %s", self.settings.group_id, exc)

    def _uncommitted(self) -> frozenset[TopicPartition] | None:
        """The partitions of batches handed to Spark whose commit is not in the log yet; None
        when the member is no longer in the group (left, expired or replaced)."""
        if self._client.fold().group.member(self.member_id) is None:
            return None
        self._take_commands()  # a commit Spark sent meanwhile
        # A recorded commit counts, and the progress listener's object: the LEAVE writes them
        # first, in the log itself.
        return frozenset(self._commits.uncommitted())

    # -- what the reader calls ---------------------------------------------------------------

    def poll(self) -> Holdings:
        """One protocol step (fold, tick, join/sync/heartbeat as needed) on the calling
        thread; the holdings. Only where nothing else steps the member: the join in
        :meth:`start`, and tests and simulations that step it themselves (a trigger calls
        :meth:`current_holdings`)."""
        if self._heartbeat.running:
            raise RuntimeError(
                f"poll() of member {self.member_id}: its heartbeat thread steps it since "
                "start(); call current_holdings() for what that thread last published"
            )
        return self._poll()

    def _poll(self) -> Holdings:
        self._raise_if_fatal()
        if self._closing.is_set():
            return self._book.holdings
        try:
            self._step(commit_objects=False)
        except GroupStoreError as exc:
            # Keep consuming what we own; the heartbeat thread retries with backoff.
            log.warning("group %s: group log unavailable: %s", self.settings.group_id, exc)
        self._raise_if_fatal()
        return self._book.holdings

    def current_holdings(self) -> Holdings:
        """The holdings as the background step last folded them, without reading the group
        log (a trigger never waits on the store). While a rebalance is under way it asks that
        step to run now (the rebalance's next round may wait on this member); otherwise the
        member hears of a new rebalance at its next step, within a heartbeat interval, as a
        Kafka consumer does from its heartbeat. A wake at every trigger would also put a step
        in the way of the one a commit wakes, delaying its commit object. Raises if the
        member was fenced."""
        self._raise_if_fatal()
        holdings = self._book.holdings
        if not holdings.settled:
            self.wake()
        return holdings

    def resume_checkpoint(
        self, previous_member: str, generation: int, positions: Mapping[TopicPartition, int]
    ) -> frozenset[TopicPartition]:
        """Resume a checkpoint planned by ``previous_member``, the incarnation this member
        replaces (docs/design.md, "Fetch positions", step 1).

        ``positions`` are the ends of the last batch that incarnation planned. For each
        partition this member holds again and nobody else committed since that incarnation,
        the checkpointed position stays valid: it is kept (as if held since ``generation``)
        and that batch's commit is accepted. Returns those partitions.
        """
        if not previous_member or previous_member == self.member_id:
            return frozenset()  # every trigger but a restart's first: nothing to wait for
        # Against the offsets the last step published; the book orders this with the step's
        # updates of the holdings; the step accepts that incarnation's commits from its next
        # command on (a commit sent after this one).
        resumed = self._book.resume_checkpoint(
            previous_member, generation, positions, self._committed
        )
        if resumed:
            self._commands.put(ReplaceIncarnation(previous_member))
            log.info(
                "Member %s resumes the checkpoint of %s for %s",
                self.member_id, previous_member, error_text.names(resumed),
            )  # fmt: skip
        return resumed

    def begin_batch(
        self, ends: Mapping[TopicPartition, int], *, batch_generation: int
    ) -> frozenset[TopicPartition]:
        """The partitions of a batch about to run (``ends``: its end offsets) this member may
        read: held now, and without interruption since the generation it was planned in.

        They count as in flight until a commit reaches their end offset: a partition being
        revoked is released then, by whichever commit comes first (the reader's at the next
        trigger, or the progress listener's as soon as the batch completes), not held until
        the next trigger.
        """
        self._raise_if_fatal()
        # Through the book: a partition the step is releasing right now is refused (it
        # reserved it there), and the step never holds the book's lock across I/O.
        return self._book.begin_batch(ends, batch_generation=batch_generation)

    @property
    def in_flight(self) -> BatchesInFlight:
        """The batches handed to Spark (:meth:`begin_batch`) and not yet seen committed."""
        return self._book.in_flight

    def committed_offsets(self) -> dict[TopicPartition, int]:
        """The log's committed offsets as the last step published them (no read of the
        store)."""
        return {tp: o.offset for tp, o in self._committed.items()}

    def commit(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        batch_generation: int,
        batch_member: str,
        release: Iterable[TopicPartition] = (),
    ) -> Holdings:
        """Commit a completed batch's end offsets and release revoked partitions it finished;
        the holdings as last stepped.

        Partitions the batch planned under another incarnation of the member, or before the
        member (re)acquired them, are left out: their committed offset belongs to whoever
        read them since.

        Nothing is written here, so a trigger never waits on the group log: the commit goes to
        the member's step as a command, and the step, woken now, records and writes it. With
        commit objects (the default) that is this member's commit object, which the group's
        folder brings into the log within about a fold interval; the final offsets of
        partitions being revoked, and their releases, go to the log directly in one append, so
        that their new owner starts exactly there. If the store is unavailable the commit is
        kept and retried.
        """
        self._commands.put(
            RecordCommit(dict(offsets), batch_generation, batch_member, frozenset(release))
        )
        self.wake()
        return self._book.holdings
