"""One member's commits: recorded in its commit object, folded into the log by the group's
folder (its leader, or the member itself when the folder is gone), or written to the log
directly (the final offset of a partition being revoked; every commit without commit objects);
and which of them the log now holds (``on_durable``).

How the objects and the fold work: docs/design.md, "The write path at scale"; which commits
are accepted and what a fold writes: :mod:`spark_kafka_group.group.offsets` (the one place of
those rules). Fold timing counts on the member's monotonic clock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from spark_kafka_group.errors import GroupStoreError
from spark_kafka_group.group import GroupError, TopicPartition
from spark_kafka_group.group.metadata import OffsetAndMetadata, partition_name
from spark_kafka_group.group.offsets import (
    Source,
    fence,
    listener_offsets_to_take,
    offsets_to_write,
    rewinds,
)
from spark_kafka_group.group.types import LISTENER, CommitObject, RecordedOffset
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
        # Commits recorded in commit objects: the newest offset per partition not yet seen in
        # the log (with the generation it was recorded in), what the last object held, its
        # sequence number, and for each partition with a recorded commit, the log's offset
        # when it began to wait and since when (this member's clock): the log not moving for
        # a few fold intervals means the folder is gone.
        self._recorded: dict[TopicPartition, RecordedOffset] = {}
        self._written: dict[TopicPartition, RecordedOffset] = {}
        self._object_seq = 0
        # The recorded commits that move a committed offset back (a reset by policy), marked
        # as such in the object (the fold writes them although it otherwise only moves
        # forward); and the object last written, which the member folds itself before a
        # direct write (the direct write then comes after every object it wrote before).
        # (partition -> the sequence number of the first object marking it: the mark is kept,
        # on the batches that continue the rewind, until the log has folded that object)
        self._rewinds: dict[TopicPartition, int] = {}
        self._last_object: CommitObject | None = None
        self._waiting: dict[TopicPartition, tuple[int | None, int]] = {}
        #: The folder's role, as this member plays it (None without commit objects).
        self.folder = None if self._objects is None else CommitFolder(self._objects, self._group_id)
        # The offsets last reported to ``on_durable``.
        self._reported: dict[TopicPartition, int] = {}
        # The key and sequence number of the progress listener's object last merged.
        self._listener_merged: tuple[str, int] | None = None
        #: Offsets and releases waiting to be written to the log directly (the final offsets
        #: of partitions being revoked; every commit without commit objects).
        self.pending_offsets: dict[TopicPartition, RecordedOffset] = {}
        self.pending_release: set[TopicPartition] = set()
        #: Earlier incarnations of this query (from its checkpoint) whose batches it resumes:
        #: their commits are accepted as this member's.
        self.adopted: set[str] = set()

    @property
    def uses_objects(self) -> bool:
        """Commits are recorded in commit objects (else every commit is an append)."""
        return self._objects is not None

    @property
    def pending(self) -> bool:
        """Something must be written to the log directly."""
        return bool(self.pending_offsets or self.pending_release)

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
        """Record a completed batch's end offsets (only for partitions held since the batch's
        generation, of a batch of this member or of an incarnation it adopted) and the
        releases of revoked partitions it finished."""
        accepted: dict[TopicPartition, int] = {}
        if batch_member == member_id or batch_member in self.adopted:
            accepted = fence(holdings.held_since, offsets, batch_generation)
        # A reset by policy (failOnDataLoss=false): marked in the object as a rewind (the
        # member's own batches come in order, so a lower offset is news, except below its
        # newest batch's end when the log holds exactly that: its listener was first).
        committed = self._client.coordinator.group.offsets
        newest = self._book.in_flight.ends
        back = set(
            rewinds(
                offsets_to_write(accepted, committed, source=Source.MEMBER, newest=newest),
                committed,
            )
        )
        # Below its own commit not folded yet: a rewind whatever the log holds now.
        mine = {tp: OffsetAndMetadata(r.offset) for tp, r in self._recorded.items()}
        back |= rewinds(
            offsets_to_write(accepted, mine, source=Source.MEMBER, newest=newest), mine
        ).keys()
        for tp, offset in accepted.items():
            recorded = RecordedOffset(offset, holdings.generation)
            if self._objects is None or tp in holdings.revoking:
                self.pending_offsets[tp] = recorded
            if self._objects is not None:
                self._recorded[tp] = recorded
                if tp in back:
                    self._rewinds.setdefault(tp, self._object_seq + 1)
        released = set(release) & holdings.revoking
        self.pending_release.update(released)
        # Its last batch was committed earlier, in the commit object: its release must
        # come with that offset in the log (the new owner starts there).
        self._write_recorded(released)

    def lost(self) -> None:
        """The member lost its partitions (fenced, expired): nothing waits to be written."""
        self.pending_offsets.clear()

    def pending_work(self, holdings: Holdings, in_flight: BatchesInFlight) -> PendingWork:
        """What the step must write (a snapshot; ``in_flight`` as the book hands it over)."""
        return PendingWork(
            offsets=dict(self.pending_offsets),
            release=frozenset(self.pending_release),
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
        it returns. ``replaced``: the incarnations this
        member replaces at its join, whose objects are folded before they are fenced."""
        if self._objects is None:
            return {}
        # Its last batch completed and the progress listener committed it in its object: the
        # release needs that offset in the log, so it is taken into the recorded commits.
        self.uncommitted(holdings.revoking)
        # Recorded before its revocation began: its final offset goes to the log now, directly
        # (its release waits for exactly that offset).
        self._write_recorded(holdings.revoking)
        committed = self._client.coordinator.group.offsets
        recorded = dict(self._recorded)
        changed = bool(recorded) and recorded != self._written
        if changed and not closing:
            self._object_seq += 1
            me = self._client.coordinator.group.member(member_id)
            folded = -1 if me is None else me.folded_seq.get("", -1)
            self._rewinds = {tp: n for tp, n in self._rewinds.items() if n > folded}
            marked = frozenset(tp for tp in self._rewinds if tp in recorded)
            obj = CommitObject(member_id, self._object_seq, recorded, rewinds=marked)
            try:
                self._objects.put(obj)
                self._written = recorded
                self._last_object = obj
            except GroupStoreError as exc:  # kept, and written at the next step
                log.warning("group %s: commit object not written: %s", self._group_id,
                            exc)  # fmt: skip
        for tp in recorded:
            log_offset = committed[tp].offset if tp in committed else None
            if tp not in self._waiting or self._waiting[tp][0] != log_offset:
                self._waiting[tp] = (log_offset, now)  # new, or the log moved on: folded
        for tp in set(self._waiting) - set(recorded):
            del self._waiting[tp]
        stalled = any(
            now - since >= FOLD_FALLBACK_INTERVALS * COMMIT_FOLD_INTERVAL_MS
            for _, since in self._waiting.values()
        )
        leads = self._client.coordinator.group.leader == member_id
        assert self.folder is not None  # with commit objects
        own = self._own_object_before_direct_writes(member_id)
        if not self.folder.due(now, leads=leads, stalled=stalled):
            return {**self.objects_of(replaced), **own}
        objects = self.folder.read_new(now, self._client.coordinator.group.members, stalled=stalled)
        objects.update(self.objects_of(replaced))
        objects.update(own)
        return objects

    def _own_object_before_direct_writes(self, member_id: str) -> dict[str, CommitObject]:
        """The member's last object, to fold in the step that writes to the log directly: its
        direct writes come after it, and no folder may fold it (a rewind it marks) after
        them."""
        obj = self._last_object
        if not self.pending_offsets or obj is None or obj.member_id != member_id:
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
        for tp, offset in pending.offsets.items():  # what this step wrote
            if self.pending_offsets.get(tp) == offset:
                del self.pending_offsets[tp]
        self.pending_release -= pending.release
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
        commit superseded: the log holds the end of the last batch this member handed to Spark
        for that partition (the progress listener commits a completed batch in the member's
        name, often before the member hears of it; after ``query.stop()`` the member never
        does). Written later, such a stale offset would move the committed offset back, and
        the partition's next owner would read that batch again."""
        if not self._recorded:
            return
        committed = self._client.coordinator.group.offsets
        held = self._book.holdings.held
        last_ends = self._book.in_flight.ends
        for tp, recorded in list(self._recorded.items()):
            current = None if tp not in committed else committed[tp].offset
            if (
                tp not in held
                or current == recorded.offset
                or (current is not None and current == last_ends.get(tp))
            ):
                del self._recorded[tp]
                self._written.pop(tp, None)
                self._rewinds.pop(tp, None)

    def flush(self) -> None:
        """Write the recorded commits to the log directly at the next step (the member leaves,
        or a static member stops): a LEAVE must come after them. The progress listener's
        commit of a batch the member never saw committed (after ``query.stop()`` Spark calls
        no ``commit()`` for the last one) is taken in first."""
        self.uncommitted()
        self._write_recorded(self._recorded)

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
        commits: each offset of a partition held since the generation of its batch, and only
        forward of what the log and the recorded commits hold (a late object must not undo a
        newer commit). Best effort: unreadable, it is left to the fold."""
        if self._objects is None:
            return
        key = object_key(self._book.holdings.member_id, LISTENER)
        try:
            seq = self._objects.list().get(key)
            if seq is None or self._listener_merged == (key, seq):
                return  # none, or read already (taking it in again adds nothing)
            obj = self._objects.get({key: seq}).get(key)
        except GroupStoreError as exc:
            log.warning("group %s: the listener's commits not read: %s", self._group_id, exc)
            return
        if obj is None:
            return  # replaced since the listing: the next call reads the newer one
        self._listener_merged = (key, seq)
        self._recorded.update(
            listener_offsets_to_take(
                self._book.holdings.held_since,
                obj,
                self._client.coordinator.group.offsets,
                self._recorded,
            )
        )

    def _write_recorded(self, partitions: Iterable[TopicPartition]) -> None:
        """Write the recorded commits of ``partitions`` to the log directly at the next step.
        Settled first, so what the log holds, or a newer commit superseded, is not written;
        the newest recorded offset wins over an older one still pending."""
        self.settle()
        for tp in set(partitions) & set(self._recorded):
            self.pending_offsets[tp] = self._recorded[tp]

    def committed_with_recorded(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """The log's committed offsets, with this member's commits that are not in it yet
        over them (recorded in its object, or waiting for a direct write): a LEAVE writes
        those first."""
        self.settle()
        committed = dict(self._client.coordinator.group.offsets)
        for tp, recorded in self._recorded.items():
            committed[tp] = OffsetAndMetadata(recorded.offset)
        for tp, pending in self.pending_offsets.items():
            committed[tp] = OffsetAndMetadata(pending.offset)
        return committed

    def report_durable(
        self, member_id: str, on_durable: Callable[[dict[TopicPartition, int]], None] | None
    ) -> None:
        """Tell ``on_durable`` which offsets of ``member_id`` (and the incarnations it adopted)
        the log newly holds."""
        if on_durable is None:
            return
        mine = {member_id} | self.adopted
        fresh = {
            tp: o.offset
            for tp, o in self._client.coordinator.group.offsets.items()
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
        if self._objects is not None and self._recorded:
            return min(interval_ms, COMMIT_FOLD_INTERVAL_MS)
        return interval_ms
