"""Operator commands on a group from outside it: describe, reset offsets, and the rule of
every command that needs a group without live members. Used by the CLI and the Python API
(``spark_kafka_group.describe_group`` ...). Every change goes through the protocol's handlers,
like a member's. (The progress listener's writes in a member's name are
:mod:`spark_kafka_group.listener.writes`.)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from spark_kafka_group.errors import GroupNotEmptyError, GroupStoreError
from spark_kafka_group.group import (
    GroupCoordinator,
    GroupDescription,
    GroupError,
    GroupMetadata,
    GroupRecord,
    GroupState,
    SystemClock,
    TopicPartition,
)
from spark_kafka_group.group.clocks import Sightings, SingleClock, silent_past_session
from spark_kafka_group.group.offsets import fold_commit_objects, reset
from spark_kafka_group.group.timer import Clock
from spark_kafka_group.group.types import CommitObject
from spark_kafka_group.member.log_client import GroupLogClient
from spark_kafka_group.store import GroupLogNotFoundError, group_log_uri, list_groups

log = logging.getLogger(__name__)


def expire_and_require_no_members(
    work: GroupCoordinator, now_ms: int, seen: Sightings, group_id: str, doing: str
) -> list[GroupRecord]:
    """The rule of every operation that needs a group without live members (as Kafka's offset
    reset and group deletion do): members this process saw silent past their session timeout
    (``seen``, its own sightings; see :func:`expire_stopped_members`) are expired first, any
    other member refuses the operation. ``now_ms`` is this writer's wall clock, stamped on the
    records. Applies the EXPIRE records to ``work`` and returns
    them (the caller writes them with its own records)."""
    records = work.tick(now_ms, seen)
    work.apply_all(records)
    if work.group.members:
        live = ", ".join(
            f"{m.member_id}" + (f" (instance {m.instance_id})" if m.instance_id else "")
            for m in work.group.members.values()
        )
        raise GroupNotEmptyError(
            f"Group {group_id!r} has live members ({live}): stop their queries (a stopped "
            "query's member leaves; a static member expires after its session timeout) "
            f"before {doing}."
        )
    return records


def _client(
    store: str,
    group_id: str,
    storage_options: Mapping[str, str] | None,
    *,
    create: bool,
    clock: Clock | None = None,
) -> GroupLogClient:
    return GroupLogClient(
        store, group_id, storage_options=storage_options, create=create, clock=clock
    )


def describe_group(
    store: str,
    group_id: str,
    *,
    storage_options: Mapping[str, str] | None = None,
    now_ms: int | None = None,
) -> GroupDescription:
    """The group as its log says at ``now_ms`` (default: now; read only). A group without a
    log is described as ``Dead`` with ``version`` -1, as Kafka describes an unknown group.
    Committed offsets include the members' commits recorded in their commit objects and not
    folded into the log yet (those the fold would apply: of live owners, never moving back)."""
    now = SystemClock().now_ms() if now_ms is None else int(now_ms)
    uri = group_log_uri(store, group_id)
    try:
        client = _client(store, group_id, storage_options, create=False)
    except GroupLogNotFoundError:
        dead = GroupCoordinator(group_id, group=GroupMetadata(group_id, state=GroupState.DEAD))
        return dead.describe(now, uri=uri, version=-1)
    group = client.fold().fork()
    folded, _ = fold_commit_objects(group.group, _all_commit_objects(client), now)
    group.apply_all(folded)  # to the fork only
    # Shown only: liveness on the writers' timestamps (a one-shot process has watched nobody).
    return group.describe(now, leases=client.read_leases(), uri=uri, version=client.version)


def _all_commit_objects(client: GroupLogClient) -> dict[str, CommitObject]:
    """Every member's newest commit object (none if the store cannot list them: the log's
    own commits are still described)."""
    objects = client.commit_objects
    if objects is None:
        return {}
    try:
        return objects.get(objects.list())
    except GroupStoreError as exc:
        log.warning("group %s: commit objects not read: %s", client.group_id, exc)
        return {}


def describe_existing_group(
    store: str,
    group_id: str,
    *,
    storage_options: Mapping[str, str] | None = None,
    now_ms: int | None = None,
) -> GroupDescription:
    """:func:`describe_group`, but a group without a log is an error that says so."""
    description = describe_group(store, group_id, storage_options=storage_options, now_ms=now_ms)
    if description.version < 0:
        try:
            known = list_groups(store, storage_options=storage_options)
        except GroupStoreError:
            known = []
        shown = ", ".join(known[:20]) + (" ..." if len(known) > 20 else "")
        raise GroupLogNotFoundError(
            f"There is no group log for group {group_id!r} at {description.uri}. Groups in "
            f"store {store!r}: {shown or 'none'}. Check --store and --group (the query's "
            "groupStore and groupId options)."
        )
    return description


def describe_groups(
    store: str, *, storage_options: Mapping[str, str] | None = None
) -> list[GroupDescription]:
    """Every group with a log under ``store`` (as ``kafka-consumer-groups --list --state``).
    Raises :class:`GroupStoreError` if the store cannot be listed."""
    return [
        describe_group(store, group_id, storage_options=storage_options)
        for group_id in list_groups(store, storage_options=storage_options)
    ]


def reset_offsets(
    store: str,
    group_id: str,
    offsets: Mapping[TopicPartition, int],
    *,
    execute: bool = False,
    storage_options: Mapping[str, str] | None = None,
    clock: Clock | None = None,
) -> dict[TopicPartition, tuple[int | None, int]]:
    """Set committed offsets; the plan ``{tp: (current, new)}``. Changes nothing unless
    ``execute``. Refused while the group has live members (expired ones are removed first).
    ``clock``: this process's (default: the system's), on which stopped members are watched."""
    try:
        client = _client(store, group_id, storage_options, create=execute, clock=clock)
    except GroupLogNotFoundError:  # a plan for a group without a log: nothing is committed
        return {tp: (None, int(o)) for tp, o in sorted(offsets.items())}

    if execute:
        expire_stopped_members(client)

    def decide(
        work: GroupCoordinator, now: int
    ) -> tuple[list[GroupRecord], dict[TopicPartition, tuple[int | None, int]]]:
        # Members this process watched stay silent past their session timeout are not live.
        records = expire_and_require_no_members(
            work, now, client.sightings(), group_id, "resetting offsets"
        )
        group = work.group
        plan = {
            tp: (group.offsets[tp].offset if tp in group.offsets else None, int(new))
            for tp, new in sorted(offsets.items())
        }
        if not execute:
            return [], plan
        commits, response = reset(work.group, offsets, now)
        if response.error is not GroupError.NONE or not response.accepted >= set(offsets):
            raise GroupNotEmptyError(
                f"Group {group_id!r} refused the offset reset: {response.partition_errors}"
            )
        return records + commits, plan

    if not execute and client.table.latest_version() < 0:
        return {tp: (None, int(o)) for tp, o in sorted(offsets.items())}
    return client.transact(decide)


#: How often :func:`expire_stopped_members` looks at the log and the leases.
WATCH_POLL_S = 1.0


def expire_stopped_members(client: GroupLogClient) -> None:
    """Expire the group's members if every one of them has stopped.

    Whether a member stopped is decided only on this process's clock: nothing of it (record,
    lease renewal) seen to change for its session timeout. So when every member *looks*
    stopped by the timestamps its machine wrote (a hint: that machine's clock may be off),
    this watches them for the longest session timeout, expiring each one found silent; a
    member seen to change is live, and the reset is then refused. When any member looks live
    by its timestamps, nothing is watched: the reset is refused at once."""
    client.fold()
    hint = SingleClock(client.clock.now_ms(), client.read_leases() or {})
    members = list(client.coordinator.group.members.values())
    if not members or not all(silent_past_session(m, hint) for m in members):
        return
    watch_ms = max(m.profile.session_timeout_ms for m in members) + int(2 * WATCH_POLL_S * 1000)
    log.info(
        "group %s: its members look stopped; watching them for %.0f s before expiring them",
        client.group_id, watch_ms / 1000,
    )  # fmt: skip
    end = client.clock.monotonic_ms() + watch_ms

    def expire(work: GroupCoordinator, now: int) -> tuple[list[GroupRecord], None]:
        return work.tick(now, client.sightings()), None

    while client.coordinator.group.members and client.clock.monotonic_ms() < end:
        client.clock.sleep(WATCH_POLL_S)
        client.read_leases()
        client.transact(expire)
