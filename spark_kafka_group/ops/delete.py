"""``kafka-group delete``: remove a group (Kafka's DeleteGroups), its log and its side files.

Two steps. First a DELETE record through the protocol's handler
(:meth:`GroupCoordinator.delete_group`), written by compare-and-swap under the same rule as an
offset reset (:func:`~spark_kafka_group.ops.admin.expire_and_require_no_members`): a member that
joins meanwhile makes the append conflict, the group is folded again and the delete refused.
Then the group's directory goes: the Delta table, the member leases (``_members``) and the
write probes beside it. A group whose log already ends in DELETE (a removal that failed half
way) is removed without a second record.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass

from spark_kafka_group.errors import GroupStoreError, KafkaGroupError
from spark_kafka_group.group import GroupCoordinator, GroupError, GroupRecord, GroupState
from spark_kafka_group.member.log_client import GroupLogClient
from spark_kafka_group.ops.admin import (
    describe_existing_group,
    expire_and_require_no_members,
    expire_stopped_members,
)
from spark_kafka_group.store.errors import describe_error
from spark_kafka_group.store.paths import is_local_uri, local_path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeletedGroup:
    group_id: str
    uri: str
    #: Committed offsets the group had (they go with it).
    committed: int
    #: Members expired on the way (past their session timeout).
    expired: int


def delete_group(
    store: str, group_id: str, *, storage_options: Mapping[str, str] | None = None
) -> DeletedGroup:
    """Delete ``group_id``: refused while it has live members (:class:`GroupNotEmptyError`);
    a group without a log is an error naming the groups the store has."""
    description = describe_existing_group(store, group_id, storage_options=storage_options)
    client = GroupLogClient(store, group_id, storage_options=storage_options, create=False)
    expire_stopped_members(client)

    def decide(work: GroupCoordinator, now: int) -> tuple[list[GroupRecord], int]:
        if work.group.state is GroupState.DEAD:
            return [], 0  # deleted before; only the directory is left
        expired = expire_and_require_no_members(
            work, now, client.sightings(), group_id, "deleting it"
        )
        records, response = work.delete_group(now)
        if response.error is not GroupError.NONE:
            raise KafkaGroupError(
                f"Group {group_id!r} refused the delete: {response.error.name} (state "
                f"{work.group.state.value})"
            )
        return expired + records, len(expired)

    expired = client.transact(decide)
    remove_group_directory(client.uri, storage_options)
    log.info("Deleted group %s (%s)", group_id, client.uri)
    return DeletedGroup(group_id, client.uri, len(description.committed), expired)


def remove_group_directory(uri: str, storage_options: Mapping[str, str] | None) -> None:
    """Remove a group's directory and everything under it, on any store delta-rs reaches."""
    try:
        if is_local_uri(uri):
            path = local_path(uri)
            if os.path.exists(path):
                shutil.rmtree(path)
            return
        import pyarrow.fs as pafs
        from deltalake._internal import DeltaFileSystemHandler

        # An object store has no directories to remove: every object under the prefix goes
        # (delete_dir left them on S3), and what a listing still shows is reported, not hidden.
        parent, _, name = uri.rstrip("/").rpartition("/")
        fs = DeltaFileSystemHandler(parent, dict(storage_options or {}))

        def objects() -> list[str]:
            infos = fs.get_file_info_selector(name, True, True)
            return [i.path for i in infos if i.type != pafs.FileType.Directory]

        for path in objects():
            fs.delete_file(path)
        left = objects()
        if left:
            raise OSError(f"{len(left)} object(s) still there, e.g. {left[:3]}")
    except Exception as exc:
        raise GroupStoreError(
            f"The group log at {uri} ends in DELETE, but its directory could not be removed: "
            f"{describe_error(exc)}. Run kafka-group delete again, or remove the directory."
        ) from None
