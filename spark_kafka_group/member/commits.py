"""One member's commits, the I/O around its pending commits: the value
(:class:`~spark_kafka_group.group.pending.PendingCommits`, pure transitions) is recorded here,
written as the member's commit object, folded into the log by the group's folder (its leader,
or the member itself when the folder is gone) or written to the log directly (the final offset
of a partition being revoked; every commit without commit objects); and which of them the log
now holds (``on_durable``).

How the objects and the fold work: docs/design.md, "The write path at scale"; which commits
are accepted and what a fold writes: :mod:`spark_kafka_group.group.offsets` (the one place of
those rules). Fold timing counts on the member's monotonic clock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from spark_kafka_group.errors import GroupStoreError
from spark_kafka_group.group import GroupError, TopicPartition
from spark_kafka_group.group.metadata import GroupMetadata, OffsetAndMetadata, partition_name
from spark_kafka_group.group.pending import PendingCommits
from spark_kafka_group.group.types import LISTENER, CommitObject
from spark_kafka_group.member.decide import Decision, PendingWork
from spark_kafka_group.member.folder import (
    COMMIT_FOLD_INTERVAL_MS,
    FOLD_FALLBACK_INTERVALS,
    CommitFolder,
)
from spark_kafka_group.member.holdings import HoldingsBook
from spark_kafka_group.member.in_flight import BatchesInFlight
from spark_kafka_group.member.join import REBALANCE_POLL_MS
from spark_kafka_group.member.log_client import GroupLogClient
from spark_kafka_group.member.view import Holdings
from spark_kafka_group.store.commit_objects import key_of, object_key

log = logging.getLogger(__name__)


class MemberCommits:
    """The commits of one member. Owned by the member's step thread: the reader's commits
    reach it as commands (:meth:`GroupMember.commit`), which the step records before it
    writes and folds, so recording a commit never waits on the store and nothing here is
    shared with another thread."""

    def __init__(self, client: GroupLogClient, book: HoldingsBook) -> None:
        self._client = client
        self._book = book  # what the member holds, and the batches it handed to Spark
        self._objects = client.commit_objects
        self._group_id = client.group_id
        #: The member's commits not in the log yet (replaced at every change).
        self.pending_commits = PendingCommits(objects=self._objects is not None)
        # For each partition with a recorded commit, the log's offset when it began to wait
        # and since when (this member's clock): the log not moving for a few fold intervals
        # means the folder is gone.
        self._waiting: dict[TopicPartition, tuple[int | None, int]] = {}
        #: The folder's role, as this member plays it (None without commit objects).
        self.folder = None if self._objects is None else CommitFolder(self._objects, self._group_id)
        # The offsets last reported to ``on_durable``.
        self._reported: dict[TopicPartition, int] = {}

    @property
    def _group(self) -> GroupMetadata:
        return self._client.coordinator.group

    @property
    def uses_objects(self) -> bool:
        """Commits are recorded in commit objects (else every commit is an append)."""
        return self._objects is not None

    @property
    def pending(self) -> bool:
        """Something must be written to the log directly."""
        return self.pending_commits.has_direct_writes

    def record(
        self,
        holdings: Holdings,
        offsets: Mapping[TopicPartition, int],
        *,
        member_id: str,
        batch_generation: int,
        batch_member: str,
        release: Iterable[TopicPartition],
    ) -> None:
        """Record a completed batch's end offsets and the releases it finished
        (:meth:`PendingCommits.record`)."""
        self.pending_commits = self.pending_commits.record(
            member_id,
            offsets,
            batch_generation=batch_generation,
            batch_member=batch_member,
            release=release,
            held_since=holdings.held_since,
            revoking=holdings.revoking,
            generation=holdings.generation,
            committed=self._group.offsets,
            newest=self._book.in_flight.ends,
        )
        # Its last batch was committed earlier, in the commit object: its release must
        # come with that offset in the log (the new owner starts there).
        self._write_recorded(set(release) & holdings.revoking)

    def replace(self, member_id: str) -> None:
        """This member replaces ``member_id``, an earlier incarnation of its query: that
        incarnation's batches' commits are this member's."""
        self.pending_commits = self.pending_commits.replace(member_id)

    def lost(self) -> None:
        """The member lost its partitions (fenced, expired): nothing waits to be written."""
        self.pending_commits = self.pending_commits.lost()

    def pending_work(self, holdings: Holdings, in_flight: BatchesInFlight) -> PendingWork:
        """What the step must write (a snapshot; ``in_flight`` as the book hands it over)."""
        return PendingWork(
            offsets=dict(self.pending_commits.direct),
            release=self.pending_commits.releases,
            in_flight=in_flight,
            held=holdings.held,
            had_generation=holdings.generation >= 0,
        )

    def step(
        self,
        now: int,
        holdings: Holdings,
        *,
        member_id: str,
        closing: bool,
        replaced: frozenset[str],
    ) -> dict[str, CommitObject]:
        """Write this member's commit object if it recorded something new; as the group's
        folder (its leader, every fold interval; or any member whose own commit has waited
        :data:`FOLD_FALLBACK_INTERVALS` intervals), read the objects to fold, by key: what
        it returns. ``replaced``: the incarnations this member replaces at its join, whose
        objects are folded before they are fenced."""
        if self._objects is None:
            return {}
        # Its last batch completed and the progress listener committed it in its object: the
        # release needs that offset in the log, so it is taken into the recorded commits.
        self.uncommitted(holdings.revoking)
        # Recorded before its revocation began: its final offset goes to the log now, directly
        # (its release waits for exactly that offset).
        self._write_recorded(holdings.revoking)
        if not closing:
            self._write_object(member_id)
        stalled = self._stalled(now)
        leads = self._group.leader == member_id
        assert self.folder is not None  # with commit objects
        own = self.own_object_before_direct_writes(member_id)
        if not self.folder.due(now, leads=leads, stalled=stalled):
            return {**self.objects_of(replaced), **own}
        objects = self.folder.read_new(now, self._group.members, stalled=stalled)
        objects.update(self.objects_of(replaced))
        objects.update(own)
        return objects

    def _write_object(self, member_id: str) -> None:
        """Put the member's next commit object, if it recorded something new."""
        assert self._objects is not None
        me = self._group.member(member_id)
        folded = -1 if me is None else me.folded_seq.get("", -1)
        written, obj = self.pending_commits.write(member_id, folded)
        if obj is None:
            return
        try:
            self._objects.put(obj)
            self.pending_commits = written
        except GroupStoreError as exc:  # kept, and written at the next step
            log.warning("group %s: commit object not written: %s", self._group_id, exc)

    def _stalled(self, now: int) -> bool:
        """Whether a recorded commit has waited :data:`FOLD_FALLBACK_INTERVALS` intervals
        with the log not moving (the folder is gone)."""
        committed = self._group.offsets
        recorded = self.pending_commits.recorded
        for tp in recorded:
            log_offset = committed[tp].offset if tp in committed else None
            if tp not in self._waiting or self._waiting[tp][0] != log_offset:
                self._waiting[tp] = (log_offset, now)  # new, or the log moved on: folded
        for tp in set(self._waiting) - set(recorded):
            del self._waiting[tp]
        return any(
            now - since >= FOLD_FALLBACK_INTERVALS * COMMIT_FOLD_INTERVAL_MS
            for _, since in self._waiting.values()
        )

    def own_object_before_direct_writes(self, member_id: str) -> dict[str, CommitObject]:
        """The member's last object, to fold in the step that writes to the log directly: its
        direct writes come after it, and no folder may fold it (a rewind it marks) after
        them."""
        obj = self.pending_commits.last_object
        if not self.pending_commits.direct or obj is None or obj.member_id != member_id:
            return {}
        return {key_of(obj): obj}

    def objects_of(self, members: frozenset[str]) -> dict[str, CommitObject]:
        """The newest commit objects of ``members`` (their progress listeners' too), by key."""
        return {} if self.folder is None else self.folder.objects_of(members)

    def appended(self, decision: Decision, pending: PendingWork, member_id: str) -> None:
        """Bookkeeping once a step's records are in the log (or it had none to write)."""
        fold_started = None if self.folder is None else self.folder.landed(decision.folded)
        if fold_started is not None:
            # A fallback fold waits as long again before the next one.
            self._waiting = {
                tp: (o, max(since, fold_started)) for tp, (o, since) in self._waiting.items()
            }
        self.pending_commits = self.pending_commits.landed(pending.offsets, pending.release)
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
                self._group_id,
                ", ".join(f"{partition_name(*tp)}: {e}" for tp, e in sorted(rejected.items())),
                member_id,
            )

    def settle(self) -> None:
        """Forget recorded commits the log now holds, that no longer apply, or that a newer
        commit superseded (:meth:`PendingCommits.settle`)."""
        self.pending_commits = self.pending_commits.settle(
            self._book.holdings.held, self._group.offsets, self._book.in_flight.ends
        )

    def flush(self) -> None:
        """Write the recorded commits to the log directly at the next step (the member leaves,
        or a static member stops): a LEAVE must come after them. The progress listener's
        commit of a batch the member never saw committed (after ``query.stop()`` Spark calls
        no ``commit()`` for the last one) is taken in first."""
        self.uncommitted()
        self._write_recorded(self.pending_commits.recorded)

    def uncommitted(
        self, among: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        """The partitions (of ``among``; default: all) of batches handed to Spark whose end no
        commit reaches yet: in the log, recorded, or in the object the progress listener wrote
        for this member. That object is read (and taken into the recorded commits) only when
        some are waiting: a listing is a request on an object store, too many for every step."""
        wanted = None if among is None else set(among)

        def waiting() -> dict[TopicPartition, int]:
            ends = self._book.in_flight.uncommitted(self.committed_with_recorded())
            return {tp: e for tp, e in ends.items() if wanted is None or tp in wanted}

        found = waiting()
        if found and self._objects is not None:
            self.take_listener_commits()
            found = waiting()
        return found

    def take_listener_commits(self) -> None:
        """Take the progress listener's newest object for this member into the recorded
        commits (:meth:`PendingCommits.take_listener`). Best effort: unreadable, it is left
        to the fold."""
        if self._objects is None:
            return
        key = object_key(self._book.holdings.member_id, LISTENER)
        try:
            seq = self._objects.list().get(key)
            if seq is None or self.pending_commits.listener_taken == seq:
                return  # none, or read already (taking it in again adds nothing)
            obj = self._objects.get({key: seq}).get(key)
        except GroupStoreError as exc:
            log.warning("group %s: the listener's commits not read: %s", self._group_id, exc)
            return
        if obj is None:
            return  # replaced since the listing: the next call reads the newer one
        self.pending_commits = self.pending_commits.take_listener(
            obj, self._book.holdings.held_since, self._group.offsets
        )

    def _write_recorded(self, partitions: Iterable[TopicPartition]) -> None:
        """Write the recorded commits of ``partitions`` to the log directly at the next step,
        settled first (:meth:`PendingCommits.to_direct`)."""
        self.settle()
        self.pending_commits = self.pending_commits.to_direct(partitions)

    def committed_with_recorded(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """The log's committed offsets, with this member's commits that are not in it yet
        over them (recorded in its object, or waiting for a direct write): a LEAVE writes
        those first."""
        self.settle()
        return self.pending_commits.over(self._group.offsets)

    def report_durable(
        self, member_id: str, on_durable: Callable[[dict[TopicPartition, int]], None] | None
    ) -> None:
        """Tell ``on_durable`` which offsets of ``member_id`` (and the incarnations it replaced)
        the log newly holds."""
        if on_durable is None:
            return
        mine = {member_id} | self.pending_commits.replaced
        fresh = {
            tp: o.offset
            for tp, o in self._group.offsets.items()
            if o.member_id in mine and self._reported.get(tp) != o.offset
        }
        if fresh:
            self._reported.update(fresh)
            try:
                on_durable(fresh)
            except Exception as exc:  # a copy is best effort; the group log is the record
                log.warning("group %s: copying commits failed: %s", self._group_id, exc)

    def drop_objects(self, member_id: str) -> None:
        """Forget a member that left or expired, and delete its commit objects."""
        if self.folder is not None:
            self.folder.forget(member_id)

    def next_step_ms(self, interval_ms: int, *, folder: bool, now: int) -> int:
        """The delay until the member's next step, shortened for the fold: the folder folds
        every interval, counted from the start of its last fold; a member with a recorded
        commit watches it land (and folds itself if the folder is gone)."""
        if self.folder is not None and folder:
            due = self.folder.until_next_fold_ms(now)
            return max(REBALANCE_POLL_MS // 2, min(interval_ms, due))
        if self._objects is not None and self.pending_commits.recorded:
            return min(interval_ms, COMMIT_FOLD_INTERVAL_MS)
        return interval_ms
