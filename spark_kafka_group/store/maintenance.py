"""Keeping a group log cheap to open and read while members append to it.

:func:`maintain` compacts small files (``optimize.compact``, ``dataChange=false``, so records
keep their ``log_version``), vacuums files compacted away longer ago than
``delta.deletedFileRetentionDuration`` (and data files of appends that lost the race), writes a
checkpoint and deletes JSON commits older than ``delta.logRetentionDuration``. Each step that
loses a race with another writer is skipped and named in the report, never retried in a loop.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from deltalake import CommitProperties, DeltaTable, PostCommitHookProperties, WriterProperties
from deltalake.exceptions import DeltaError

from spark_kafka_group.store.log_store import MaintenanceReport
from spark_kafka_group.store.table import LogTable
from spark_kafka_group.store.table_properties import file_retention_ms, retention_to_apply

log = logging.getLogger(__name__)

#: maintain() compacts when the table has at least this many files smaller than the target.
COMPACT_MIN_SMALL_FILES = 16
#: Target size of compacted files. Files at least this big are never rewritten again.
COMPACT_TARGET_SIZE = 8 * 1024 * 1024
#: Rows per Parquet row group in compacted files.
COMPACT_ROW_GROUP_ROWS = 8192
#: How far this machine's clock may lead the store's before vacuum allows for it (an S3
#: modification time has whole seconds).
CLOCK_LEAD_TOLERANCE_S = 2.0


def maintain(table: LogTable, *, now_ms: int | None = None) -> MaintenanceReport:
    """Compact small files, vacuum old files, checkpoint, delete expired commits.

    Safe to run while others append or maintain: a step that loses a race is skipped and
    named in the report, never retried in a loop. It works on its own snapshot, so appends
    through this handle are not blocked meanwhile. Retention is judged by delta-rs against
    the wall clock; ``now_ms`` is the caller's clock, recorded in the report.
    """
    started = time.perf_counter()
    now = int(time.time() * 1000) if now_ms is None else int(now_ms)
    if table.latest_version() < 0:
        return MaintenanceReport(-1, -1, 0, 0, now_ms=now)
    snapshot = table.load()
    report = MaintenanceReport(
        version_before=snapshot.version(),
        version_after=snapshot.version(),
        files_before=len(snapshot.file_uris()),
        files_after=0,
        now_ms=now,
    )
    snapshot = _retention(table, snapshot, report)
    snapshot = _compact(table, snapshot, report)
    snapshot = _vacuum(table, snapshot, report, now_s=now / 1000)
    snapshot = _checkpoint(table, snapshot, report)
    snapshot = _step(table, report, "log cleanup", snapshot, snapshot.cleanup_metadata)
    report.log_cleanup = "log cleanup" not in report.skipped
    snapshot.update_incremental()
    report.version_after = snapshot.version()
    report.files_after = len(snapshot.file_uris())
    report.duration_ms = (time.perf_counter() - started) * 1000
    return report


#: Checkpoints and log cleanup are steps of their own, never side effects of another commit.
_NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


def _commit_properties(step: str) -> CommitProperties:
    """A maintenance commit: delta-rs may retry it over newer appends (it changes no data)."""
    return CommitProperties(
        max_commit_retries=10, custom_metadata={"spark_kafka_group.maintenance": step}
    )


def _step(
    table: LogTable, report: MaintenanceReport, name: str, snapshot: DeltaTable, fn: Any
) -> DeltaTable:
    """Run one maintenance step; on failure note it and return a fresh snapshot."""
    try:
        fn()
        snapshot.update_incremental()
        return snapshot
    except (DeltaError, OSError) as exc:
        report.skipped.append(name)
        log.info("group log %s: maintenance step %s skipped: %s", table.uri, name, exc)
        return table.load()


def _retention(table: LogTable, snapshot: DeltaTable, report: MaintenanceReport) -> DeltaTable:
    """Give an existing log the retention its maintainer was opened with (groupLogRetention):
    table properties are otherwise only set when a log is created."""
    changes = retention_to_apply(snapshot.metadata().configuration, table.table_properties)
    if not changes:
        return snapshot

    def set_retention() -> None:
        snapshot.alter.set_table_properties(
            changes,
            commit_properties=_commit_properties("retention"),
            post_commithook_properties=_NO_HOOKS,
        )

    snapshot = _step(table, report, "retention", snapshot, set_retention)
    if "retention" not in report.skipped:
        report.retention = changes
    return snapshot


def _compact(table: LogTable, snapshot: DeltaTable, report: MaintenanceReport) -> DeltaTable:
    sizes = snapshot.get_add_actions(flatten=True)["size_bytes"].to_pylist()
    if sum(1 for s in sizes if s < COMPACT_TARGET_SIZE) < COMPACT_MIN_SMALL_FILES:
        return snapshot
    metrics: dict[str, Any] = {}

    def compact() -> None:
        metrics.update(
            snapshot.optimize.compact(
                target_size=COMPACT_TARGET_SIZE,
                max_concurrent_tasks=2,
                # small row groups: reads after a version or from the latest snapshot
                # skip the older row groups of a big compacted file by their statistics
                writer_properties=WriterProperties(
                    max_row_group_size=COMPACT_ROW_GROUP_ROWS, compression="SNAPPY"
                ),
                commit_properties=_commit_properties("compact"),
                post_commithook_properties=_NO_HOOKS,
            )
        )

    snapshot = _step(table, report, "compaction", snapshot, compact)
    report.files_compacted = int(metrics.get("numFilesRemoved", 0))
    report.files_written = int(metrics.get("numFilesAdded", 0))
    return snapshot


def _vacuum(
    table: LogTable, snapshot: DeltaTable, report: MaintenanceReport, *, now_s: float
) -> DeltaTable:
    removed: list[str] = []
    retention_hours = vacuum_retention_hours(table, snapshot, now_s=now_s)

    def vacuum() -> None:
        # full: also deletes data files of appends that lost the CAS race (never
        # committed) and files whose tombstones a checkpoint already dropped; both only
        # once older than delta.deletedFileRetentionDuration.
        removed.extend(
            snapshot.vacuum(
                retention_hours=retention_hours,
                dry_run=False,
                full=True,
                commit_properties=_commit_properties("vacuum"),
                post_commithook_properties=_NO_HOOKS,
            )
        )

    snapshot = _step(table, report, "vacuum", snapshot, vacuum)
    report.files_vacuumed = len(removed)
    return snapshot


def vacuum_retention_hours(table: LogTable, snapshot: DeltaTable, *, now_s: float) -> int | None:
    """The retention to vacuum with when this machine's clock leads the store's, else ``None``
    (the table's own).

    delta-rs judges a file's age on this machine's clock against the modification time the
    store gave it. A clock ahead by the retention or more makes a data file written a moment
    ago look old: a full vacuum would delete another member's append between its data file
    and its commit, and the log would then reference a missing file. So the retention is
    stretched by the lead (in whole hours, delta-rs's unit: rounded up)."""
    lead_s = now_s - table.store_now()
    if lead_s <= CLOCK_LEAD_TOLERANCE_S:
        return None
    retention_s = file_retention_ms(snapshot.metadata().configuration) / 1000
    hours = math.ceil((retention_s + lead_s) / 3600)
    log.warning(
        "group log %s: this machine's clock is %.0f s ahead of the store's; vacuuming only "
        "files older than %d h by it (synchronise the clock, e.g. with NTP)",
        table.uri, lead_s, hours,
    )  # fmt: skip
    return hours


def _checkpoint(table: LogTable, snapshot: DeltaTable, report: MaintenanceReport) -> DeltaTable:
    version = snapshot.version()
    if version <= table.last_checkpoint:
        return snapshot
    snapshot = _step(table, report, "checkpoint", snapshot, snapshot.create_checkpoint)
    if "checkpoint" not in report.skipped:
        table.last_checkpoint = max(table.last_checkpoint, version)
        report.checkpoint_version = version
    return snapshot
