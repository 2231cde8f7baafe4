"""A member's commits not in the group log yet, as one immutable value with pure transitions.

A commit has one place to wait: :class:`PendingCommits`. The member records a completed
batch's end offsets (:meth:`~PendingCommits.record`), writes them as its commit object
(:meth:`~PendingCommits.write`), takes in its progress listener's object where the log needs
an offset now (:meth:`~PendingCommits.take_listener`), moves recorded offsets to a direct write
(:meth:`~PendingCommits.to_direct`), learns which direct writes landed
(:meth:`~PendingCommits.landed`), forgets what the log holds or a newer commit superseded
(:meth:`~PendingCommits.settle`) and replaces an earlier incarnation, whose batches' commits
are then its own (:meth:`~PendingCommits.replace`). Each transition returns a new value; the
member's I/O shell (:mod:`spark_kafka_group.member.commits`) keeps the current one, puts the
objects and reads the listener's. Which offsets are accepted and written is decided by the
offsets rules (:mod:`.offsets`), as everywhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from spark_kafka_group.group.metadata import OffsetAndMetadata, Partitions, TopicPartition
from spark_kafka_group.group.offsets import (
    Source,
    fence,
    listener_offsets_to_take,
    offsets_to_write,
    rewinds,
)
from spark_kafka_group.group.types import CommitObject, Committed, RecordedOffset

Recorded = Mapping[TopicPartition, RecordedOffset]


@dataclass(frozen=True)
class PendingCommits:
    """What one member has committed that the log does not hold yet."""

    #: Commits are recorded in commit objects (else every commit is a direct write).
    objects: bool = True
    #: The newest recorded offset per partition not yet seen in the log, with the generation
    #: it was recorded in (what the fence needs).
    recorded: Recorded = field(default_factory=dict)
    #: What the member's last object holds, and that object (its ``seq`` numbers the next).
    written: Recorded = field(default_factory=dict)
    last_object: CommitObject | None = None
    #: Recorded offsets that move a committed offset back, marked as rewinds in the object:
    #: partition -> the sequence number of the first object marking it (the mark stays, on
    #: the batches that continue the rewind, until the log has folded that object).
    rewinds: Mapping[TopicPartition, int] = field(default_factory=dict)
    #: Offsets to write to the log directly (the final offsets of partitions being revoked, a
    #: closing member's commits; every commit without commit objects), and releases.
    direct: Recorded = field(default_factory=dict)
    releases: Partitions = frozenset()
    #: Earlier incarnations this member replaced (a restart on its checkpoint, a rejoin
    #: under a new id): their batches' commits are its own.
    replaced: frozenset[str] = frozenset()
    #: The sequence number of the progress listener's object last taken in.
    listener_taken: int | None = None

    @property
    def seq(self) -> int:
        """The sequence number of the member's last object (0: none yet)."""
        return 0 if self.last_object is None else self.last_object.seq

    @property
    def has_direct_writes(self) -> bool:
        return bool(self.direct or self.releases)

    # ------------------------------------------------------------------ transitions

    def record(
        self,
        member_id: str,
        offsets: Mapping[TopicPartition, int],
        *,
        batch_generation: int,
        batch_member: str,
        release: Iterable[TopicPartition],
        held_since: Mapping[TopicPartition, int],
        revoking: Partitions,
        generation: int,
        committed: Committed,
        newest: Mapping[TopicPartition, int],
    ) -> PendingCommits:
        """A completed batch's end offsets, recorded: only for partitions held since the
        batch's generation, of a batch of this member or of an incarnation it replaced; and the
        releases of revoked partitions it finished, with their recorded offsets as direct
        writes (the new owner starts there). ``newest``: the end of the member's newest batch
        of each partition (a lower offset is a rewind, except below the newest batch's end
        when the log holds exactly that: its listener was first)."""
        accepted: dict[TopicPartition, int] = {}
        if batch_member == member_id or batch_member in self.replaced:
            accepted = fence(held_since, offsets, batch_generation)
        # A reset by policy (failOnDataLoss=false): below the log, or below its own commit
        # not folded yet, whatever the log holds now.
        mine = {tp: OffsetAndMetadata(r.offset) for tp, r in self.recorded.items()}
        back = {
            tp
            for base in (committed, mine)
            for tp in rewinds(
                offsets_to_write(accepted, base, source=Source.MEMBER, newest=newest), base
            )
        }
        recorded, direct, marks = dict(self.recorded), dict(self.direct), dict(self.rewinds)
        for tp, offset in accepted.items():
            value = RecordedOffset(offset, generation)
            if not self.objects or tp in revoking:
                direct[tp] = value
            if self.objects:
                recorded[tp] = value
                if tp in back:
                    marks.setdefault(tp, self.seq + 1)
        released = frozenset(release) & revoking
        return dataclasses.replace(
            self,
            recorded=recorded,
            direct=direct,
            rewinds=marks,
            releases=self.releases | released,
        )

    def settle(
        self,
        held: Partitions,
        committed: Committed,
        last_ends: Mapping[TopicPartition, int],
    ) -> PendingCommits:
        """Without the recorded commits the log now holds, that no longer apply (not held),
        or that a newer commit superseded: the log holds the end of the last batch the member
        handed to Spark for that partition (its progress listener committed it first).
        Written later, such a stale offset would move the committed offset back."""

        def stale(tp: TopicPartition, recorded: RecordedOffset) -> bool:
            current = committed[tp].offset if tp in committed else None
            return (
                tp not in held
                or current == recorded.offset
                or (current is not None and current == last_ends.get(tp))
            )

        gone = {tp for tp, r in self.recorded.items() if stale(tp, r)}
        if not gone:
            return self
        return dataclasses.replace(
            self,
            recorded={tp: r for tp, r in self.recorded.items() if tp not in gone},
            written={tp: r for tp, r in self.written.items() if tp not in gone},
            rewinds={tp: n for tp, n in self.rewinds.items() if tp not in gone},
        )

    def to_direct(self, partitions: Iterable[TopicPartition]) -> PendingCommits:
        """The recorded commits of ``partitions`` as direct writes (settle first: what the log
        holds, or a newer commit superseded, is not written); the newest recorded offset wins
        over an older one still waiting."""
        moved = {tp: self.recorded[tp] for tp in set(partitions) & set(self.recorded)}
        return dataclasses.replace(self, direct={**self.direct, **moved}) if moved else self

    def write(self, member_id: str, folded_seq: int) -> tuple[PendingCommits, CommitObject | None]:
        """The member's next commit object, if it recorded something since its last one (and
        the value once it is written). ``folded_seq``: the newest of its objects the log has
        folded; the rewinds that object carried are in the log, their marks are dropped."""
        if not self.objects or not self.recorded or self.recorded == self.written:
            return self, None
        marks = {tp: n for tp, n in self.rewinds.items() if n > folded_seq}
        obj = CommitObject(
            member_id,
            self.seq + 1,
            dict(self.recorded),
            rewinds=frozenset(tp for tp in marks if tp in self.recorded),
        )
        return dataclasses.replace(
            self, written=dict(self.recorded), last_object=obj, rewinds=marks
        ), obj

    def take_listener(
        self,
        obj: CommitObject,
        held_since: Mapping[TopicPartition, int],
        committed: Committed,
    ) -> PendingCommits:
        """The progress listener's object for this member, taken into the recorded commits:
        each offset of a partition held since the generation of its batch, and only forward of
        what the log and the recorded commits hold (a late object must not undo a newer
        commit)."""
        taken = listener_offsets_to_take(held_since, obj, committed, self.recorded)
        return dataclasses.replace(
            self, recorded={**self.recorded, **taken}, listener_taken=obj.seq
        )

    def landed(self, direct: Recorded, releases: Partitions) -> PendingCommits:
        """A step wrote these direct offsets and releases: they wait no more (unless a newer
        offset was recorded for the partition meanwhile)."""
        return dataclasses.replace(
            self,
            direct={tp: r for tp, r in self.direct.items() if direct.get(tp) != r},
            releases=self.releases - releases,
        )

    def lost(self) -> PendingCommits:
        """The member lost its partitions (fenced, expired): nothing waits to be written."""
        return dataclasses.replace(self, direct={})

    def replace(self, member_id: str) -> PendingCommits:
        """This member replaces ``member_id``, an earlier incarnation (named by its query's
        checkpoint): that incarnation's batches' commits are accepted as this member's."""
        return dataclasses.replace(self, replaced=self.replaced | {member_id})

    # ------------------------------------------------------------------ queries

    def over(self, committed: Committed) -> dict[TopicPartition, OffsetAndMetadata]:
        """The log's committed offsets with this member's commits not in it yet over them
        (recorded, or waiting for a direct write)."""
        out = dict(committed)
        for tp, r in [*self.recorded.items(), *self.direct.items()]:
            out[tp] = OffsetAndMetadata(r.offset)
        return out
