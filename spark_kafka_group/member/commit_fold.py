"""Folding the members' commit objects into the group log: a pure function of the folded group.

Members record commits in objects next to the log (:mod:`spark_kafka_group.store.commit_objects`);
one member at a time, the group's leader, folds every member's newest object into the log in
one append per :data:`COMMIT_FOLD_INTERVAL_MS`. A member that sees its own commit not folded
for :data:`FOLD_FALLBACK_INTERVALS` intervals (by its own clock: the leader may be gone) folds
every object itself. So the log takes about one commit append per interval whatever the size
of the group, and no commit races another.

The fold writes ordinary COMMIT records in the member's name and generation, through the
coordinator's fenced ``commit_offsets``: an offset is applied only for a partition the member
holds now and has held without interruption since the generation it recorded the offset in
(a partition that moved away, and maybe back, since is never committed from a stale object).
It only moves a committed offset forward (:func:`offsets_to_write` with ``in_order=False``): a
member's own direct commit (the final offset of a partition being revoked, a commit at LEAVE,
a reset by policy) may be newer than its object, and its progress listener's object (the same
rules, another writer) may be newer or older than the member's.
"""

from __future__ import annotations

from collections.abc import Iterable

from spark_kafka_group.group import GroupCoordinator, GroupError, GroupRecord
from spark_kafka_group.group.metadata import held_throughout
from spark_kafka_group.member.in_flight import offsets_to_write
from spark_kafka_group.store.commit_objects import CommitObject

#: How often the group's leader folds the members' commit objects into the log.
COMMIT_FOLD_INTERVAL_MS = 1_000
#: A member whose own commit is not folded this many intervals after it was recorded folds
#: every member's objects itself.
FOLD_FALLBACK_INTERVALS = 5


def fold_commit_objects(
    work: GroupCoordinator, objects: Iterable[CommitObject], now: int
) -> tuple[list[GroupRecord], set[str]]:
    """The COMMIT records that bring the log up to ``objects`` (applied to ``work``), and the
    keys of the objects done with (:attr:`CommitObject.key`: a member's own and its progress
    listener's are two): folded, or holding nothing that may still be applied. An object
    refused for now (its member's generation is behind a rebalance) is not done."""
    out: list[GroupRecord] = []
    done: set[str] = set()
    for obj in sorted(objects, key=lambda o: o.key):
        member = work.group.member(obj.member_id)
        if member is None:
            done.add(obj.key)  # left, expired or replaced: never applied any more
            continue
        valid = {
            tp: r.offset
            for tp, r in obj.offsets.items()
            if tp in member.held and held_throughout(member.held_since, tp, r.generation)
        }
        fresh = offsets_to_write(valid, work.group.offsets, in_order=False)
        if not fresh:
            done.add(obj.key)
            continue
        records, response = work.commit_offsets(
            obj.member_id, work.group.generation, fresh, now, instance_id=member.instance_id
        )
        work.apply_all(records)
        out.extend(records)
        if all(e is GroupError.NONE for e in response.partition_errors.values()):
            done.add(obj.key)
    return out, done
