"""The group member that lives in a query's streaming-source process on the driver.

It drives the pure protocol (:mod:`spark_kafka_group.group`, see its package docstring for
the sequence) over the group log: join, wait for the others, sync (the leader assigns),
heartbeat, commit, release revoked partitions, rejoin when fenced. A background thread
(:mod:`.heartbeat`) steps it every heartbeat interval, and at once when the reader asks (a
``commit``, or a ``latestOffset`` during a rebalance); from then on that thread owns the
member's state.

A member is two parts: the owner loop that steps the protocol
(:class:`~spark_kafka_group.member.membership.Membership`, with its start and close), and the
handle the reader holds (:class:`GroupMember`, here). The reader never waits on the group
log: the handle reads what the last step published (the :class:`~.view.Published` snapshot:
the member id, the committed offsets, a failure; swapped whole), sends its commits as
commands (:mod:`.commands`), and claims a batch's partitions through the holdings book, whose
small lock no step holds across a read or write of the store. The two share nothing else.

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
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from spark_kafka_group.group.metadata import Partitions, TopicPartition
from spark_kafka_group.member import error_text
from spark_kafka_group.member.close import LEAVE_GRACE_S
from spark_kafka_group.member.commands import RecordCommit, ReplaceIncarnation
from spark_kafka_group.member.in_flight import BatchesInFlight
from spark_kafka_group.member.join import SubscriptionSpec, new_member_id
from spark_kafka_group.member.log_client import GroupLogClient
from spark_kafka_group.member.membership import Membership
from spark_kafka_group.member.view import Holdings
from spark_kafka_group.options import GroupSettings, SourceOptions

if TYPE_CHECKING:
    from spark_kafka_group.kafka.cluster import KafkaCluster

__all__ = ["LEAVE_GRACE_S", "GroupMember", "SubscriptionSpec", "new_member_id"]

log = logging.getLogger(__name__)


class GroupMember:
    """The member of one ``kafka-group`` query, as its reader holds it (see the module
    docstring); the arguments are the owner loop's (:class:`Membership`)."""

    def __init__(self, settings: GroupSettings, **loop_args: Any) -> None:
        self._loop = Membership(settings, **loop_args)
        self._book = self._loop.book

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

    @property
    def loop(self) -> Membership:
        """The owner loop (simulations and tests step it by hand)."""
        return self._loop

    @property
    def settings(self) -> GroupSettings:
        return self._loop.settings

    @property
    def member_id(self) -> str:
        """The member's id as of the last step (a new one after it expired and rejoined)."""
        return self._loop.published.member_id

    @property
    def failure(self) -> Exception | None:
        """Why the member stopped for good (fenced, a refused option), or None."""
        return self._loop.published.failure

    @property
    def client(self) -> GroupLogClient:
        """The member's view of the group log (read-only use: inspection, simulation)."""
        return self._loop.client

    @property
    def on_durable(self) -> Callable[[dict[TopicPartition, int]], None] | None:
        """Called with offsets of this member that became durable in the log, whoever wrote
        them (commitToKafka copies them)."""
        return self._loop.on_durable

    @on_durable.setter
    def on_durable(self, callback: Callable[[dict[TopicPartition, int]], None] | None) -> None:
        self._loop.on_durable = callback

    # -- lifecycle: the owner loop's ---------------------------------------------------------

    def start(self, *, replaces: str | None = None, must_complete_join: bool = False) -> Holdings:
        """Join and wait for the first assignment (see :meth:`Membership.start`)."""
        return self._loop.start(replaces=replaces, must_complete_join=must_complete_join)

    def group_metadata(self) -> Mapping[str, int] | None:
        """See :meth:`Membership.group_metadata`."""
        return self._loop.group_metadata()

    def refresh_metadata(self) -> None:
        """Fetch topic metadata now (the background refresher does it every few heartbeats)."""
        self._loop.refresh_metadata()

    def close(self, *, grace_s: float = LEAVE_GRACE_S) -> None:
        """Stop heartbeating; a dynamic member also leaves (see :meth:`Membership.close`)."""
        self._loop.close(grace_s=grace_s)

    def poll(self) -> Holdings:
        """One protocol step on the calling thread (see :meth:`Membership.poll`)."""
        return self._loop.poll()

    # -- what the reader calls ---------------------------------------------------------------

    @property
    def holdings(self) -> Holdings:
        """The holdings after the last step (without stepping, unlike :meth:`poll`)."""
        return self._book.holdings

    def _raise_if_failed(self) -> None:
        failure = self._loop.published.failure
        if failure is not None:
            raise failure

    def current_holdings(self) -> Holdings:
        """The holdings as the background step last folded them, without reading the group
        log (a trigger never waits on the store). While a rebalance is under way it asks that
        step to run now (the rebalance's next round may wait on this member); otherwise the
        member hears of a new rebalance at its next step, within a heartbeat interval, as a
        Kafka consumer does from its heartbeat. A wake at every trigger would also put a step
        in the way of the one a commit wakes, delaying its commit object. Raises if the
        member was fenced."""
        self._raise_if_failed()
        holdings = self._book.holdings
        if not holdings.settled:
            self._loop.wake()
        return holdings

    def resume_checkpoint(
        self, previous_member: str, generation: int, positions: Mapping[TopicPartition, int]
    ) -> Partitions:
        """Resume a checkpoint planned by ``previous_member``, the incarnation this member
        replaces (docs/design.md, "Fetch positions", step 1).

        ``positions`` are the ends of the last batch that incarnation planned. For each
        partition this member holds again and nobody else committed since that incarnation,
        the checkpointed position stays valid: it is kept (as if held since ``generation``)
        and that batch's commit is accepted. Returns those partitions.
        """
        published = self._loop.published
        if not previous_member or previous_member == published.member_id:
            return frozenset()  # every trigger but a restart's first: nothing to wait for
        # Against the offsets the last step published; the book orders this with the step's
        # updates of the holdings; the step accepts that incarnation's commits from its next
        # command on (a commit sent after this one).
        resumed = self._book.resume_checkpoint(
            previous_member, generation, positions, published.committed
        )
        if resumed:
            self._loop.send(ReplaceIncarnation(previous_member))
            log.info(
                "Member %s resumes the checkpoint of %s for %s",
                published.member_id, previous_member, error_text.names(resumed),
            )  # fmt: skip
        return resumed

    def begin_batch(
        self, ends: Mapping[TopicPartition, int], *, batch_generation: int
    ) -> Partitions:
        """The partitions of a batch about to run (``ends``: its end offsets) this member may
        read: held now, and without interruption since the generation it was planned in.

        They count as in flight until a commit reaches their end offset: a partition being
        revoked is released then, by whichever commit comes first (the reader's at the next
        trigger, or the progress listener's as soon as the batch completes), not held until
        the next trigger.
        """
        self._raise_if_failed()
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
        return {tp: o.offset for tp, o in self._loop.published.committed.items()}

    def group_members(self) -> frozenset[str]:
        """The group's members as the last step published them (no read of the store)."""
        return self._loop.published.members

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
        self._loop.send(
            RecordCommit(dict(offsets), batch_generation, batch_member, frozenset(release))
        )
        self._loop.wake()
        return self._book.holdings
