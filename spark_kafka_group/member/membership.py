"""The owner loop of a group member: its identity, the protocol step over the group log
(fold, decide, append; join, sync, heartbeat, expire, commit-object fold), what the step tells
it (assigned, revoked, fenced, expired), its start (the join wait) and its close (the grace
period, the LEAVE).

As kafka-python's ``coordinator/base.py`` keeps generic membership apart from the consumer's
``coordinator/consumer.py``, this is the membership half of a member; the handle the query's
reader holds is :class:`~spark_kafka_group.member.member.GroupMember`, which shares only the
holdings book (:mod:`.holdings`) and the snapshot this loop publishes after each step
(:class:`~spark_kafka_group.member.view.Published`), and sends the loop commands
(:mod:`.commands`). Each further job has its own module: the join (:mod:`.join`), the close
(:mod:`.close`), the lease (:mod:`.lease_keeper`), the commits (:mod:`.commits`), the error
text (:mod:`.error_text`), and what a step writes (:mod:`.decide`, pure). Every wait counts
on the injected clock.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from types import MappingProxyType

from spark_kafka_group.errors import (
    GroupJoinTimeoutError,
    GroupStoreError,
    MemberFencedError,
)
from spark_kafka_group.group import GroupConfig, GroupCoordinator, GroupRecord, RecordKind
from spark_kafka_group.group.metadata import FEATURES, IMPLICIT_REJOIN, Partitions, TopicPartition
from spark_kafka_group.group.timer import Clock
from spark_kafka_group.group.types import Committed
from spark_kafka_group.member import error_text
from spark_kafka_group.member.close import LEAVE_GRACE_S, Closing, await_final_commit, closing
from spark_kafka_group.member.commands import Command, RecordCommit, ReplaceIncarnation
from spark_kafka_group.member.commits import MemberCommits
from spark_kafka_group.member.decide import (
    METADATA_CHECK_EVERY_HEARTBEATS,
    Decision,
    PendingWork,
    StepContext,
    Timers,
    decide_step,
)
from spark_kafka_group.member.heartbeat import HeartbeatThread
from spark_kafka_group.member.holdings import HoldingsBook
from spark_kafka_group.member.join import (
    REBALANCE_POLL_MS,
    SubscriptionSpec,
    has_assignment,
    join_request,
    join_wait_ms,
    new_member_id,
    rebalance_poll_ms,
    wait_for_assignment,
)
from spark_kafka_group.member.lease_keeper import LeaseKeeper
from spark_kafka_group.member.listener import RebalanceListenerRunner
from spark_kafka_group.member.log_client import Attempt, GroupLogClient
from spark_kafka_group.member.topic_metadata import TopicMetadataCache
from spark_kafka_group.member.view import Holdings, Published
from spark_kafka_group.options import GroupSettings
from spark_kafka_group.store.commit_objects import CommitObjectStore
from spark_kafka_group.store.log_store import LeaseStore, LogStore
from spark_kafka_group.store.table_properties import retention_properties

log = logging.getLogger(__name__)

Step = Attempt[tuple[Decision, PendingWork]]


class Membership:
    """One member of a group, stepped over its group log.

    One thread at a time owns the member's state (the folded log, the commits, the timers)
    and steps it: the thread that starts it, until its first assignment; then the heartbeat
    thread; then the thread that closes it, once the heartbeat thread has stopped. Other
    threads send commands (:meth:`send`), read what the step publishes (:attr:`published`:
    the member id, the committed offsets, a failure; the holdings in the book) and claim
    batches through the holdings book (:attr:`book`)."""

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
            config=config or settings.group_config,
            clock=clock,
            log=log,
            leases=leases,
            commit_objects=commit_objects,
            random_seed=random_seed,
            table_properties=retention_properties(settings.log_retention_ms),
        )
        self._leases = LeaseKeeper(self._client)
        if features is None:
            features = FEATURES if self._leases.enabled else (IMPLICIT_REJOIN,)
        self._features = tuple(sorted(features))
        self._clock = self._client.clock
        self.member_id = member_id or new_member_id(client_id)
        listener = RebalanceListenerRunner.load(settings.rebalance_listener)
        self._book = HoldingsBook(self.member_id, listener, settings.group_id)
        self._commits = MemberCommits(self._client, self._book)
        self._commands: queue.SimpleQueue[Command] = queue.SimpleQueue()
        #: What other threads read of the member as of the last step: replaced whole (one
        #: assignment), never changed in place.
        self.published = Published(self.member_id)
        self._timers = Timers()
        #: Called with offsets of this member that became durable in the log, whoever wrote
        #: them (commitToKafka copies them).
        self.on_durable: Callable[[dict[TopicPartition, int]], None] | None = None
        self._fatal: Exception | None = None
        # The previous incarnation this member's next join replaces (see replace()).
        self._replaces: str | None = None
        # Set when close() begins: no further protocol step may write (a step after the LEAVE
        # would join the group again under a new id), and a join wait stops.
        self._closing = threading.Event()
        # Whoever takes this token closes the member; a second caller waits for _closed.
        self._close_token: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._close_token.put(None)
        self._closed = threading.Event()
        # Cleared while the thread that starts the member steps it (its join): a close() on
        # another thread waits for that to end before it takes the member over.
        self._not_starting = threading.Event()
        self._not_starting.set()
        self._heartbeat = HeartbeatThread(self._background_step, self.next_step_delay_s)
        #: Asks the background step to run now (the simulation replaces it).
        self.wake: Callable[[], None] = self._heartbeat.wake

    def replace(self, previous_member_id: str) -> None:
        """Replace ``previous_member_id`` (this query's previous incarnation): at its next join
        if it is still in the group (as Kafka replaces a static member), and accept the
        commits of the batches it planned."""
        if previous_member_id != self.member_id:
            self._replaces = previous_member_id
            self._commands.put(ReplaceIncarnation(previous_member_id))

    # -- lifecycle: the owner changes hands -------------------------------------------------

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
        """Stop heartbeating; a dynamic member also leaves once every batch it handed to Spark
        is committed (waiting up to ``grace_s`` on its clock), else it stays as a static member
        does (:mod:`.close`). Idempotent."""
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
        static = self.settings.instance_id is not None
        try:
            waiting = frozenset() if static else self._await_final_commit(grace_s)
            outcome = closing(waiting, static=static)
            if outcome is Closing.LEAVE:
                self.leave()
            elif outcome is Closing.STAY:
                self.write_final_commits()
                self._leases.renew(self.member_id, 0)  # its session counts from its close
            else:  # gone (expired or replaced meanwhile): what the log accepted is copied
                self._report_durable()
        except Exception as exc:  # close() must not fail the query
            log.warning("group %s: closing member %s failed: %s", self.settings.group_id,
                        self.member_id, exc)  # fmt: skip

    def _await_final_commit(self, grace_s: float) -> frozenset[TopicPartition] | None:
        return await_final_commit(self._uncommitted, clock=self._clock, grace_s=grace_s,
                                  settings=self.settings, member_id=self.member_id)  # fmt: skip

    def _uncommitted(self) -> Partitions | None:
        """The partitions of batches handed to Spark whose commit is not in the log yet; None
        when the member is no longer in the group (left, expired or replaced)."""
        if self._client.fold().group.member(self.member_id) is None:
            return None
        self._take_commands()  # a commit Spark sent meanwhile
        # A recorded commit counts, and the progress listener's object: the LEAVE writes them
        # first, in the log itself.
        return frozenset(self._commits.uncommitted())

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

    # -- what other threads share -----------------------------------------------------------

    def send(self, command: Command) -> None:
        """A command for the step (from any thread): taken, in order, at its next step."""
        self._commands.put(command)

    @property
    def book(self) -> HoldingsBook:
        """The holdings book: the one hand-off, besides :attr:`published`, with other threads."""
        return self._book

    @property
    def client(self) -> GroupLogClient:
        """The member's view of the group log (read-only use: inspection, simulation)."""
        return self._client

    def leave(self, reason: str = "the query left the group") -> None:
        """Write LEAVE now, so the group rebalances at once instead of after the timeout
        (on the thread that owns the member: the one closing it)."""
        self.write_final_commits()

        def decide(work: GroupCoordinator, now: int) -> tuple[list[GroupRecord], None]:
            self._book.reserve_releases(frozenset())  # no batch may claim what it gives up
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
        self._publish()
        self._leases.drop(self.member_id)
        self._commits.drop_objects(self.member_id)
        # Gone from the group because it left: neither an expiry nor a rejoin (what
        # _update_view does for a member the group no longer knows).
        self._book.left()

    def write_final_commits(self) -> None:
        """Write the recorded commits to the log directly now (before a LEAVE, or when a
        static member stops), the commands sent so far included."""
        self._take_commands()
        self._commits.flush()
        if self._commits.pending:
            self._step(commit_objects=False)

    # -- the protocol step -------------------------------------------------------------------

    def _background_step(self) -> None:
        if self._fatal is None and not self._closing.is_set():
            self._step(commit_objects=True)
        if self._fatal is not None:  # fenced, or a refused option: the member stops stepping
            self._heartbeat.stop(wait=False)
            self._metadata.stop()

    def _take_commands(self) -> None:
        """Apply the commands other threads sent, in order (the owner's side of the queue)."""
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return
            if isinstance(command, RecordCommit):
                self._commits.record(
                    self._book.holdings,
                    command.offsets,
                    member_id=self.member_id,
                    batch_generation=command.batch_generation,
                    batch_member=command.batch_member,
                    release=command.release,
                )
            else:
                self._commits.replace(command.member_id)

    def _publish(self) -> None:
        """What other threads read of the member: a copy, made by its owner, swapped whole."""
        group = self._client.coordinator.group
        committed: Committed = MappingProxyType(dict(group.offsets))
        self.published = Published(self.member_id, committed, frozenset(group.members), self._fatal)

    def next_step_delay_s(self) -> float:
        """How long until the member's next step (the heartbeat thread's timer)."""
        # Poll fast until a cooperative rebalance has finished for every member, not only
        # this one: the follow-up round starts when another member releases its partitions.
        if not self._book.holdings.settled:
            return self._rebalance_poll_s()
        interval = min(self.settings.heartbeat_interval_ms, self._until_next_expiry_ms())
        now = self._clock.monotonic_ms()
        return self._commits.next_step_ms(interval, folder=self._client.maintainer, now=now) / 1000

    def _until_next_expiry_ms(self) -> int:
        """How long until another member would be silent past its session timeout, as this
        member saw it (a step then expires it at once rather than up to a heartbeat later)."""
        seen = self._client.sightings()
        ends = [
            seen.heard_ms(m) + m.profile.session_timeout_ms + 1 - seen.now_ms
            for m in self._client.coordinator.group.members.values()
            if m.member_id != self.member_id
        ]
        return max(REBALANCE_POLL_MS, min(ends, default=self.settings.heartbeat_interval_ms))

    def _rebalance_poll_s(self) -> float:
        members = len(self._client.coordinator.group.members)
        return rebalance_poll_ms(members, self.settings.heartbeat_interval_ms) / 1000.0

    def _step(self, *, commit_objects: bool) -> None:
        """One write (or none): the pending commits, the release of revoked partitions whose
        last batch is committed, and the protocol step (tick, join, sync), retried on
        compare-and-swap conflicts. ``commit_objects``: also write this member's commit object
        and fold the group's (the background thread's work: the reader's calls never wait on
        it)."""
        self._client.retry(lambda: self.begin_step(commit_objects=commit_objects), self.end_step)

    def begin_step(self, *, commit_objects: bool) -> Step:
        """Renew the lease if due, fold the log and decide this step's records. With nothing
        to write the step is over; otherwise :meth:`end_step` appends them."""
        self._client.fold()  # first: which leases it needs depends on who is in the group
        self._take_commands()  # recorded against the log just folded
        interval = self.settings.heartbeat_interval_ms
        self._leases.renew(self.member_id, interval)
        self._leases.watch(self.member_id, interval)
        holdings = self._book.holdings
        replaced = self._replaced()
        if commit_objects:  # commit-object timing on this process's monotonic clock
            objects = self._commits.step(
                self._clock.monotonic_ms(),
                holdings,
                member_id=self.member_id,
                closing=self._closing.is_set(),
                replaced=replaced,
            )
        else:  # a join that replaces an incarnation folds its objects first (its own last)
            objects = {
                **self._commits.objects_of(replaced),
                **self._commits.own_object_before_direct_writes(self.member_id),
            }
        ctx = StepContext(
            request=join_request(
                self.settings,
                member_id=self.member_id,
                subscription=self._subscription,
                client_id=self._client_id,
                replaces=self._replaces,
                features=self._features,
            ),
            heartbeat_interval_ms=interval,
            topics=self._metadata.get(),  # never fetched here: see topic_metadata.py
            seen=self._client.sightings(),
            leases=self._leases.enabled,
            uses_commit_objects=self._commits.uses_objects,
            commit_objects=objects,
        )
        timers = self._timers

        def decide(
            work: GroupCoordinator, now: int
        ) -> tuple[list[GroupRecord], tuple[Decision, PendingWork]]:
            step_ctx = ctx
            while True:
                pending = self._pending_work()
                decision = decide_step(work, now, step_ctx, pending, timers)
                if decision.needs_objects:  # members about to expire: their commits first
                    extra = self._commits.objects_of(decision.needs_objects)
                    step_ctx = replace(
                        step_ctx,
                        commit_objects={**step_ctx.commit_objects, **extra},
                        objects_looked_up=step_ctx.objects_looked_up | decision.needs_objects,
                    )
                elif self._reserve_releases(work, pending):
                    return decision.records, (decision, pending)
                work = self._client.coordinator.fork()  # decided on a fork: start afresh

        attempt = self._client.prepare(decide, fold=False)
        if not attempt.records:
            self._after_step(attempt)
        return attempt

    def _pending_work(self) -> PendingWork:
        holdings, in_flight = self._book.snapshot()
        return self._commits.pending_work(holdings, in_flight)

    def _reserve_releases(self, decided: GroupCoordinator, pending: PendingWork) -> bool:
        """Before a step's records are appended: the partitions they take from this member
        (released, given up, lost) may no longer be claimed by a batch (``begin_batch``
        refuses them until the step's outcome is in the book). False if a batch began since
        ``pending`` was taken: the decision did not see it, so decide again."""
        after = decided.member_view(self.member_id)
        keeps = frozenset(after.assignment) | frozenset(after.revoking) if after.known else None
        return self._book.reserve_releases(keeps or frozenset(), decided_on=pending.in_flight)

    def end_step(self, attempt: Step) -> bool:
        """Append what :meth:`begin_step` decided; False if another writer won the race
        (then begin again, after a backoff)."""
        if not self._client.complete(attempt):
            return False
        self._after_step(attempt)
        return True

    def _after_step(self, attempt: Step) -> None:
        decision, pending = attempt.result
        self._timers = decision.timers
        self._commits.appended(decision, pending, self.member_id)
        coordinator = self._client.coordinator
        failure = error_text.join_failure(decision.join_error, self.settings, coordinator)
        self._fatal = failure or self._fatal
        expired = [
            r.member_id for r in decision.records if r.kind == RecordKind.EXPIRE and r.member_id
        ]
        for member_id in expired if self._leases.enabled else ():
            self._leases.drop(member_id)
        for member_id in expired:
            self._commits.drop_objects(member_id)
        self._report_durable()
        self._update_view(self._client.coordinator)
        self._commits.settle()
        self._publish()

    def _replaced(self) -> frozenset[str]:
        """Before its first join, the incarnations this member replaces that are still in the
        group (a restart on its checkpoint, or a static member's previous incarnation): their
        commit objects are folded before they are fenced."""
        if self._book.holdings.generation >= 0:
            return frozenset()
        group = self._client.coordinator.group
        previous = {self._replaces} if self._replaces else set()
        if self.settings.instance_id is not None:
            previous.add(group.static_members.get(self.settings.instance_id) or "")
        return frozenset(m for m in previous if m and m != self.member_id and group.member(m))

    def _report_durable(self) -> None:
        self._commits.report_durable(self.member_id, self.on_durable)

    # -- the member's place in the group ----------------------------------------------------

    def _update_view(self, coordinator: GroupCoordinator) -> None:
        view = coordinator.member_view(self.member_id)
        previous = self._book.holdings
        if view.fenced:
            why, message = error_text.fenced(
                self.member_id, self.settings.group_id, self.settings.instance_id
            )
            self._lose(previous.held, why)
            self._fatal = MemberFencedError(message)
            return
        if not view.known:
            self._lose(previous.held, "expired from the group (session timeout)")
            # Rejoin as a new incarnation, as a Kafka consumer resets its member id.
            if previous.generation >= 0:
                self.member_id = new_member_id(self._client_id)
                log.warning("Rejoining group %s as member %s", self.settings.group_id,
                            self.member_id)  # fmt: skip
            self._book.reset(self.member_id)
            return
        self._replaces = None  # joined: the previous incarnation is replaced or gone
        self._client.maintainer = view.is_leader
        self._book.update(view, coordinator.group)

    def _lose(self, partitions: Iterable[TopicPartition], why: str) -> None:
        if self._book.lose(partitions, why):
            self._commits.lost()

    def _raise_if_fatal(self) -> None:
        if self._fatal is not None:
            self._heartbeat.stop(wait=False)
            self._metadata.stop()
            raise self._fatal
