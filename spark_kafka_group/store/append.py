"""Appending to a group log with compare-and-swap on the log version (see :mod:`.log`).

``append(records, expected_version=N)`` commits version ``N+1`` or nothing: the writer's
snapshot is pinned at ``N`` and delta-rs commits without retries, so a writer that lost the race
gets :class:`AppendConflict` instead of a retry on top of the newer version. The first append
creates the table (``mode="error"``, version 0 put-if-absent too).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, PostCommitHookProperties, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError

from spark_kafka_group.errors import GroupStoreError
from spark_kafka_group.group.records import GroupRecord
from spark_kafka_group.store.codec import to_arrow
from spark_kafka_group.store.errors import AppendConflict, describe_error
from spark_kafka_group.store.paths import is_local_uri
from spark_kafka_group.store.table import LOG_TABLE_DESCRIPTION, LOG_TABLE_NAME, LogTable

log = logging.getLogger(__name__)


def append(table: LogTable, records: Sequence[GroupRecord], *, expected_version: int) -> int:
    """See :meth:`GroupLog.append`."""
    if not records:
        raise ValueError("append() needs at least one record")
    if expected_version < -1:
        raise ValueError(f"expected_version must be >= -1, not {expected_version}")
    table.check_commits_are_atomic()
    new_version = expected_version + 1
    data = to_arrow(records, new_version)
    commit = CommitProperties(
        max_commit_retries=0,
        custom_metadata={"spark_kafka_group.records": len(records)},
    )
    with table.lock:
        if expected_version == -1:
            return _create(table, data, commit)
        snapshot = _snapshot_at(table, expected_version)
        try:
            write_deltalake(
                snapshot,
                data,
                mode="append",
                commit_properties=commit,
                post_commithook_properties=PostCommitHookProperties(
                    create_checkpoint=False, cleanup_expired_logs=False
                ),
            )
        except CommitFailedError as exc:
            raise _conflict(table, expected_version, exc) from exc
        except (DeltaError, OSError) as exc:
            table.snapshot = None
            raise GroupStoreError(
                f"cannot append to the group log at {table.uri}: {describe_error(exc)}"
            ) from None
        if snapshot.version() != new_version:  # pragma: no cover - delta-rs contract
            table.snapshot = None
            raise GroupStoreError(
                f"group log {table.uri}: append committed as version {snapshot.version()}, "
                f"expected {new_version}"
            )
        _maybe_checkpoint(table, snapshot)
        return new_version


def _snapshot_at(table: LogTable, version: int) -> DeltaTable:
    """The cached snapshot if it is at ``version``; a conflict if the log is past it."""
    snapshot = table.snapshot
    if snapshot is not None and snapshot.version() == version:
        return snapshot
    if snapshot is not None and snapshot.version() > version:
        raise AppendConflict(table.uri, version, snapshot.version())
    snapshot = table.refresh()
    latest = -1 if snapshot is None else snapshot.version()
    if snapshot is None or latest < version:
        raise GroupStoreError(
            f"group log {table.uri}: append expected version {version} but the log is only "
            f"at version {latest}; pass the version last read from this log"
        )
    if latest > version:
        raise AppendConflict(table.uri, version, latest)
    return snapshot


def _conflict(table: LogTable, expected_version: int, exc: BaseException) -> GroupStoreError:
    """A lost race (:class:`AppendConflict`), or a failure if the log did not move."""
    table.snapshot = None
    try:
        latest = table.refresh()
    except GroupStoreError:
        latest = None
    latest_version = None if latest is None else latest.version()
    if latest_version is not None and latest_version <= expected_version:
        return GroupStoreError(
            f"cannot append to the group log at {table.uri}: {describe_error(exc)}"
        )
    return AppendConflict(table.uri, expected_version, latest_version)


def _create(table: LogTable, data: pa.Table, commit: CommitProperties) -> int:
    if table.snapshot is not None or table.inspect() == "table":
        raise _conflict(table, -1, RuntimeError("the log already exists"))
    if is_local_uri(table.uri):
        table.check_writable()
    try:
        write_deltalake(
            table.uri,
            data,
            mode="error",
            name=LOG_TABLE_NAME,
            description=LOG_TABLE_DESCRIPTION,
            configuration=table.table_properties,
            storage_options=table.storage_options,
            commit_properties=commit,
        )
    except (DeltaError, OSError) as exc:
        if table.inspect() == "table":
            raise _conflict(table, -1, exc) from exc
        raise GroupStoreError(
            f"cannot create the group log at {table.uri}: {describe_error(exc)}; check the "
            "path, its permissions and the groupStore.* storage options"
        ) from None
    # mode="error" and the put-if-absent commit of version 0: ours is version 0 (others may
    # have appended since; the cached snapshot is simply the latest).
    table.snapshot = table.load()
    return 0


def _maybe_checkpoint(table: LogTable, snapshot: DeltaTable) -> None:
    """Checkpoint every ``delta.checkpointInterval`` versions, so a log whose members never
    maintain it still opens fast."""
    interval = int(snapshot.metadata().configuration.get("delta.checkpointInterval", "100"))
    version = snapshot.version()
    if interval > 0 and version > 0 and version % interval == 0:
        try:
            snapshot.create_checkpoint()
            table.last_checkpoint = version
        except (DeltaError, OSError) as exc:  # the append itself has landed
            log.warning("group log %s: checkpoint at %d failed: %s", table.uri, version, exc)
