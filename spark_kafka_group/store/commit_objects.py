"""Per-member commit objects: a member's newest offsets, kept next to the group log.

A member's ``commit()`` only records its offsets; its background step writes them as one small
object, ``_offsets/<member id>@<sequence number>``, in the group log's directory (a blind put,
no compare-and-swap, so commits never race each other), then deletes its previous object. One
listing tells which members have something new (the sequence number grew) without reading
every object; the group's folder (its leader) reads those and folds them into the log in one
append per interval (:func:`spark_kafka_group.group.offsets.fold_commit_objects`). Delta
ignores directories whose name starts with ``_``: vacuum leaves the objects alone.

An object holds offsets the member recorded, each with the member's generation when it
recorded it: the fold applies an offset only to a partition the member has held without
interruption since that generation, so a commit of a partition that moved away and back is
never applied (fencing, as for the log's own COMMIT records).

The progress listener (in the query's driver, another process) commits each completed batch
for the member in an object of its own, ``_offsets/<member id>~listener@<batch id + 1>``
(``writer="listener"``): the same fold brings it in, so the listener never appends to the log
either. An object's key (:func:`object_key`) names its file; :func:`owner` maps a key back to its
member: whatever lists objects for members (the fold, a LEAVE, an EXPIRE) filters by owner.
The object's type is the protocol's (:mod:`spark_kafka_group.group.types`), and so is what the
fold accepts (:mod:`spark_kafka_group.group.offsets`); this module names, encodes and stores
objects.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.group.types import LISTENER, CommitObject, RecordedOffset
from spark_kafka_group.store.member_files import MemberFiles

OFFSETS_DIR = "_offsets"
#: Objects read at once by a folder (object stores answer GETs in parallel).
READ_THREADS = 16
_WRITER_SEP = "~"


def object_key(member_id: str, writer: str = "") -> str:
    """The key (file name) of ``writer``'s object for ``member_id`` ("": the member's own)."""
    return f"{member_id}{_WRITER_SEP}{writer}" if writer else member_id


def key_of(obj: CommitObject) -> str:
    """The key of ``obj``: one newest object per key in a store."""
    return object_key(obj.member_id, obj.writer)


def owner(key: str) -> str:
    """The member whose offsets the object ``key`` holds."""
    suffix = _WRITER_SEP + LISTENER
    return key[: -len(suffix)] if key.endswith(suffix) else key


def encode(obj: CommitObject) -> bytes:
    """The object's file content (JSON)."""
    body: dict[str, object] = {"member_id": obj.member_id, "seq": obj.seq}
    if obj.writer:  # left out for the member's own: the format before listener objects
        body["writer"] = obj.writer
    body["offsets"] = [
        [tp.topic, tp.partition, r.offset, r.generation] for tp, r in sorted(obj.offsets.items())
    ]
    if obj.rewinds:  # left out when there are none: the format before rewinds were marked
        body["rewinds"] = [[tp.topic, tp.partition] for tp in sorted(obj.rewinds)]
    return json.dumps(body, separators=(",", ":")).encode()


def decode(data: bytes) -> CommitObject:
    """The object a file holds (:func:`encode`)."""
    d = json.loads(data)
    return CommitObject(
        member_id=str(d["member_id"]),
        seq=int(d["seq"]),
        offsets={
            TopicPartition(str(t), int(p)): RecordedOffset(int(o), int(g))
            for t, p, o, g in d["offsets"]
        },
        writer=str(d.get("writer", "")),
        rewinds=frozenset(TopicPartition(str(t), int(p)) for t, p in d.get("rewinds", ())),
    )


class CommitObjectStore(Protocol):
    def put(self, obj: CommitObject) -> None:
        """Write ``obj`` as the newest object of its key (and forget the key's previous one)."""
        ...

    def list(self) -> Mapping[str, int]:
        """The newest sequence number of every key with an object."""
        ...

    def get(self, members: Mapping[str, int]) -> dict[str, CommitObject]:
        """The objects ``{key: seq}`` by key (one missing, e.g. replaced meanwhile, is left
        out)."""
        ...

    def drop(self, member_id: str) -> None:
        """Forget a member's objects, its listener's too (it left or was expired; its offsets
        are in the log)."""
        ...


class CommitObjectFiles:
    """The commit objects of one group log (``table_uri``), on any store delta-rs can write."""

    def __init__(self, table_uri: str, *, storage_options: Mapping[str, str] | None = None) -> None:
        self._files = MemberFiles(
            table_uri, OFFSETS_DIR, "commit object", storage_options=storage_options
        )
        self.uri = self._files.uri

    def put(self, obj: CommitObject) -> None:
        self._files.write(key_of(obj), obj.seq, encode(obj))

    def list(self) -> Mapping[str, int]:
        return self._files.newest()

    def _read(self, key: str, seq: int) -> CommitObject | None:
        data = self._files.read(key, seq)
        # None: replaced by a newer one since the listing; the next fold reads that
        return None if data is None else decode(data)

    def get(self, members: Mapping[str, int]) -> dict[str, CommitObject]:
        items = sorted(members.items())
        if len(items) <= 1:
            found = [self._read(m, s) for m, s in items]
        else:
            with ThreadPoolExecutor(min(READ_THREADS, len(items))) as pool:
                found = list(pool.map(lambda item: self._read(*item), items))
        return {key_of(o): o for o in found if o is not None}

    def drop(self, member_id: str) -> None:
        self._files.drop(member_id, object_key(member_id, LISTENER))


class InMemoryCommitObjects:
    """Commit objects in a dict, for the simulation and the property tests. ``now_ms`` (the
    clock) and ``latency_ms`` model a store on which a put becomes visible only ``latency_ms``
    after it was issued; the previous object stays visible until then (it is deleted after
    the put)."""

    def __init__(self, *, now_ms: Callable[[], int] | None = None, latency_ms: int = 0) -> None:
        # key -> [(visible at, object)], oldest first
        self._objects: dict[str, list[tuple[int, CommitObject]]] = {}
        self._now = now_ms
        self._latency_ms = latency_ms
        self.puts = 0
        self.lists = 0
        self.gets = 0

    def _time(self) -> int:
        return self._now() if self._now is not None else 0

    def put(self, obj: CommitObject) -> None:
        self.puts += 1
        now = self._time()
        versions = [v for v in self._objects.get(key_of(obj), []) if v[0] > now][-1:]
        visible = self._newest(key_of(obj))
        if visible is not None:
            versions.insert(0, (now, visible))
        self._objects[key_of(obj)] = [*versions, (now + self._latency_ms, obj)]

    def _newest(self, key: str) -> CommitObject | None:
        now = self._time()
        visible = [obj for at, obj in self._objects.get(key, []) if at <= now]
        return visible[-1] if visible else None

    def _visible(self) -> Iterable[CommitObject]:
        return (o for o in map(self._newest, list(self._objects)) if o is not None)

    def list(self) -> Mapping[str, int]:
        self.lists += 1
        return {key_of(o): o.seq for o in self._visible()}

    def get(self, members: Mapping[str, int]) -> dict[str, CommitObject]:
        self.gets += len(members)
        return {key_of(o): o for o in self._visible() if members.get(key_of(o)) == o.seq}

    def drop(self, member_id: str) -> None:
        for key in [k for k in self._objects if owner(k) == member_id]:
            del self._objects[key]
