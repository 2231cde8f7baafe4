"""The folder's role, as one member plays it: read the group's commit objects and hand them
to the step, whose offsets handler folds them into the log
(:func:`spark_kafka_group.group.offsets.fold_commit_objects`).

The group's leader folds every :data:`COMMIT_FOLD_INTERVAL_MS`; any member whose own commit
has waited :data:`FOLD_FALLBACK_INTERVALS` intervals folds too (the folder is gone). Only new
objects are read: the sequence number of each object folded is kept. Owned by the member's
step thread, timed on its monotonic clock.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping

from spark_kafka_group.errors import GroupStoreError
from spark_kafka_group.group.types import LISTENER, CommitObject
from spark_kafka_group.store.commit_objects import CommitObjectStore, object_key, owner

log = logging.getLogger(__name__)

#: How often the group's leader folds the members' commit objects into the log.
COMMIT_FOLD_INTERVAL_MS = 1_000
#: A member whose own commit is not folded this many intervals after it was recorded folds
#: every member's objects itself.
FOLD_FALLBACK_INTERVALS = 5


class CommitFolder:
    def __init__(self, objects: CommitObjectStore, group_id: str) -> None:
        self._objects = objects
        self._group_id = group_id
        self._folded_ms = -(10**15)  # when its last fold started
        self._folded_seq: dict[str, int] = {}  # of each object folded, by key
        self._seen_seq: dict[str, int] = {}  # of each object the fold under way read
        self._fold_started_ms: int | None = None

    def due(self, now: int, *, leads: bool, stalled: bool) -> bool:
        """Fold now: the leader, a fold interval after its last fold; anyone, when its own
        commit stalled."""
        return stalled or (leads and now - self._folded_ms >= COMMIT_FOLD_INTERVAL_MS)

    def read_new(
        self, now: int, members: Collection[str], *, stalled: bool
    ) -> dict[str, CommitObject]:
        """The objects of ``members`` not folded yet (all of them after a stall: the folder
        may have missed some). Counted as a fold once its append lands (:meth:`landed`)."""
        self._fold_started_ms = now
        if stalled:
            self._folded_seq.clear()
        listed = self._list()
        new = {
            key: seq
            for key, seq in listed.items()
            if owner(key) in members and seq > self._folded_seq.get(key, -1)
        }
        self._seen_seq = dict(new)
        return self._get(new)

    def objects_of(self, members: frozenset[str]) -> dict[str, CommitObject]:
        """The newest commit objects of ``members`` (those that have one; their progress
        listeners' too), by key."""
        if not members:
            return {}
        listed = self._list()
        return self._get({k: s for k, s in listed.items() if owner(k) in members})

    def landed(self, folded: Iterable[str]) -> int | None:
        """A step's records are in the log: the objects it folded count as folded. When a
        fold started, the time it started."""
        for key in folded:
            if key in self._seen_seq:
                self._folded_seq[key] = self._seen_seq[key]
        started, self._fold_started_ms = self._fold_started_ms, None
        if started is not None:
            self._folded_ms = started
        return started

    def forget(self, member_id: str) -> None:
        """A member left or expired: delete its commit objects (and its listener's)."""
        self._folded_seq.pop(member_id, None)
        self._folded_seq.pop(object_key(member_id, LISTENER), None)
        try:
            self._objects.drop(member_id)
        except GroupStoreError as exc:  # a leftover is never applied (its member is gone)
            log.debug("group %s: commit objects of %s not dropped: %s", self._group_id,
                      member_id, exc)  # fmt: skip

    def until_next_fold_ms(self, now: int) -> int:
        """As the group's folder: how long until its next fold is due."""
        return self._folded_ms + COMMIT_FOLD_INTERVAL_MS - now

    def _list(self) -> Mapping[str, int]:
        try:
            return self._objects.list()
        except GroupStoreError as exc:
            log.warning("group %s: commit objects not listed: %s", self._group_id, exc)
            return {}

    def _get(self, keys: Mapping[str, int]) -> dict[str, CommitObject]:
        if not keys:
            return {}
        try:
            return self._objects.get(keys)
        except GroupStoreError as exc:
            log.warning("group %s: commit objects not read: %s", self._group_id, exc)
            return {}
