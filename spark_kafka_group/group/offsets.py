"""Committed offsets: which commits the group accepts, and what they write (the counterpart of
Kafka's ``OffsetMetadataManager``, a peer of the classic group's handlers in
:mod:`.coordinator`).

Everything that writes a committed offset decides here, so each rule exists once:

* **OffsetCommit** (:func:`commit_offsets`, Kafka's ``validateOffsetCommit``): a member's
  commit is accepted only from a member of the current generation (not fenced, its static
  instance not taken over), per partition only for a partition it holds now, an offset >= 0
  and metadata no longer than the group's limit; an admin commit (no member, generation -1)
  only into an Empty group.
* **The fence** (:func:`fence`): an offset reached by a batch planned in generation G may be
  committed, and a position of that batch continued, only for a partition held without
  interruption since G (a partition that moved away, and maybe back, since is never committed
  from the stale batch).
* **Forward or back** (:func:`offsets_to_write`): an offset equal to the committed one is
  never written. Which other offsets are written depends on who commits (:class:`Source`): the
  member's own commits come in batch order, so any other value is news (a lower one is a reset
  by policy, ``failOnDataLoss=false``), except below the end of its newest batch when the log
  holds exactly that (its progress listener committed that batch first); the progress
  listener's may come after a newer commit, so it only moves an offset forward, unless its
  batch started that partition below the committed offset (its reset by policy); a commit
  object folded into the log only moves an offset forward (its writer wrote a reset by policy
  directly); an operator's reset sets every offset it names (the group has no members then).
* **Deleting offsets** (:func:`delete_offsets`, Kafka's OffsetDelete): an operator drops the
  committed offsets of a topic the group no longer reads. Refused, per partition, with
  GROUP_SUBSCRIBED_TO_TOPIC while a member subscribes to the topic or still holds one of its
  partitions; an Empty group has none, so it is always allowed there.
* **The handlers** (:func:`commit_offsets`, :func:`commit_batch`, :func:`simple_commit`,
  :func:`fold_commit_objects`, :func:`reset`, :func:`delete_offsets`): pure, as the
  coordinator's are: the folded group, the request and the time in, ``(records, response)``
  out (a fold's second value: the keys of the objects done with); the caller applies the
  records (:mod:`.handling`). The progress listener's commit (:func:`listener_commit`) and
  what its member takes of it (:func:`listener_offsets_to_take`) write no record: they
  decide a commit object's offsets.

A commit not yet in the log is a :class:`~spark_kafka_group.group.types.RecordedOffset`
(:mod:`.types`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

from spark_kafka_group.group.config import GroupConfig
from spark_kafka_group.group.errors import GroupError
from spark_kafka_group.group.handling import Scratch, check_member, unavailable
from spark_kafka_group.group.messages import CommitResponse, OffsetDeleteResponse
from spark_kafka_group.group.metadata import (
    GroupMetadata,
    MemberMetadata,
    OffsetAndMetadata,
    Partitions,
    TopicPartition,
)
from spark_kafka_group.group.record_helpers import commit_record, offset_delete_record
from spark_kafka_group.group.records import GroupRecord
from spark_kafka_group.group.state import GroupState
from spark_kafka_group.group.types import (
    LISTENER,
    CommitObject,
    Committed,
    CommitValue,
    RecordedOffset,
)

V = TypeVar("V")

_DEFAULT_CONFIG = GroupConfig()


class Source(Enum):
    """Who commits, which decides which offsets are worth writing (:func:`offsets_to_write`)."""

    #: The member's own commit of its completed batches, in batch order.
    MEMBER = "member"
    #: The progress listener's commit of a completed batch, in the member's name; may come late.
    LISTENER = "listener"
    #: A commit object (the member's or its listener's) folded into the log.
    FOLD = "fold"
    #: An operator's offset reset (the group has no members).
    ADMIN = "admin"


# ---------------------------------------------------------------------------------- the rules


def held_throughout(
    held_since: Mapping[TopicPartition, int], tp: TopicPartition, generation: int
) -> bool:
    """Held now (in ``held_since``: since when each held partition has been held without
    interruption), and since ``generation``."""
    return held_since.get(tp, generation + 1) <= generation


def fence(
    held_since: Mapping[TopicPartition, int], offsets: Mapping[TopicPartition, V], generation: int
) -> dict[TopicPartition, V]:
    """The part of ``offsets`` (of a batch planned in ``generation``) that its holder may still
    commit, continue from or read: the partitions held without interruption since then."""
    return {tp: v for tp, v in offsets.items() if held_throughout(held_since, tp, generation)}


def fence_recorded(
    held_since: Mapping[TopicPartition, int], offsets: Mapping[TopicPartition, RecordedOffset]
) -> dict[TopicPartition, int]:
    """:func:`fence` for recorded offsets, each with its own generation."""
    return {
        tp: r.offset for tp, r in offsets.items() if held_throughout(held_since, tp, r.generation)
    }


def offsets_to_write(
    offsets: Mapping[TopicPartition, int],
    committed: Committed,
    *,
    source: Source,
    starts: Mapping[TopicPartition, int] | None = None,
    newest: Mapping[TopicPartition, int] | None = None,
    rewound: Collection[TopicPartition] = (),
) -> dict[TopicPartition, int]:
    """The offsets of a commit by ``source`` worth writing, given what the group has committed
    (the module docstring says why each source gets its rule). ``starts``: the listener's
    batch's start offsets where it did not continue from the previous batch. ``newest``: the
    member's own commits: the end of its newest batch of each partition. ``rewound``: a
    folded object's partitions its writer marked as rewinds (written whatever the log holds:
    the record orders the writer's objects), or the listener's partitions whose batch
    continues a rewind not folded yet."""
    if source is Source.ADMIN:
        return dict(offsets)
    starts = starts or {}
    newest = newest or {}
    if source is Source.FOLD:
        return {
            tp: o
            for tp, o in offsets.items()
            if tp in rewound or tp not in committed or o > committed[tp].offset
        }
    out: dict[TopicPartition, int] = {}
    for tp, offset in offsets.items():
        current = committed.get(tp)
        if current is None:
            out[tp] = offset
        elif offset == current.offset:
            continue
        elif offset > current.offset:
            out[tp] = offset
        elif source is Source.MEMBER and newest.get(tp) != current.offset:
            out[tp] = offset  # an older batch's commit is newer only than a reset by policy
        elif source is Source.LISTENER and (
            tp in rewound or starts.get(tp, current.offset) < current.offset
        ):
            out[tp] = offset  # the batch (or one it continues) started below: a reset by policy
    return out


def rewinds(
    offsets: Mapping[TopicPartition, int], committed: Committed
) -> dict[TopicPartition, int]:
    """The offsets that move a committed offset back (a reset by policy): written to the log
    directly by their writer, since a fold only moves offsets forward (a successor must not
    start at the old, higher offset)."""
    return {tp: o for tp, o in offsets.items() if tp in committed and o < committed[tp].offset}


# ---------------------------------------------------------------------------------- handlers


def commit_offsets(
    group: GroupMetadata,
    member_id: str | None,
    generation: int,
    offsets: Mapping[TopicPartition, CommitValue],
    now_ms: int,
    *,
    instance_id: str | None = None,
    config: GroupConfig = _DEFAULT_CONFIG,
    folded_from: tuple[str, int] | None = None,
) -> tuple[list[GroupRecord], CommitResponse]:
    """OffsetCommit, as Kafka validates it: accepted only from a member of the current
    generation, per partition only for one it holds (assigned, or being revoked) now, an
    offset >= 0 and metadata within ``config.max_offset_metadata_length``. ``member_id=None``
    with ``generation=-1`` is an admin commit (an operator's reset, an ``assign`` query, an
    import of a Kafka group's offsets), accepted only while the group is Empty.
    ``folded_from``: the writer and sequence number of the commit object folded."""
    parts = {TopicPartition(t, int(p)): v for (t, p), v in offsets.items()}

    def reject(error: GroupError) -> tuple[list[GroupRecord], CommitResponse]:
        return [], CommitResponse(error, dict.fromkeys(parts, error))

    held: Partitions | None = None
    if member_id is None:
        err = unavailable(group)
        if err is not None:
            return reject(err)
        if generation >= 0 or group.state != GroupState.EMPTY:
            return reject(GroupError.UNKNOWN_MEMBER_ID)
    else:
        err, m = check_member(group, member_id, instance_id)
        if m is None:
            return reject(err)
        if generation != group.generation or m.generation != group.generation:
            return reject(GroupError.ILLEGAL_GENERATION)
        held = m.held
    records: list[GroupRecord] = []
    errors: dict[TopicPartition, GroupError] = {}
    for tp, value in sorted(parts.items()):
        offset, md = (value, None) if isinstance(value, int) else (value.offset, value.metadata)
        errors[tp] = _partition_error(tp, held, offset, md, config)
        if errors[tp] is GroupError.NONE:
            records.append(
                commit_record(
                    now_ms=now_ms,
                    member_id=member_id,
                    instance_id=instance_id,
                    generation=generation,
                    partition=tp,
                    offset=int(offset),
                    metadata=md,
                    folded_from=folded_from,
                )
            )
    return records, CommitResponse(GroupError.NONE, errors)


def _partition_error(
    tp: TopicPartition,
    held: Partitions | None,
    offset: int,
    metadata: str | None,
    config: GroupConfig,
) -> GroupError:
    """Whether one partition of an OffsetCommit is accepted (``held`` None: an admin commit)."""
    if held is not None and tp not in held:
        return GroupError.ILLEGAL_GENERATION  # not its partition: a zombie commit
    if offset < 0:
        return GroupError.INVALID_REQUEST
    if metadata is not None and len(metadata) > config.max_offset_metadata_length:
        return GroupError.OFFSET_METADATA_TOO_LARGE
    return GroupError.NONE


def commit_batch(
    group: GroupMetadata,
    member_id: str,
    offsets: Mapping[TopicPartition, RecordedOffset],
    now_ms: int,
    *,
    source: Source,
    starts: Mapping[TopicPartition, int] | None = None,
    newest: Mapping[TopicPartition, int] | None = None,
    rewound: Collection[TopicPartition] = (),
    folded_from: tuple[str, int] | None = None,
) -> tuple[list[GroupRecord], CommitResponse | None]:
    """A commit in ``member_id``'s name (its own, or a folded object): fenced, filtered by the
    source's rule, then OffsetCommit (:func:`commit_offsets`) in the current generation. The
    response is None when nothing was left to write (or the member is not in the group: its
    commits are never applied any more)."""
    member = group.member(member_id)
    if member is None:
        return [], None
    valid = fence_recorded(member.held_since, offsets)
    fresh = offsets_to_write(
        valid, group.offsets, source=source, starts=starts, newest=newest, rewound=rewound
    )
    if not fresh:
        return [], None
    return commit_offsets(
        group,
        member_id,
        group.generation,
        fresh,
        now_ms,
        instance_id=member.instance_id,
        folded_from=folded_from,
    )


def simple_commit(
    group: GroupMetadata, offsets: Mapping[TopicPartition, int], now_ms: int
) -> tuple[list[GroupRecord], CommitResponse | None]:
    """The commit of an ``assign`` query (Kafka's simple consumer: no member of the group):
    its batches come in order, as a member's own; an admin commit, so accepted only while the
    group is Empty. None when nothing was left to write."""
    fresh = offsets_to_write(offsets, group.offsets, source=Source.MEMBER)
    if not fresh:
        return [], None
    return commit_offsets(group, None, -1, fresh, now_ms)


def fold_commit_objects(
    group: GroupMetadata, objects: Mapping[str, CommitObject], now_ms: int
) -> tuple[list[GroupRecord], set[str]]:
    """The COMMIT records that bring the log up to ``objects`` (by their store's key: a
    member's own and its progress listener's are two), and the keys of the objects done
    with: folded, or holding nothing that may still be applied. An object refused for now (its
    member's generation is behind a rebalance) is not done. Objects of members no longer in
    the group are never applied (a reset after they left stays), nor an object older than
    one of its writer's already folded (``MemberMetadata.folded_seq``: a folder that read it
    before a newer one, a rewind, was folded must not bring its offsets back). A fold moves
    offsets forward, except those the object marks as rewinds; each record names the object
    it comes from."""
    scratch = Scratch(group)
    done: set[str] = set()
    for key, obj in sorted(objects.items()):
        member = scratch.group.member(obj.member_id)
        if member is None or obj.seq <= member.folded_seq.get(obj.writer, -1):
            done.add(key)
            continue
        records, response = commit_batch(
            scratch.group,
            obj.member_id,
            obj.offsets,
            now_ms,
            source=Source.FOLD,
            rewound=obj.rewinds,
            folded_from=(obj.writer, obj.seq),
        )
        scratch.add_all(records)
        if response is None or all(
            e is GroupError.NONE for e in response.partition_errors.values()
        ):
            done.add(key)
    return scratch.records, done


def reset(
    group: GroupMetadata, offsets: Mapping[TopicPartition, int], now_ms: int
) -> tuple[list[GroupRecord], CommitResponse]:
    """An operator's offset reset: every offset named, accepted only while the group is Empty
    (an admin commit)."""
    fresh = offsets_to_write(offsets, group.offsets, source=Source.ADMIN)
    return commit_offsets(group, None, -1, fresh, now_ms)


def delete_offsets(
    group: GroupMetadata, partitions: Iterable[TopicPartition], now_ms: int
) -> tuple[list[GroupRecord], OffsetDeleteResponse]:
    """An operator's OffsetDelete (Kafka's ``OffsetMetadataManager.deleteOffsets``): the
    committed offsets of ``partitions`` go, one OFFSET_DELETE record each. A topic that a
    member subscribes to, or still holds a partition of, is refused for all its partitions
    named (GROUP_SUBSCRIBED_TO_TOPIC); so an Empty group is always allowed. A partition
    without a committed offset is answered NONE and writes nothing, as Kafka's. A Dead group
    is GROUP_ID_NOT_FOUND; a non-empty group of another protocol type than ``consumer`` is
    NON_EMPTY_GROUP (Kafka's rule for groups whose subscriptions it cannot read)."""
    g = group
    parts = sorted(set(partitions))
    group_error = None
    if g.state is GroupState.DEAD:
        group_error = GroupError.GROUP_ID_NOT_FOUND
    elif g.state is not GroupState.EMPTY and g.protocol_type not in (None, "consumer"):
        group_error = GroupError.NON_EMPTY_GROUP
    if group_error is not None:
        return [], OffsetDeleteResponse(group_error, dict.fromkeys(parts, group_error))
    refusals: dict[str, str] = {}
    for topic in sorted({tp.topic for tp in parts}):
        readers = g.members_reading(topic)
        if readers:
            refusals[topic] = subscribed_refusal(g.group_id, topic, readers)
    errors: dict[TopicPartition, GroupError] = {}
    records: list[GroupRecord] = []
    for tp in parts:
        if tp.topic in refusals:
            errors[tp] = GroupError.GROUP_SUBSCRIBED_TO_TOPIC
            continue
        errors[tp] = GroupError.NONE
        if tp in g.offsets:
            records.append(offset_delete_record(now_ms=now_ms, partition=tp))
    return records, OffsetDeleteResponse(GroupError.NONE, errors, refusals)


def subscribed_refusal(group_id: str, topic: str, readers: Iterable[MemberMetadata]) -> str:
    """Why the offsets of ``topic`` cannot be deleted: who reads it, and what to do."""
    named = "; ".join(
        m.member_id
        + (f" (instance {m.instance_id})" if m.instance_id else "")
        + (f" on {m.profile.client_host}" if m.profile.client_host else "")
        for m in readers
    )
    return (
        f"Group {group_id!r} still reads topic {topic!r}: its live member(s) {named} subscribe "
        "to it or hold its partitions, so its committed offsets are in use "
        "(GROUP_SUBSCRIBED_TO_TOPIC). Stop those queries, or restart them with a subscription "
        f"(subscribe / subscribePattern) that leaves out {topic!r}, then delete its offsets."
    )


def listener_commit(
    group: GroupMetadata,
    member_id: str,
    generation: int,
    offsets: Mapping[TopicPartition, int],
    *,
    batch_id: int,
    starts: Mapping[TopicPartition, int] | None = None,
    previous: CommitObject | None = None,
) -> ListenerCommit | None:
    """The progress listener's commit object for batch ``batch_id`` (planned in
    ``generation``) of ``member_id``; None when it moves nothing. It replaces the listener's
    ``previous`` object for the member (None: it has none), so it keeps what that one holds
    and the member may still commit, and takes from the batch every offset the member may
    still commit, except one below the previous object's that is no rewind (a late commit of
    an older batch). It marks as rewinds the offsets that move an offset back
    (:func:`listener_rewinds`). Its sequence number is ``batch_id + 1`` (a restarted driver
    continues the query's batch ids, so it never goes back). A batch older than the previous
    object's (a late progress event) gives None: that object comes after it in batch order and
    keeps what the member may still commit, so the older batch neither replaces it (a rewind
    it holds included) nor continues its rewinds."""
    member = group.member(member_id)
    if member is None:
        return None  # left, expired or replaced: its commits are never applied any more
    if previous is not None and batch_id + 1 < previous.seq:
        return None  # batch order, not arrival order, says which offset is newer
    held = fence(member.held_since, offsets, generation)
    marked = listener_rewinds(member, group.offsets, held, starts or {}, previous)
    kept: dict[TopicPartition, RecordedOffset] = {}
    if previous is not None:
        before = fence_recorded(member.held_since, previous.offsets)
        late = {tp for tp, o in held.items() if o < before.get(tp, -1) and tp not in marked}
        held = {tp: o for tp, o in held.items() if tp not in late}
        kept = {tp: previous.offsets[tp] for tp in before if tp not in held}
    fresh = offsets_to_write(
        held, group.offsets, source=Source.LISTENER, starts=starts, rewound=marked
    )
    if not fresh:
        return None
    recorded = {**kept, **{tp: RecordedOffset(off, generation) for tp, off in held.items()}}
    back = frozenset(rewinds(fresh, group.offsets)) | (marked & set(fresh))
    obj = CommitObject(member_id, batch_id + 1, recorded, writer=LISTENER, rewinds=back)
    return ListenerCommit(obj, moved=len(fresh))


def listener_rewinds(
    member: MemberMetadata,
    committed: Committed,
    offsets: Mapping[TopicPartition, int],
    starts: Mapping[TopicPartition, int],
    previous: CommitObject | None,
) -> Partitions:
    """The partitions of a listener's batch that move an offset back, whatever the log holds
    now: the batch started below the committed offset, or, while the listener's previous
    object is not folded yet, below that object's offset, or continued that object's rewind.
    (Once the previous object is folded, the log holds its offsets: the committed offset
    alone decides.)"""
    out = {
        tp
        for tp in offsets
        if tp in starts and tp in committed and starts[tp] < committed[tp].offset
    }
    if previous is not None and previous.seq > member.folded_seq.get(LISTENER, -1):
        before = previous.offsets
        out |= {tp for tp in offsets if tp in starts and starts[tp] < _offset(before.get(tp))}
        out |= {tp for tp in previous.rewinds if tp in offsets and tp not in starts}
    return frozenset(out)


def _offset(recorded: RecordedOffset | None) -> int:
    return -1 if recorded is None else recorded.offset


@dataclass(frozen=True)
class ListenerCommit:
    """What the progress listener writes for one completed batch of a member: its new commit
    object (rewinds marked), and how many offsets it moves."""

    obj: CommitObject
    moved: int


def listener_offsets_to_take(
    held_since: Mapping[TopicPartition, int],
    obj: CommitObject,
    committed: Committed,
    recorded: Mapping[TopicPartition, RecordedOffset],
) -> dict[TopicPartition, RecordedOffset]:
    """The offsets of the listener's object ``obj`` that its member takes into its recorded
    commits (to write them now: a release, a LEAVE): those it may still commit, and only
    forward of both the log and what it recorded itself (a late object must not undo a newer
    commit)."""
    valid = fence_recorded(held_since, obj.offsets)
    ahead = offsets_to_write(valid, committed, source=Source.FOLD)
    mine = {tp: OffsetAndMetadata(r.offset) for tp, r in recorded.items()}
    ahead = offsets_to_write(ahead, mine, source=Source.FOLD)
    return {tp: obj.offsets[tp] for tp in ahead}
