"""The progress listener's write for a member: the commit of a completed batch, in the
listener's own commit object, never an append: a member's commits reach the log only through
the fold of its commit objects (by the group's folder) or its own step's direct writes
(:mod:`spark_kafka_group.listener.progress`; the simulation uses it too). What is accepted and
written is decided by the protocol's offsets rules (:mod:`spark_kafka_group.group.offsets`),
as for the member's own commits.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from spark_kafka_group.errors import GroupStoreError
from spark_kafka_group.group import TopicPartition
from spark_kafka_group.group.offsets import listener_commit
from spark_kafka_group.group.types import LISTENER, CommitObject
from spark_kafka_group.member.log_client import GroupLogClient
from spark_kafka_group.store.commit_objects import CommitObjectStore, object_key

log = logging.getLogger(__name__)


def _client(store: str, group_id: str, storage_options: Mapping[str, str] | None) -> GroupLogClient:
    return GroupLogClient(store, group_id, storage_options=storage_options, create=False)


def commit_batch_for_member(
    store: str,
    group_id: str,
    member_id: str,
    generation: int,
    offsets: Mapping[TopicPartition, int],
    *,
    batch_id: int,
    starts: Mapping[TopicPartition, int] | None = None,
    storage_options: Mapping[str, str] | None = None,
    client: GroupLogClient | None = None,
) -> int:
    """The progress listener's commit of batch ``batch_id`` on behalf of ``member_id``; how
    many offsets it moves (:func:`~spark_kafka_group.group.offsets.listener_commit`).

    No append: the offsets go into the listener's own commit object for the member, a blind
    put that the group's folder brings into the log with the members' objects, and that the
    member itself reads when it needs the offset in the log now (to release a revoked
    partition, before its LEAVE). A partition the batch started below the committed offset (a
    reset by policy) is marked as a rewind in the object, which the fold writes although it
    otherwise only moves forward; a batch continuing such a rewind that is not folded yet
    carries the mark on. The new object replaces the listener's previous one (as this client
    wrote it; read from the store once, by a client that has not written it). Reading
    the log to decide is a fold of its tail, never a compare-and-swap. ``client`` (an open
    client of this group log to reuse) must have commit objects: a group log opened from its
    store always has them.
    """
    if client is None:
        client = _client(store, group_id, storage_options)
    objects = client.commit_objects
    if objects is None:
        raise ValueError(
            f"group {group_id}: the progress listener's commit of {member_id} (batch "
            f"{batch_id}) needs the group's commit objects, and this client of the log has none "
            "(a log given without commit_objects): give the client the commit objects its "
            "members use"
        )
    group = client.fold().group
    previous = client.listener_objects.get(member_id)
    if previous is None and group.member(member_id) is not None:
        previous = _listener_object_of(client, objects, member_id)
    commit = listener_commit(
        group, member_id, generation, offsets, batch_id=batch_id, starts=starts, previous=previous
    )
    if commit is None:
        return 0
    objects.put(commit.obj)
    client.listener_objects[member_id] = commit.obj
    return commit.moved


def _listener_object_of(
    client: GroupLogClient, objects: CommitObjectStore, member_id: str
) -> CommitObject | None:
    """The listener's newest object for ``member_id`` (None if it has none, or the store
    cannot be read: a continued rewind then waits for the member's own commit)."""
    key = object_key(member_id, LISTENER)
    try:
        seq = objects.list().get(key)
        return None if seq is None else objects.get({key: seq}).get(key)
    except GroupStoreError as exc:
        log.warning("group %s: the listener's object of %s not read: %s", client.group_id,
                    member_id, exc)  # fmt: skip
        return None
