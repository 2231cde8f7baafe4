"""What a member writes at one step: a pure function of the folded group, its pending work and
the time.

:class:`~spark_kafka_group.member.member.GroupMember` (a query's member), the simulation and
the property tests all step through :func:`decide_step`; they differ only in how they reach
the log (the Delta group log or the in-memory one) and in how time passes.

A member writes only when it has something to say: a join, the leader's assignment, a commit,
a released partition, a metadata change, or an expiry it observed. Its liveness is a lease
outside the log (:mod:`spark_kafka_group.store.leases`); it writes HEARTBEAT records only when
it has no lease store, or while the group still holds a member of a release before leases
(which judges liveness by records alone; see ``JoinRequest.features``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from spark_kafka_group.group import (
    GroupCoordinator,
    GroupError,
    GroupRecord,
    GroupState,
    JoinRequest,
    Partitions,
    RebalanceProtocol,
    RecordKind,
    TopicPartition,
)
from spark_kafka_group.group.clocks import Sightings, SingleClock, rebalance_deadline_ms
from spark_kafka_group.group.messages import CommitResponse
from spark_kafka_group.group.metadata import LEASES
from spark_kafka_group.group.offsets import Source, commit_batch, fold_commit_objects
from spark_kafka_group.group.types import CommitObject, RecordedOffset
from spark_kafka_group.member.in_flight import BatchesInFlight

R = TypeVar("R")

#: How often a member compares topic metadata with the group's assignment snapshot (new
#: partitions, topics matching a pattern), in heartbeat intervals.
METADATA_CHECK_EVERY_HEARTBEATS = 10
#: A member without leases of its own still refreshes the records of older members this often
#: (a fraction of its session timeout), so that they never take it for dead.
LOG_HEARTBEATS_PER_SESSION = 3


@dataclass(frozen=True)
class PendingWork:
    """What the member's reader has to say."""

    #: End offsets of completed batches, to commit (each with the member's generation when
    #: it recorded it).
    offsets: Mapping[TopicPartition, RecordedOffset] = field(default_factory=dict)
    #: Revoked partitions whose last batch completed, to release.
    release: Partitions = frozenset()
    #: The batches handed to Spark: a partition being revoked is released once a commit
    #: reaches the end of its last batch.
    in_flight: BatchesInFlight = field(default_factory=BatchesInFlight)
    #: Everything the member held after its previous step (what a cooperative rejoin owns).
    held: Partitions = frozenset()
    #: It held a generation before: if the group no longer knows it (expired), it must not
    #: rejoin under the same id, whose late commits the group keeps rejecting.
    had_generation: bool = False


@dataclass(frozen=True)
class Timers:
    """When the member last wrote, and last checked topic metadata (its clock, ms)."""

    last_write_ms: int = -(10**15)
    last_metadata_check_ms: int = -(10**15)


@dataclass(frozen=True)
class Decision:
    records: list[GroupRecord]
    timers: Timers
    commit: CommitResponse | None = None
    join_error: GroupError = GroupError.NONE
    #: Keys of the commit objects this step folded completely (``offsets.fold_commit_objects``).
    folded: frozenset[str] = frozenset()
    #: Decide again with these members' commit objects: the step would remove them from the
    #: group (EXPIRE) and their last commits must land first, in the same append.
    needs_objects: frozenset[str] = frozenset()


@dataclass(frozen=True)
class StepContext:
    """The member's fixed facts, and what it observed outside the log at this step."""

    #: Its join request (``owned`` is filled in at each join).
    request: JoinRequest
    heartbeat_interval_ms: int
    #: Topic partition counts (None: not fetched yet; the leader waits to assign).
    topics: Mapping[str, int] | None = None
    #: What the member saw and when, on its own clock (None: the one-clock world of tests
    #: that step the handlers by hand; see :mod:`spark_kafka_group.group.clocks`).
    seen: Sightings | None = None
    #: This member keeps its liveness in a lease (else in HEARTBEAT records).
    leases: bool = False
    #: The group's members record commits in commit objects (else: in the log directly).
    uses_commit_objects: bool = False
    #: Commit objects to fold into the log at this step, by their store's key (a member's own
    #: and its progress listener's: ``store.commit_objects.object_key``).
    commit_objects: Mapping[str, CommitObject] = field(default_factory=dict)
    #: Members whose objects were looked up for this step (found or not).
    objects_looked_up: frozenset[str] = frozenset()

    @property
    def member_id(self) -> str:
        return self.request.member_id

    @property
    def instance_id(self) -> str | None:
        return self.request.instance_id


def _apply(
    work: GroupCoordinator, out: list[GroupRecord], result: tuple[list[GroupRecord], R]
) -> R:
    """A handler's result: its records applied to ``work`` and kept in ``out`` (the one place
    a step applies records), its response returned."""
    records, response = result
    work.apply_all(records)
    out.extend(records)
    return response


def decide_step(
    work: GroupCoordinator, now: int, ctx: StepContext, pending: PendingWork, timers: Timers
) -> Decision:
    """One step's records, decided on ``work`` (a fork of the folded group, changed here)."""
    out: list[GroupRecord] = []
    folded: set[str] = set()
    if ctx.commit_objects:  # first: a commit recorded before a rebalance or an expiry
        folded = _apply(work, out, fold_commit_objects(work.group, ctx.commit_objects, now))
    commit = _commit_and_release(work, now, ctx, pending, out)
    ticked = work.tick(now, ctx.seen)
    if ctx.uses_commit_objects:
        expiring = {r.member_id for r in ticked if r.kind == RecordKind.EXPIRE and r.member_id}
        have = {obj.member_id for obj in ctx.commit_objects.values()}
        missing = expiring - have - ctx.objects_looked_up
        if missing:  # a crashed member's recorded commits are not lost: fold them first
            return Decision([], timers, needs_objects=frozenset(missing))
    work.apply_all(ticked)
    out.extend(ticked)
    join_error, metadata_checked = _protocol_step(work, now, ctx, pending, timers, out)
    me = ctx.member_id
    wrote = any(r.member_id == me and r.kind != RecordKind.EXPIRE for r in out)
    return Decision(
        records=out,
        timers=Timers(
            last_write_ms=now if wrote else timers.last_write_ms,
            last_metadata_check_ms=now if metadata_checked else timers.last_metadata_check_ms,
        ),
        commit=commit,
        join_error=join_error,
        folded=frozenset(folded),
    )


def _commit_and_release(
    work: GroupCoordinator,
    now: int,
    ctx: StepContext,
    pending: PendingWork,
    out: list[GroupRecord],
) -> CommitResponse | None:
    me = ctx.member_id
    view = work.member_view(me)
    if not view.known or view.fenced:
        return None
    response = _apply(
        work,
        out,
        commit_batch(
            work.group,
            me,
            pending.offsets,
            now,
            source=Source.MEMBER,
            newest=pending.in_flight.ends,
        ),
    )
    revoking = view.revoking
    # Whose last batch is committed (this write's commit included): released too.
    finished = {tp for tp in revoking if pending.in_flight.finished(tp, work.group.offsets)}
    to_release = (pending.release | finished) & revoking
    if to_release:
        _apply(
            work,
            out,
            work.ack_revocation(
                me, view.group_generation, sorted(to_release), now, instance_id=ctx.instance_id
            ),
        )
    return response


def _heartbeat_interval_in_log(work: GroupCoordinator, ctx: StepContext) -> int | None:
    """How often this member must write a HEARTBEAT record (None: never)."""
    if not ctx.leases:
        return ctx.heartbeat_interval_ms
    if not work.group.all_have(LEASES):  # a member of an older release judges by records
        return ctx.request.session_timeout_ms // LOG_HEARTBEATS_PER_SESSION
    return None


def _eager_join_waits(
    work: GroupCoordinator, now: int, ctx: StepContext, pending: PendingWork
) -> bool:
    """Whether a JOIN that gives up everything the member holds (an eager protocol) waits.

    As a Kafka consumer commits in ``onJoinPrepare`` before it sends its JoinGroup, the member
    first lets the batches it handed to Spark finish and their commits land (meanwhile its
    reader plans no new batch: the partitions count as being revoked), so that their next
    owner starts after them. A batch planned before the JOIN could no longer commit after it.
    It waits at most half its rebalance timeout into the rebalance; then it joins anyway (the
    batch's partitions are read again from their last commit), not to be left out of it."""
    if not pending.in_flight.uncommitted(work.group.offsets):
        return False
    seen = ctx.seen if ctx.seen is not None else SingleClock(now)
    deadline = rebalance_deadline_ms(work.group, seen)
    if deadline is None:
        return False
    return seen.now_ms < deadline - ctx.request.rebalance_timeout_ms // 2


def _protocol_step(
    work: GroupCoordinator,
    now: int,
    ctx: StepContext,
    pending: PendingWork,
    timers: Timers,
    out: list[GroupRecord],
) -> tuple[GroupError, bool]:
    """Join, assign, check metadata or heartbeat, as the group needs from this member."""
    me, instance = ctx.member_id, ctx.instance_id

    def do(result: tuple[list[GroupRecord], R]) -> R:
        return _apply(work, out, result)

    def wrote() -> bool:  # any record of a member counts as its heartbeat
        return any(r.member_id == me and r.kind != RecordKind.EXPIRE for r in out)

    view = work.member_view(me)
    if view.fenced or (not view.known and pending.had_generation):
        return GroupError.NONE, False
    every = _heartbeat_interval_in_log(work, ctx)
    heartbeat_due = every is not None and now - timers.last_write_ms >= every
    join_error = GroupError.NONE
    metadata_checked = False
    if view.needs_join and not (
        view.gives_up_at_join and _eager_join_waits(work, now, ctx, pending)
    ):
        cooperative = work.rebalance_protocol() is not RebalanceProtocol.EAGER
        owned = pending.held if view.known and cooperative else frozenset()
        response = do(work.join(replace(ctx.request, owned=owned), now, seen=ctx.seen))
        join_error = response.error
        # The last member to join completes the phase: a leader assigns in the same write
        # instead of one poll later (Kafka's JoinGroup response reaches it at once too).
        view = work.member_view(me)
    if view.awaiting_sync and view.is_leader and ctx.topics is not None:
        do(
            work.sync(
                me,
                view.group_generation,
                now,
                instance_id=instance,
                metadata=ctx.topics,
                seen=ctx.seen,
            )
        )
    elif view.state == GroupState.STABLE and view.known:
        check_every = METADATA_CHECK_EVERY_HEARTBEATS * ctx.heartbeat_interval_ms
        if ctx.topics is not None and now - timers.last_metadata_check_ms >= check_every:
            metadata_checked = True
            do(work.metadata_changed(me, ctx.topics, now, instance_id=instance))
        if heartbeat_due and not wrote():
            do(work.heartbeat(me, view.member_generation, now, instance_id=instance))
    elif heartbeat_due and view.known and not wrote():
        do(work.heartbeat(me, view.member_generation, now, instance_id=instance))
    return join_error, metadata_checked
