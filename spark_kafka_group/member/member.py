"""The group member that lives in a query's streaming-source process on the driver.

It drives the pure protocol (:mod:`spark_kafka_group.group`, see its package docstring for
the sequence) over the group log: join, wait for the others, sync (the leader assigns),
heartbeat, commit, release revoked partitions, rejoin when fenced. A background thread
(:mod:`.heartbeat`) steps it every heartbeat interval; the reader steps it on every
``latestOffset`` too (``poll``).

What the reader sees is a :class:`MemberAssignment`: the partitions it may plan (``held``
minus ``revoking``), the ones it must finish and release (``revoking``), and for each partition
the generation since which this member holds it continuously (``held_since``): a batch
planned before that generation must neither supply a position nor commit for it.

The reader tells the member which partitions each batch reads and up to where
(:meth:`GroupMember.begin_batch`). A partition being revoked is released by the first step
after a commit reaches that end: the reader's own commit at the next trigger, or, usually
much sooner, the progress listener's commit of the completed batch (read from the group
log by the heartbeat thread), so the new owner does not wait for this query's next trigger.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from spark_kafka_group.errors import (
    GroupJoinTimeoutError,
    GroupStoreError,
    MemberFencedError,
    OptionError,
)
from spark_kafka_group.group import (
    GroupConfig,
    GroupCoordinator,
    GroupError,
    GroupRecord,
    GroupState,
    JoinRequest,
    TopicPartition,
)
from spark_kafka_group.group.metadata import FEATURES, IMPLICIT_REJOIN, LEASES, OffsetAndMetadata
from spark_kafka_group.group.timer import Clock
from spark_kafka_group.member.commit_fold import COMMIT_FOLD_INTERVAL_MS, FOLD_FALLBACK_INTERVALS
from spark_kafka_group.member.decide import (
    METADATA_CHECK_EVERY_HEARTBEATS,
    Decision,
    PendingWork,
    StepContext,
    Timers,
    decide_step,
)
from spark_kafka_group.member.heartbeat import HeartbeatThread
from spark_kafka_group.member.in_flight import BatchesInFlight, PlannedBatch
from spark_kafka_group.member.listener import RebalanceListenerRunner
from spark_kafka_group.member.log_client import Attempt, GroupLogClient
from spark_kafka_group.member.topic_metadata import TopicMetadataCache
from spark_kafka_group.member.view import MemberAssignment
from spark_kafka_group.options import GroupSettings, SourceOptions
from spark_kafka_group.store.commit_objects import CommitObject, CommitObjectStore, RecordedOffset
from spark_kafka_group.store.log_store import LeaseStore, LogStore
from spark_kafka_group.store.table_properties import retention_properties

if TYPE_CHECKING:
    from spark_kafka_group.kafka.cluster import KafkaCluster

log = logging.getLogger(__name__)


#: While the group rebalances, the member reads the log this often instead of every heartbeat
#: interval (a Kafka member's JoinGroup and SyncGroup are long polls answered at once; this is
#: ours)...
REBALANCE_POLL_MS = 100
#: ...and each member of a large group less often, so that the whole group reads the log at
#: most this many times a second whatever its size (capped at the heartbeat interval).
GROUP_READS_PER_S = 100


def rebalance_poll_ms(members: int, heartbeat_interval_ms: int) -> int:
    """How often a member reads the log while its group rebalances."""
    return max(REBALANCE_POLL_MS, min(heartbeat_interval_ms, 1000 * members // GROUP_READS_PER_S))


def pause(clock: Clock, seconds: float, *, until: threading.Event) -> bool:
    """Wait ``seconds`` on ``clock``, ending early once ``until`` is set (noticed within
    :data:`REBALANCE_POLL_MS`); whether it is set. A test clock moves instead of blocking."""
    end = clock.monotonic_ms() + round(seconds * 1000)
    while not until.is_set():
        left_ms = end - clock.monotonic_ms()
        if left_ms <= 0:
            return False
        clock.sleep(min(left_ms, REBALANCE_POLL_MS) / 1000.0)
    return True


#: When a dynamic member closes with a batch whose commit has not reached the log yet, how long
#: it waits for that commit (the progress listener writes it once the batch completes) before
#: it leaves anyway: a commit written after the LEAVE would be refused, and the new owner would
#: read that batch again.
LEAVE_GRACE_S = 2.0


@dataclass(frozen=True)
class SubscriptionSpec:
    topics: tuple[str, ...] = ()
    pattern: str | None = None


def new_member_id(client_id: str = "") -> str:
    """Kafka-style member id: client id, where, and a random part (one per incarnation)."""
    prefix = f"{client_id}-" if client_id else ""
    return f"{prefix}{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:12]}"


class GroupMember:
    def __init__(
        self,
        settings: GroupSettings,
        *,
        subscription: SubscriptionSpec,
        topic_counts: Callable[[], Mapping[str, int]],
        client_id: str = "spark-kafka-group",
        clock: Clock | None = None,
        log: LogStore | None = None,
        leases: LeaseStore | None = None,
        commit_objects: CommitObjectStore | None = None,
        member_id: str | None = None,
        config: GroupConfig | None = None,
        features: Iterable[str] | None = None,
        random_seed: int | None = None,
    ) -> None:
        """``log`` and ``leases``: the group log and the leases (default: the Delta group log
        under ``settings.store`` and its lease files; with ``log`` given, ``leases=None``
        keeps liveness in the log as HEARTBEAT records). ``commit_objects``: where commits
        are recorded (default: files next to the Delta group log; with ``log`` given and no
        ``commit_objects``, every commit is an append to the log). ``features``: what the member
        announces beyond Kafka's classic protocol (default: all it can; the simulation turns
        them off to measure the classic protocol). ``random_seed``: of the conflict backoff's jitter
        (the simulation repeats exactly)."""
        self.settings = settings
        self._subscription = subscription
        self._metadata = TopicMetadataCache(
            topic_counts,
            interval_s=METADATA_CHECK_EVERY_HEARTBEATS * settings.heartbeat_interval_ms / 1000.0,
        )
        self._client_id = client_id
        self._client = GroupLogClient(
            settings.store,
            settings.group_id,
            storage_options=settings.storage_options,
            config=config
            or GroupConfig(
                scheduled_rebalance_max_delay_ms=settings.scheduled_rebalance_max_delay_ms,
                assignors=settings.assignors,
                initial_rebalance_delay_ms=settings.initial_rebalance_delay_ms,
            ),
            clock=clock,
            log=log,
            leases=leases,
            commit_objects=commit_objects,
            random_seed=random_seed,
            table_properties=retention_properties(settings.log_retention_ms),
        )
        self._leases = leases = self._client.leases
        if features is None:
            features = FEATURES if leases is not None else (IMPLICIT_REJOIN,)
        self._features = tuple(sorted(features))
        # On the member's monotonic clock: when it last listed and renewed the leases.
        self._leases_read_ms = -(10**15)
        self._lease_renewed_ms = -(10**15)
        # Its lease's renewal number: grows at every renewal (see store/leases.py).
        self._lease_number = 0
        self._clock = self._client.clock
        self._lock = threading.RLock()
        self.member_id = member_id or new_member_id(client_id)
        self._assignment = MemberAssignment(generation=-1, member_id=self.member_id)
        self._timers = Timers()
        # Commits recorded in commit objects: the newest offset per partition not yet seen in
        # the log (with the generation it was recorded in), what the last object held, its
        # sequence number, and for each partition with a recorded commit, the log's offset
        # when it began to wait and since when (this member's clock): the log not moving for
        # a few fold intervals means the folder is gone.
        self._objects = self._client.commit_objects
        self._recorded: dict[TopicPartition, RecordedOffset] = {}
        self._written: dict[TopicPartition, RecordedOffset] = {}
        self._object_seq = 0
        self._waiting: dict[TopicPartition, tuple[int | None, int]] = {}
        # As the group's folder: when it last folded, and the objects it has folded.
        self._folded_ms = -(10**15)
        self._folded_seq: dict[str, int] = {}
        self._seen_seq: dict[str, int] = {}
        self._fold_started_ms: int | None = None
        #: Called with offsets of this member that became durable in the log, whoever wrote
        #: them (commitToKafka copies them); and what it was last called with.
        self.on_durable: Callable[[dict[TopicPartition, int]], None] | None = None
        self._reported: dict[TopicPartition, int] = {}
        # Offsets and releases waiting to be written to the log directly (the final offsets of
        # partitions being revoked; every commit without commit objects).
        self._pending_offsets: dict[TopicPartition, int] = {}
        self._pending_release: set[TopicPartition] = set()
        # The batches handed to Spark: a partition being revoked is released once a commit
        # reaches the end of its last batch (decide.py).
        self._in_flight = BatchesInFlight()
        self._fatal: Exception | None = None
        # Earlier incarnations of this query (from its checkpoint) whose batches it resumes.
        self._adopted_members: set[str] = set()
        # The previous incarnation this member replaces at its first join (see start()).
        self._replacing: str | None = None
        # Set when close() begins: no further protocol step may write (a step after the LEAVE
        # would join the group again under a new id), and a join wait stops.
        self._closing = threading.Event()
        self._close_lock = threading.Lock()
        self._closed = False
        self._listener = RebalanceListenerRunner.load(settings.rebalance_listener)
        self._heartbeat = HeartbeatThread(self._background_step, self.next_step_delay_s)
        #: Asks the background step to run now (the simulation replaces it).
        self.wake: Callable[[], None] = self._heartbeat.wake

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

    def start(
        self, *, replacing: str | None = None, must_complete_join: bool = False
    ) -> MemberAssignment:
        """Join and wait for the first assignment; then heartbeat in the background.

        ``replacing``: the member id of this query's previous incarnation (from its
        checkpoint). If it is still in the group (stopped by a crash, or still finishing its
        close), this member takes its place and its partitions at once, without waiting for
        its session timeout, and the old id is fenced.

        As a Kafka consumer's first poll, it waits for the rebalance its join started to give
        it partitions: with the cooperative protocol that is the second round at the earliest
        (the first only revokes them from the others). Otherwise the query's first batch is
        empty and its first records come a trigger later. The wait is short (two heartbeats
        and 2 s) unless ``must_complete_join`` (Trigger.AvailableNow, which reads only what it
        is assigned now): then it waits for a stable generation that includes it, bounded by
        ``rebalanceTimeoutMs`` + ``sessionTimeoutMs`` (a member that stopped heartbeating must
        expire first), and raises :class:`GroupJoinTimeoutError` past that bound.
        """
        settings = self.settings
        if replacing:
            self.takes_over(replacing)
        if must_complete_join:
            wait_ms = settings.rebalance_timeout_ms + settings.session_timeout_ms
        else:
            wait_ms = (
                2 * settings.heartbeat_interval_ms + 2000 + settings.initial_rebalance_delay_ms
            )
        deadline = self._clock.monotonic_ms() + wait_ms
        self._metadata.refresh()  # a clear error now if the cluster cannot be reached
        self._metadata.start()
        assignment = self.poll()

        def ready(a: MemberAssignment) -> bool:
            return a.settled or (a.stable and bool(a.held))

        while not ready(assignment) and self._clock.monotonic_ms() < deadline:
            if pause(self._clock, self._rebalance_poll_s(), until=self._closing):
                return assignment  # the query stopped while it waited
            assignment = self.poll()
        if must_complete_join and not ready(assignment):
            self._heartbeat.stop()
            self._metadata.stop()
            raise GroupJoinTimeoutError(self._join_timeout_message(wait_ms))
        self._heartbeat.start()
        return assignment

    def takes_over(self, previous_member_id: str) -> None:
        """At its next join, replace ``previous_member_id`` (this query's previous incarnation)
        if it is still in the group, and accept the commits of the batches it planned."""
        if previous_member_id != self.member_id:
            self._replacing = previous_member_id
            self._adopted_members.add(previous_member_id)

    @property
    def client(self) -> GroupLogClient:
        """The member's view of the group log (read-only use: inspection, simulation)."""
        return self._client

    @property
    def assignment(self) -> MemberAssignment:
        """The assignment after the last step (without stepping, unlike :meth:`poll`)."""
        return self._assignment

    @property
    def failure(self) -> Exception | None:
        """Why the member stopped for good (fenced, a refused option), or None."""
        return self._fatal

    def group_metadata(self) -> Mapping[str, int] | None:
        """The partition count of each subscribed topic in the group's last assignment or
        metadata change, as folded from the log now (call before :meth:`start` to see what
        the group knew before this member)."""
        with self._lock:
            known = self._client.fold().group.latest_metadata
            return None if known is None else dict(known)

    def refresh_metadata(self) -> None:
        """Fetch topic metadata now (the background refresher does it every few heartbeats)."""
        self._metadata.refresh()

    def close(self, *, grace_s: float = LEAVE_GRACE_S) -> None:
        """Stop heartbeating; a dynamic member also leaves (Kafka's consumer.close()).

        Idempotent. Before the LEAVE it waits up to ``grace_s`` for the commit of a batch it
        handed to Spark (see :data:`LEAVE_GRACE_S`); a static member commits what it has and
        stays, as in Kafka: its partitions wait for it until its session timeout.
        """
        self._closing.set()  # first, so that a join wait or a background step stops now
        with self._close_lock:  # a second caller returns once the first has finished
            if self._closed:
                return
            self._closed = True
            self._heartbeat.stop()
            self._metadata.stop()
            if self._fatal is not None:
                return  # fenced or expired: the group gave its partitions to someone else
            try:
                if self.settings.instance_id is not None:
                    with self._lock:
                        self._flush_recorded()
                        if self._pending_offsets or self._pending_release:
                            self._step()
                    return
                if self._await_final_commit(grace_s):
                    self.leave()
                else:
                    # Gone already: the progress listener committed the last batch and wrote
                    # the LEAVE first. What the log accepted from this member is still copied.
                    with self._lock:
                        self._report_durable()
            except Exception as exc:  # close() must not fail the query
                log.warning("group %s: leaving on close failed: %s", self.settings.group_id, exc)

    def _await_final_commit(self, grace_s: float) -> bool:
        """Wait (bounded) until every batch this member handed to Spark is committed; False
        when the member is no longer in the group (left, expired or replaced meanwhile)."""
        deadline = self._clock.monotonic_ms() + round(grace_s * 1000)
        while True:
            with self._lock:
                group = self._client.fold().group
                if group.member(self.member_id) is None:
                    return False
                # A recorded commit counts: the LEAVE writes it first, in the log itself.
                uncommitted = self._in_flight.uncommitted(self._committed_with_recorded())
            left_ms = deadline - self._clock.monotonic_ms()
            if not uncommitted or left_ms <= 0:
                if uncommitted:
                    log.info(
                        "group %s: leaving without a commit of %s: the last batch did not "
                        "complete (its new owner reads it from the last commit)",
                        self.settings.group_id, _names(uncommitted),
                    )  # fmt: skip
                return True
            self._clock.sleep(min(left_ms, REBALANCE_POLL_MS) / 1000.0)

    def _join_timeout_message(self, wait_ms: int) -> str:
        settings = self.settings
        group = self._client.coordinator.group
        seen = self._client.sightings()
        laggards = []
        for m in group.members.values():
            if m.member_id == self.member_id:
                continue
            if group.state == GroupState.PREPARING_REBALANCE and not m.joined:
                silent_s = (seen.now_ms - seen.heard_ms(m)) / 1000
                laggards.append(
                    f"{m.member_id} (did not rejoin; silent for {silent_s:.0f} s, its session "
                    f"timeout of {m.session_timeout_ms / 1000:.0f} s expires it)"
                )
            elif group.state == GroupState.COMPLETING_REBALANCE and m.member_id == group.leader:
                laggards.append(f"{m.member_id} (leader, did not assign)")
            elif m.revoking:
                laggards.append(f"{m.member_id} (did not release {len(m.revoking)} partitions)")
        return (
            f"Group {settings.group_id!r} did not give member {self.member_id} a stable "
            f"assignment within {wait_ms / 1000:.0f} s (rebalanceTimeoutMs "
            f"{settings.rebalance_timeout_ms} + sessionTimeoutMs {settings.session_timeout_ms}); "
            f"the group is {group.state.value}. Members that did not rejoin: "
            f"{', '.join(laggards) or '(none: the group log could not be written)'}. "
            "A Trigger.AvailableNow run reads only what it is assigned, so it stops here "
            "rather than end having read nothing. Stop those queries or wait for them to "
            "expire; or give this run a rebalanceTimeoutMs + sessionTimeoutMs longer than "
            "their session timeout (use the same timeouts for every query of the group)."
        )

    def leave(self, reason: str = "the query left the group") -> None:
        """Write LEAVE now, so the group rebalances at once instead of after the timeout."""
        with self._lock:
            self._flush_recorded()
            if self._pending_offsets or self._pending_release:
                self._step()  # the final commit first

            def decide(work: GroupCoordinator, now: int) -> tuple[list[GroupRecord], None]:
                if work.group.member(self.member_id) is None:
                    return [], None
                records, _ = work.leave(
                    self.member_id,
                    now,
                    instance_id=self.settings.instance_id,
                    reason=reason,
                    seen=self._client.sightings(),
                )
                return records, None

            self._client.transact(decide)
            self._report_durable()
            self._drop_lease(self.member_id)
            self._drop_objects(self.member_id)
            # Gone from the group because it left: say so, and neither call it an expiry nor
            # rejoin (what _update_view does for a member the group no longer knows). As
            # Kafka's onLeavePrepare, the listener hears "revoked", not "lost".
            given_up = sorted(self._assignment.held)
            log.info(
                "Left group %s as member %s%s", self.settings.group_id, self.member_id,
                f", giving up {_names(given_up)}" if given_up else "",
            )  # fmt: skip
            self._in_flight = BatchesInFlight()
            self._assignment = MemberAssignment(generation=-1, member_id=self.member_id)
            if given_up:
                self._listener.revoked(given_up)

    # -- what the reader calls ---------------------------------------------------------------

    def poll(self) -> MemberAssignment:
        """One protocol step (fold, tick, join/sync/heartbeat as needed); the assignment."""
        with self._lock:
            self._raise_if_fatal()
            if self._closing.is_set():
                return self._assignment
            try:
                self._step()
            except GroupStoreError as exc:
                # Keep consuming what we own; the heartbeat thread retries with backoff.
                log.warning("group %s: group log unavailable: %s", self.settings.group_id, exc)
            self._raise_if_fatal()
            return self._assignment

    def adopt(
        self, previous_member: str, generation: int, positions: Mapping[TopicPartition, int]
    ) -> frozenset[TopicPartition]:
        """Resume a restarted query's checkpoint (docs/design.md, "Fetch positions", step 1).

        ``positions`` are the ends of the last batch the query's previous incarnation
        planned. For each partition this member holds again and nobody else committed since
        that incarnation, the checkpointed position stays valid: it is kept (as if held since
        ``generation``) and that batch's commit is accepted. Returns those partitions.
        """
        with self._lock:
            if not previous_member or previous_member == self.member_id:
                return frozenset()
            committed = self._client.coordinator.group.offsets
            adopted = frozenset(
                tp
                for tp, position in positions.items()
                if tp in self._assignment.held
                and (
                    tp not in committed
                    or (
                        committed[tp].member_id == previous_member
                        and committed[tp].offset <= position
                    )
                )
            )
            if adopted:
                since = dict(self._assignment.held_since)
                for tp in adopted:
                    since[tp] = min(since.get(tp, generation), generation)
                self._assignment = replace(self._assignment, held_since=since)
                self._adopted_members.add(previous_member)
                log.info(
                    "Member %s resumes the checkpoint of %s for %s",
                    self.member_id, previous_member, _names(adopted),
                )  # fmt: skip
            return adopted

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
        with self._lock:  # against a release by the heartbeat thread in between
            self._raise_if_fatal()
            assignment = self._assignment
            ours = frozenset(tp for tp in ends if assignment.held_throughout(tp, batch_generation))
            batch = PlannedBatch({tp: ends[tp] for tp in ours}, batch_generation, self.member_id)
            self._in_flight = self._in_flight.begin(batch)
            return ours

    @property
    def in_flight(self) -> BatchesInFlight:
        """The batches handed to Spark (:meth:`begin_batch`) and not yet seen committed."""
        return self._in_flight

    def committed_offsets(self) -> dict[TopicPartition, int]:
        with self._lock:
            offsets = self._client.coordinator.group.offsets
            return {tp: o.offset for tp, o in offsets.items()}

    def commit(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        batch_generation: int,
        batch_member: str,
        release: Iterable[TopicPartition] = (),
    ) -> MemberAssignment:
        """Commit a completed batch's end offsets and release revoked partitions it finished;
        the assignment after it (the commit's write also steps the protocol).

        Partitions the batch planned under another incarnation of the member, or before the
        member (re)acquired them, are left out: their committed offset belongs to whoever
        read them since. If the store is unavailable the commit is kept and retried.

        With commit objects (the default) the commit is only recorded: the background step
        writes it to this member's commit object at once and the group's folder brings it into
        the log within about a fold interval. Only the final offsets of partitions being
        revoked, and releases, are written to the log here (one append), so that their new
        owner starts exactly there.
        """
        with self._lock:
            if not self.record_commit(
                offsets,
                batch_generation=batch_generation,
                batch_member=batch_member,
                release=release,
            ):
                self.wake()  # the background step writes the commit object now
                return self._assignment
            try:
                self._step()  # commits and steps in one write
            except GroupStoreError as exc:
                log.warning(
                    "group %s: commit of %d partition(s) postponed, the group log is "
                    "unavailable: %s",
                    self.settings.group_id,
                    len(self._pending_offsets),
                    exc,
                )
            return self._assignment

    def record_commit(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        batch_generation: int,
        batch_member: str,
        release: Iterable[TopicPartition] = (),
    ) -> bool:
        """The bookkeeping half of :meth:`commit`: record the offsets (and the releases);
        whether something must be written to the log now (a partition being revoked, a
        release, or every commit without commit objects)."""
        with self._lock:
            assignment = self._assignment
            accepted = {}
            if batch_member == self.member_id or batch_member in self._adopted_members:
                accepted = {
                    tp: offset
                    for tp, offset in offsets.items()
                    if assignment.held_throughout(tp, batch_generation)
                }
            for tp, offset in accepted.items():
                if self._objects is None or tp in assignment.revoking:
                    self._pending_offsets[tp] = offset
                if self._objects is not None:
                    self._recorded[tp] = RecordedOffset(offset, assignment.generation)
            released = set(release) & assignment.revoking
            self._pending_release.update(released)
            committed = self._client.coordinator.group.offsets
            for tp in released & set(self._recorded):
                # Its last batch was committed earlier, in the commit object: its release
                # must come with that offset in the log (the new owner starts there).
                offset = self._recorded[tp].offset
                if tp not in committed or committed[tp].offset != offset:
                    self._pending_offsets.setdefault(tp, offset)
            if self._closing.is_set():
                return False  # close() writes what is pending
            return bool(self._pending_offsets or self._pending_release)

    # -- the protocol step -------------------------------------------------------------------

    def _background_step(self) -> None:
        with self._lock:
            if self._fatal is None and not self._closing.is_set():
                self._step(commit_objects=True)

    def next_step_delay_s(self) -> float:
        """How long until the member's next step (the heartbeat thread's timer)."""
        # Poll fast until a cooperative rebalance has finished for every member, not only
        # this one: the follow-up round starts when another member releases its partitions.
        if self._assignment.settled:
            interval = min(self.settings.heartbeat_interval_ms, self._until_next_expiry_ms())
            if self._objects is not None and self._client.maintainer:
                # The folder folds every interval, counted from the start of the last fold.
                due = self._folded_ms + COMMIT_FOLD_INTERVAL_MS - self._clock.monotonic_ms()
                interval = max(REBALANCE_POLL_MS // 2, min(interval, due))
            elif self._objects is not None and self._recorded:
                # A member with a recorded commit watches it land (and folds itself if the
                # folder is gone).
                interval = min(interval, COMMIT_FOLD_INTERVAL_MS)
            return interval / 1000.0
        return self._rebalance_poll_s()

    def _until_next_expiry_ms(self) -> int:
        """How long until another member would be silent past its session timeout, as this
        member saw it (a step then expires it at once rather than up to a heartbeat later)."""
        with self._lock:
            seen = self._client.sightings()
            ends = [
                seen.heard_ms(m) + m.session_timeout_ms + 1 - seen.now_ms
                for m in self._client.coordinator.group.members.values()
                if m.member_id != self.member_id
            ]
        return max(REBALANCE_POLL_MS, min(ends, default=self.settings.heartbeat_interval_ms))

    def _rebalance_poll_s(self) -> float:
        members = len(self._client.coordinator.group.members)
        return rebalance_poll_ms(members, self.settings.heartbeat_interval_ms) / 1000.0

    def _step(self, *, commit_objects: bool = False) -> None:
        """One write (or none): the pending commits, the release of revoked partitions whose
        last batch is committed, and the protocol step (tick, join, sync), retried on
        compare-and-swap conflicts. ``commit_objects``: also write this member's commit object
        and fold the group's (the background thread's work: the reader's calls never wait on
        it)."""
        self._client.retry(lambda: self.begin_step(commit_objects=commit_objects), self.end_step)

    def begin_step(self, *, commit_objects: bool = True) -> Attempt[tuple[Decision, PendingWork]]:
        """Renew the lease if due, fold the log and decide this step's records. With nothing
        to write the step is over; otherwise :meth:`end_step` appends them."""
        with self._lock:
            self._client.fold()  # first: which leases it needs depends on who is in the group
            interval = self.settings.heartbeat_interval_ms
            self._renew_lease(interval)
            self._watch_leases(interval)
            # Commit-object timing (folds, fallback) on this process's monotonic clock.
            now = self._clock.monotonic_ms()
            objects, looked_up = (
                self._commit_objects_step(now)
                if commit_objects
                else (self._objects_of_replaced(), frozenset())  # a join replacing: first
            )
            pending = PendingWork(
                offsets=dict(self._pending_offsets),
                release=frozenset(self._pending_release),
                in_flight=self._in_flight,
                held=self._assignment.held,
                had_generation=self._assignment.generation >= 0,
            )
            ctx = StepContext(
                request=self._join_request(),
                heartbeat_interval_ms=interval,
                topics=self._metadata.get(),  # never fetched here: see topic_metadata.py
                seen=self._client.sightings(),
                leases=self._leases is not None,
                uses_commit_objects=self._objects is not None,
                commit_objects=objects,
                objects_looked_up=looked_up,
            )
            timers = self._timers

            def decide(
                work: GroupCoordinator, now: int
            ) -> tuple[list[GroupRecord], tuple[Decision, PendingWork]]:
                decision = decide_step(work, now, ctx, pending, timers)
                if decision.needs_objects:  # members about to expire: their commits first
                    extra = self._read_objects(decision.needs_objects)
                    retry_ctx = replace(
                        ctx,
                        commit_objects={**ctx.commit_objects, **extra},
                        objects_looked_up=ctx.objects_looked_up | decision.needs_objects,
                    )
                    work = self._client.coordinator.fork()
                    decision = decide_step(work, now, retry_ctx, pending, timers)
                return decision.records, (decision, pending)

            attempt = self._client.prepare(decide, fold=False)
            if not attempt.records:
                self._after_step(attempt)
            return attempt

    def end_step(self, attempt: Attempt[tuple[Decision, PendingWork]]) -> bool:
        """Append what :meth:`begin_step` decided; False if another writer won the race
        (then begin again, after a backoff)."""
        with self._lock:
            if not self._client.complete(attempt):
                return False
            self._after_step(attempt)
            return True

    def _after_step(self, attempt: Attempt[tuple[Decision, PendingWork]]) -> None:
        decision, pending = attempt.result
        self._timers = decision.timers
        if self._fold_started_ms is not None:
            now = self._fold_started_ms
            self._folded_ms, self._fold_started_ms = now, None
            # A fallback fold waits as long again before the next one.
            self._waiting = {tp: (o, max(since, now)) for tp, (o, since) in self._waiting.items()}
        for member_id in decision.folded:
            if member_id in self._seen_seq:
                self._folded_seq[member_id] = self._seen_seq[member_id]
        for tp, offset in pending.offsets.items():  # not what the reader added meanwhile
            if self._pending_offsets.get(tp) == offset:
                del self._pending_offsets[tp]
        self._pending_release -= pending.release
        self._check_join_error(decision.join_error)
        commit = decision.commit
        rejected = {
            tp: error
            for tp, error in (commit.partition_errors.items() if commit else ())
            if error is not GroupError.NONE
        }
        if rejected:
            log.warning(
                "group %s: commit rejected for %s (member %s is no longer their owner); they "
                "will be read again by their current owner from the last accepted commit",
                self.settings.group_id,
                ", ".join(f"{tp.topic}-{tp.partition}: {e}" for tp, e in sorted(rejected.items())),
                self.member_id,
            )
        if self._leases is not None:
            for r in decision.records:
                if r.kind == "EXPIRE" and r.member_id:
                    self._drop_lease(r.member_id)
        for r in decision.records:
            if r.kind == "EXPIRE" and r.member_id:
                self._drop_objects(r.member_id)
        self._report_durable()
        self._update_view(self._client.coordinator)
        self._settle_recorded()

    # -- commit objects ----------------------------------------------------------------------

    def _commit_objects_step(self, now: int) -> tuple[dict[str, CommitObject], frozenset[str]]:
        """Write this member's commit object if it recorded something new; as the group's
        folder (its leader, every fold interval; or any member whose own commit has waited
        :data:`FOLD_FALLBACK_INTERVALS` intervals), read the objects to fold. Returns them,
        and the members whose objects were looked up."""
        if self._objects is None:
            return {}, frozenset()
        self._settle_recorded()
        committed = self._client.coordinator.group.offsets
        for tp in self._assignment.revoking & set(self._recorded):
            # Recorded before its revocation began: its final offset goes to the log now,
            # directly (its release waits for exactly that offset).
            offset = self._recorded[tp].offset
            if tp not in committed or committed[tp].offset != offset:
                self._pending_offsets.setdefault(tp, offset)
        if self._recorded and self._recorded != self._written and not self._closing.is_set():
            self._object_seq += 1
            obj = CommitObject(self.member_id, self._object_seq, dict(self._recorded))
            try:
                self._objects.put(obj)
                self._written = dict(self._recorded)
            except GroupStoreError as exc:  # kept, and written at the next step
                log.warning("group %s: commit object not written: %s", self.settings.group_id,
                            exc)  # fmt: skip
        for tp in self._recorded:
            log_offset = committed[tp].offset if tp in committed else None
            if tp not in self._waiting or self._waiting[tp][0] != log_offset:
                self._waiting[tp] = (log_offset, now)  # new, or the log moved on: folded
        for tp in set(self._waiting) - set(self._recorded):
            del self._waiting[tp]
        interval = COMMIT_FOLD_INTERVAL_MS
        stalled = any(
            now - since >= FOLD_FALLBACK_INTERVALS * interval for _, since in self._waiting.values()
        )
        leads = self._client.coordinator.group.leader == self.member_id
        if not stalled and not (leads and now - self._folded_ms >= interval):
            return self._objects_of_replaced(), frozenset()
        # Counted as a fold once its append lands (a lost race folds again at the retry).
        self._fold_started_ms = now
        if stalled:
            self._folded_seq.clear()  # read every object: the folder may have missed some
        try:
            listed = self._objects.list()
        except GroupStoreError as exc:
            log.warning("group %s: commit objects not listed: %s", self.settings.group_id, exc)
            return {}, frozenset()
        members = self._client.coordinator.group.members
        new = {
            m: seq
            for m, seq in listed.items()
            if m in members and seq > self._folded_seq.get(m, -1)
        }
        self._seen_seq = dict(new)
        objects = self._get_objects(new)
        objects.update(self._objects_of_replaced())
        return objects, frozenset()

    def _objects_of_replaced(self) -> dict[str, CommitObject]:
        """At its join, the commit objects of the incarnation this member replaces (a restart
        on its checkpoint, or a static member's previous incarnation): folded before it is
        fenced."""
        if self._assignment.generation >= 0:
            return {}
        group = self._client.coordinator.group
        previous = {self._replacing} if self._replacing else set()
        if self.settings.instance_id is not None:
            previous.add(group.static_members.get(self.settings.instance_id) or "")
        previous = {m for m in previous if m and m != self.member_id and group.member(m)}
        return self._read_objects(frozenset(previous)) if previous else {}

    def _read_objects(self, members: frozenset[str]) -> dict[str, CommitObject]:
        """The newest commit objects of ``members`` (those that have one)."""
        if self._objects is None or not members:
            return {}
        try:
            listed = self._objects.list()
        except GroupStoreError as exc:
            log.warning("group %s: commit objects not listed: %s", self.settings.group_id, exc)
            return {}
        return self._get_objects({m: s for m, s in listed.items() if m in members})

    def _get_objects(self, members: Mapping[str, int]) -> dict[str, CommitObject]:
        if self._objects is None or not members:
            return {}
        try:
            return self._objects.get(members)
        except GroupStoreError as exc:
            log.warning("group %s: commit objects not read: %s", self.settings.group_id, exc)
            return {}

    def _settle_recorded(self) -> None:
        """Forget recorded commits the log now holds (or that no longer apply)."""
        if not self._recorded:
            return
        committed = self._client.coordinator.group.offsets
        held = self._assignment.held
        for tp, recorded in list(self._recorded.items()):
            current = committed.get(tp)
            if tp not in held or (current is not None and current.offset == recorded.offset):
                del self._recorded[tp]
                self._written.pop(tp, None)

    def _flush_recorded(self) -> None:
        """Write the recorded commits to the log directly at the next step (the member leaves,
        or a static member stops): a LEAVE must come after them."""
        committed = self._client.coordinator.group.offsets
        for tp, recorded in self._recorded.items():
            current = committed.get(tp)
            if current is None or current.offset != recorded.offset:
                self._pending_offsets[tp] = recorded.offset

    def _committed_with_recorded(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """The log's committed offsets, with this member's recorded commits over them."""
        committed = dict(self._client.coordinator.group.offsets)
        for tp, recorded in self._recorded.items():
            committed[tp] = OffsetAndMetadata(recorded.offset)
        return committed

    def _report_durable(self) -> None:
        """Tell :attr:`on_durable` which of this member's offsets the log newly holds."""
        if self.on_durable is None:
            return
        mine = {self.member_id} | self._adopted_members
        fresh = {
            tp: o.offset
            for tp, o in self._client.coordinator.group.offsets.items()
            if o.member_id in mine and self._reported.get(tp) != o.offset
        }
        if fresh:
            self._reported.update(fresh)
            try:
                self.on_durable(fresh)
            except Exception as exc:  # a copy is best effort; the group log is the record
                log.warning("group %s: copying commits failed: %s", self.settings.group_id, exc)

    def _drop_objects(self, member_id: str) -> None:
        self._folded_seq.pop(member_id, None)
        try:
            if self._objects is not None:
                self._objects.drop(member_id)
        except GroupStoreError as exc:  # a leftover is never applied (its member is gone)
            log.debug("group %s: commit objects of %s not dropped: %s", self.settings.group_id,
                      member_id, exc)  # fmt: skip

    def _renew_lease(self, interval_ms: int) -> None:
        """Renew this member's lease once a heartbeat interval (its monotonic clock), under a
        number that grows at every renewal: its wall clock in ms while that runs forward, so
        that members of earlier releases, which read it as a time, keep reading it right."""
        mono = self._clock.monotonic_ms()
        if self._leases is None or mono - self._lease_renewed_ms < interval_ms:
            return
        self._lease_number = max(self._lease_number + 1, self._clock.now_ms())
        self._leases.renew(self.member_id, self._lease_number)
        self._lease_renewed_ms = mono
        self._client.watch.saw_leases({self.member_id: self._lease_number}, mono)

    def _watch_leases(self, interval_ms: int) -> None:
        """List the leases once a heartbeat interval while another member has one: a member is
        silent when its lease has not changed for its session timeout since this member saw
        it change, so a change must be seen soon after it happens (a member that died is
        then expired within its session timeout and two heartbeat intervals). The listing is
        a read, not a write: it never competes with the group log's compare-and-swap."""
        mono = self._clock.monotonic_ms()
        if self._leases is None or mono - self._leases_read_ms < interval_ms:
            return
        if any(
            LEASES in m.features and m.member_id != self.member_id
            for m in self._client.coordinator.group.members.values()
        ):
            self._client.read_leases()
            self._leases_read_ms = mono

    def _drop_lease(self, member_id: str) -> None:
        self._client.watch.forget_member(member_id)
        try:
            if self._leases is not None:
                self._leases.drop(member_id)
        except GroupStoreError as exc:  # a leftover lease only costs a listing entry
            log.debug("group %s: lease of %s not dropped: %s", self.settings.group_id,
                      member_id, exc)  # fmt: skip

    # -- assignment bookkeeping --------------------------------------------------------------

    def _update_view(self, coordinator: GroupCoordinator) -> None:
        view = coordinator.member_view(self.member_id)
        group_id = self.settings.group_id
        previous = self._assignment
        if view.fenced:
            if self.settings.instance_id is None:
                self._lose(previous.held, "replaced by a restart of its query")
                self._fatal = MemberFencedError(
                    f"Member {self.member_id} of group {group_id!r} was fenced: its query was "
                    "restarted from the same checkpoint and the new run took over its "
                    "partitions. Run one query per checkpoint location."
                )
                return
            self._lose(previous.held, "fenced: another member took over its groupInstanceId")
            self._fatal = MemberFencedError(
                f"Member {self.member_id} of group {group_id!r} was fenced: another query "
                f"joined with the same groupInstanceId {self.settings.instance_id!r}. Give every "
                "concurrently running query its own groupInstanceId."
            )
            return
        if not view.known:
            if previous.held:
                self._lose(previous.held, "expired from the group (session timeout)")
            # Rejoin as a new incarnation, as a Kafka consumer resets its member id.
            if previous.generation >= 0:
                self.member_id = new_member_id(self._client_id)
                log.warning("Rejoining group %s as member %s", group_id, self.member_id)
            self._assignment = MemberAssignment(generation=-1, member_id=self.member_id)
            return
        self._replacing = None  # joined: the previous incarnation is replaced or gone
        held = frozenset(view.assignment) | frozenset(view.revoking)
        self._in_flight = self._in_flight.retain(held)
        # Still a member: what it no longer holds was revoked (released after its final
        # commit, or given up by an eager rejoin), not lost.
        revoked = previous.held - held
        if revoked:
            log.info("Revoked from %s: %s", self.member_id, _names(revoked))
            self._listener.revoked(sorted(revoked))
        self._client.maintainer = view.is_leader
        generation = view.member_generation
        # The group's record of since when each partition is held: a replaced incarnation's
        # partitions keep their generation, so the batches it planned stay valid.
        member = coordinator.group.member(self.member_id)
        group_since = member.held_since if member is not None else {}
        since = {tp: previous.held_since.get(tp, group_since.get(tp, generation)) for tp in held}
        new = held - previous.held
        stable = view.state == GroupState.STABLE and generation == view.group_generation
        self._assignment = MemberAssignment(
            generation=generation,
            member_id=self.member_id,
            held=held,
            revoking=frozenset(view.revoking),
            held_since=since,
            stable=stable,
            settled=stable and not any(m.revoking for m in coordinator.group.members.values()),
        )
        if generation != previous.generation:
            log.info(
                "Joined group %s as member %s (generation %d, protocol %s, leader: %s)",
                group_id, self.member_id, generation, view.protocol, view.is_leader,
            )  # fmt: skip
        if new:
            log.info("Newly assigned to %s: %s", self.member_id, _names(new))
            self._listener.assigned(sorted(new))
        newly_revoking = self._assignment.revoking - previous.revoking
        if newly_revoking:
            log.info("Revoking from %s: %s (finishing the in-flight batch)", self.member_id,
                     _names(newly_revoking))  # fmt: skip

    def _lose(self, partitions: Iterable[TopicPartition], why: str) -> None:
        partitions = sorted(partitions)
        if not partitions:
            return
        log.warning(
            "Member %s of group %s lost %s: %s", self.member_id, self.settings.group_id,
            _names(partitions), why,
        )  # fmt: skip
        self._pending_offsets.clear()
        self._in_flight = BatchesInFlight()
        self._listener.lost(partitions)

    def _join_request(self) -> JoinRequest:
        """This member's join request (what it owns is filled in when it joins)."""
        return JoinRequest(
            member_id=self.member_id,
            protocols=self.settings.protocol_names,
            topics=self._subscription.topics,
            pattern=self._subscription.pattern,
            instance_id=self.settings.instance_id,
            session_timeout_ms=self.settings.session_timeout_ms,
            rebalance_timeout_ms=self.settings.rebalance_timeout_ms,
            client_id=self._client_id,
            client_host=socket.gethostname(),
            replaces=self._replacing,
            features=self._features,
        )

    def _check_join_error(self, error: GroupError) -> None:
        group_id = self.settings.group_id
        if error is GroupError.INVALID_SESSION_TIMEOUT:
            self._fatal = OptionError(
                f"Group {group_id!r} refused sessionTimeoutMs={self.settings.session_timeout_ms}: "
                "it must be between 6000 and 1800000 ms (Kafka's group.min/max.session.timeout.ms)."
            )
        elif error is GroupError.INCONSISTENT_GROUP_PROTOCOL:
            group = self._client.coordinator.group
            supported = sorted(group.candidate_protocols())
            self._fatal = OptionError(
                f"Group {group_id!r} refused this query: its members all support only "
                f"{', '.join(supported) or '(none)'} (it uses {group.protocol!r}), and this "
                f"query's assignmentStrategy {','.join(self.settings.protocol_names)!r} has none "
                "of them. Members of one group need an assignor in common. To move a running "
                "group to another assignor, restart each query with the new one first and the "
                "old one second (e.g. 'cooperative-sticky,range'), then each again with the new "
                "one alone."
            )
        elif error not in (GroupError.NONE, GroupError.REBALANCE_IN_PROGRESS):
            log.warning("group %s: join answered %s; retrying", group_id, error)

    def _raise_if_fatal(self) -> None:
        if self._fatal is not None:
            self._heartbeat.stop()
            self._metadata.stop()
            raise self._fatal


def _names(partitions: Iterable[TopicPartition]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(partitions)) or "(none)"
