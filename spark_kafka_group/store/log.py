"""The group log: one append-only Delta table per consumer group, written with delta-rs.

Every member of a group appends :class:`~spark_kafka_group.group.records.GroupRecord` envelopes
to the table at ``<groupStore>/<group id>`` and replays them through the protocol's pure state
machine. This module only persists envelopes, in order, and hands them back; it knows nothing of
the protocol.

Versions
--------
A *log version* is the Delta table version. Each successful :meth:`GroupLog.append` is one Delta
commit, and its records carry that version in the ``log_version`` column (with ``seq``, their
order inside the append). Maintenance (compaction) commits also take Delta versions but carry no
records (``dataChange=false``), so the versions of records have gaps. Reads never use the Delta
version of a *file* (compaction rewrites files); they filter on ``log_version``, which file
statistics make cheap to prune on. A log that has not been created yet has version ``-1``; it is
created by the first append (``expected_version=-1``), which writes version 0.

Compare-and-swap
----------------
``append(records, expected_version=N)`` must commit as version ``N+1`` or not at all: the writer
decided on what it folded up to ``N``. delta-rs by default *rebases* a blind append that lost the
race onto the newer version (its conflict checker finds no conflict between two appends) — that is
exactly what must not happen here, and ``tests/unit/test_store_log.py`` shows it happening. We
therefore:

1. pin the writer's snapshot at version ``N`` (``DeltaTable`` loaded at ``N``; a cached snapshot
   already past ``N`` means a conflict without touching storage);
2. commit with ``CommitProperties(max_commit_retries=0)``. delta-rs then (a) refuses at once if
   the log's latest version is already past the snapshot, without running the conflict checker,
   and (b) writes the commit file ``N+1`` with the log store's atomic put-if-absent (local: a
   rename that fails if the target exists; S3, S3-compatible stores, ADLS and GCS: a conditional
   put, ``If-None-Match: *`` or the store's create-only precondition), so of two writers that
   both passed (a), exactly one wins. The loser gets ``CommitFailedError``, which we turn into
   :class:`AppendConflict`.

The first append creates the table with ``mode="error"``: version 0 is put-if-absent too, so two
members racing to create the log cannot both win. The tests race several processes on one log.

On an object store that put-if-absent is the store's to honour: :mod:`.safety` refuses options
that switch it off and, before a handle's first write, a store that lets a stale commit through.

Cost
----
Each append writes one small Parquet file and one JSON commit. :meth:`GroupLog.maintain` keeps the
table cheap to open and read: it compacts small files (``optimize.compact``, ``dataChange=false``,
so records keep their ``log_version``), writes a checkpoint, deletes expired JSON commits
(``delta.logRetentionDuration``) and vacuums compacted-away files older than
``delta.deletedFileRetentionDuration``. Appends also write a checkpoint every
``delta.checkpointInterval`` versions, so a log whose members never maintain still opens fast.
Readers refresh their snapshot immediately before reading, so a file is only ever vacuumed long
(the retention) after the last snapshot that referenced it; a read that still hits a vanished
file is retried once on a fresh snapshot.

Modules
-------
:class:`GroupLog` is the facade; each concern has its module: :mod:`.paths` (the group-id rule,
where a group's log lives, listing a store), :mod:`.codec` (records <-> Arrow rows),
:mod:`.table` (what makes a Delta table a group log, opening it, the cached snapshot),
:mod:`.scan` (reads), :mod:`.append` (the compare-and-swap append) and :mod:`.maintenance`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.records import GroupRecord
from spark_kafka_group.store import append as _append
from spark_kafka_group.store import maintenance as _maintenance
from spark_kafka_group.store import scan as _scan
from spark_kafka_group.store.errors import AppendConflict
from spark_kafka_group.store.log_store import LogSlice, MaintenanceReport
from spark_kafka_group.store.table import LogTable

#: The facade and the types its methods take, return and raise.
__all__ = ["AppendConflict", "GroupLog", "LogSlice", "MaintenanceReport"]


class GroupLog:
    """One group's log. Thread-safe; one instance per process and group is enough."""

    def __init__(self, table: LogTable) -> None:
        self._log_table = table

    @classmethod
    def open(
        cls,
        uri: str,
        *,
        storage_options: Mapping[str, str] | None = None,
        create: bool = True,
        table_properties: Mapping[str, str] | None = None,
    ) -> GroupLog:
        """Open the group log at ``uri``; with ``create``, accept an absent or empty directory.

        The table itself is created by the first append. ``table_properties`` override
        :data:`~.table.DEFAULT_TABLE_PROPERTIES` for a log created through this handle (tests
        and benchmarks use short retentions); they are ignored for an existing log.

        Raises :class:`IncompatibleGroupStoreError` if ``uri`` holds anything else (never
        touching it) and :class:`GroupStoreError` if it cannot be read or written.
        """
        return cls(
            LogTable.open(
                uri,
                storage_options=storage_options,
                create=create,
                table_properties=table_properties,
            )
        )

    @property
    def uri(self) -> str:
        return self._log_table.uri

    def latest_version(self) -> int:
        """The log's latest version, ``-1`` if it has not been created yet."""
        return self._log_table.latest_version()

    def read(
        self,
        *,
        after_version: int = -1,
        from_latest_snapshot: bool = False,
        snapshot_kind: str = RecordKind.SNAPSHOT,
    ) -> list[tuple[int, GroupRecord]]:
        """Records of versions ``> after_version`` as ``(version, record)``, in log order.

        With ``from_latest_snapshot``, start at the latest record of kind ``snapshot_kind`` (if
        any). See :meth:`read_slice` to also learn which version the read saw.
        """
        return self.read_slice(
            after_version=after_version,
            from_latest_snapshot=from_latest_snapshot,
            snapshot_kind=snapshot_kind,
        ).records

    def read_slice(
        self,
        *,
        after_version: int = -1,
        from_latest_snapshot: bool = False,
        snapshot_kind: str = RecordKind.SNAPSHOT,
    ) -> LogSlice:
        """Like :meth:`read`, plus the version read: all records up to it were selected.

        Use ``slice.version`` (not the last record's version, as maintenance commits carry no
        records) as ``expected_version`` of the next append.
        """
        return _scan.read_slice(
            self._log_table,
            after_version=after_version,
            from_latest_snapshot=from_latest_snapshot,
            snapshot_kind=snapshot_kind,
        )

    def append(self, records: Sequence[GroupRecord], *, expected_version: int) -> int:
        """Commit ``records`` as version ``expected_version + 1``; return that version.

        Raises :class:`AppendConflict` if another writer got that version first (nothing of
        ``records`` is then in the log).
        """
        return _append.append(self._log_table, records, expected_version=expected_version)

    def file_count(self) -> int:
        """Number of live data files of the latest snapshot."""
        with self._log_table.lock:
            snapshot = self._log_table.refresh()
            return 0 if snapshot is None else len(snapshot.file_uris())

    def maintain(self, *, now_ms: int | None = None) -> MaintenanceReport:
        """Compact small files, vacuum old files, checkpoint, delete expired commits.

        Safe to run while others append or maintain: a step that loses a race is skipped and
        named in the report, never retried in a loop. It works on its own snapshot, so appends
        through this handle are not blocked meanwhile. Retention is judged by delta-rs against
        the wall clock; ``now_ms`` is the caller's clock, recorded in the report.
        """
        return _maintenance.maintain(self._log_table, now_ms=now_ms)

    def __repr__(self) -> str:
        return f"GroupLog({self.uri!r})"
