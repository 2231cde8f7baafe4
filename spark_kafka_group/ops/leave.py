"""Leaving a group on request: :func:`leave_group` after a query stopped, for its members.

A member leaves by itself when its query stops with every batch committed; one whose last
batch the stop cut stays for its restart (:mod:`spark_kafka_group.member.close`). This is the
operator's way to leave anyway: the commits the member and its progress listener recorded are
folded into the log first, then the LEAVE, in one transaction of the group log.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping

from pyspark.sql.streaming import StreamingQuery

from spark_kafka_group.errors import GroupStoreError
from spark_kafka_group.group import GroupCoordinator, GroupError, GroupRecord
from spark_kafka_group.group.offsets import fold_commit_objects
from spark_kafka_group.group.types import CommitObject
from spark_kafka_group.listener.progress import commit_progress, group_offsets
from spark_kafka_group.member.log_client import GroupLogClient
from spark_kafka_group.store.commit_objects import owner

log = logging.getLogger(__name__)


def leave_group(query: StreamingQuery, *, storage_options: Mapping[str, str] | None = None) -> None:
    """Commit the query's last completed batch and leave its group now (after stop or
    termination). Not needed: a query's member leaves by itself when the query ends and its
    batches are all committed. This LEAVE is written even when the query's last batch was
    interrupted by the stop (planned, perhaps written by the sink, never committed), which the
    member itself refuses to do: the partitions' new owners then read that batch again. Static
    members (``groupInstanceId``) commit but stay, as in Kafka."""
    progress = query.lastProgress
    commit_progress(progress, storage_options=storage_options)
    for offset in group_offsets(progress):
        if offset.member:
            leave_for_member(
                offset.store,
                offset.group,
                offset.member,
                storage_options=storage_options,
                reason="leave_group() after its query stopped",
            )


def leave_for_member(
    store: str,
    group_id: str,
    member_id: str,
    *,
    storage_options: Mapping[str, str] | None = None,
    client: GroupLogClient | None = None,
    reason: str = "leave_group() after query stop",
) -> bool:
    """Write LEAVE for a dynamic member (static members keep their partitions, as in Kafka);
    whether it left now (False: not a member any more, or static). ``client``: an open client
    of this group log to reuse."""
    if client is None:
        client = GroupLogClient(store, group_id, storage_options=storage_options, create=False)
    # The commits the member recorded but the group has not folded yet land first.
    recorded = _commit_objects_of(client, member_id)

    def decide(work: GroupCoordinator, now: int) -> tuple[list[GroupRecord], bool]:
        member = work.group.member(member_id)
        if member is None or member.instance_id is not None:
            return [], False
        commits, _ = fold_commit_objects(work.group, recorded, now)
        work.apply_all(commits)
        records, response = work.leave(member_id, now, reason=reason, seen=client.sightings())
        return commits + records, response.error is GroupError.NONE

    left = client.transact(decide)
    if left:
        log.info("Member %s left group %s", member_id, group_id)
        if client.leases is not None:
            with contextlib.suppress(GroupStoreError):  # a leftover lease is only a file
                client.leases.drop(member_id)
    # Gone (now, or before: it left by itself and the listener wrote an object since).
    if client.coordinator.group.member(member_id) is None and client.commit_objects is not None:
        with contextlib.suppress(GroupStoreError):  # never applied: its member is gone
            client.commit_objects.drop(member_id)
    return left


def _commit_objects_of(client: GroupLogClient, member_id: str) -> dict[str, CommitObject]:
    """The member's newest commit object and its progress listener's, if it has them (best
    effort: the store may be unavailable, and then the LEAVE goes without them)."""
    objects = client.commit_objects
    if objects is None:
        return {}
    try:
        newest = {k: s for k, s in objects.list().items() if owner(k) == member_id}
        return objects.get(newest) if newest else {}
    except GroupStoreError as exc:
        log.warning("group %s: commit object of %s not read: %s", client.group_id, member_id, exc)
        return {}
