"""Reading a group log: the records after a version, or from the latest snapshot record.

A read refreshes the snapshot under the table's lock, picks the live data files whose
statistics say they may hold wanted rows (:class:`FileIndex`) and scans them outside the lock.
A file that vanished meanwhile (vacuumed after a long pause) makes the read retry once on a
fresh snapshot.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
from deltalake.exceptions import DeltaError

from spark_kafka_group.errors import GroupStoreError
from spark_kafka_group.store.codec import SCHEMA, from_arrow
from spark_kafka_group.store.errors import describe_error
from spark_kafka_group.store.files import TableFiles
from spark_kafka_group.store.log_store import LogSlice
from spark_kafka_group.store.table import LogTable


def read_slice(
    table: LogTable, *, after_version: int, from_latest_snapshot: bool, snapshot_kind: str
) -> LogSlice:
    """See :meth:`GroupLog.read_slice`."""
    for attempt in range(2):
        with table.lock:
            snapshot = table.refresh()
            if snapshot is None:
                return LogSlice(-1, [])
            version = snapshot.version()
            if after_version >= version:
                return LogSlice(version, [])
            try:
                files = FileIndex(snapshot.get_add_actions(flatten=True))
                opener = TableFiles(snapshot, table.storage_options)
            except (DeltaError, OSError) as exc:
                raise GroupStoreError(
                    f"cannot read the group log at {table.uri}: {describe_error(exc)}"
                ) from None
        try:
            rows = scan(files, opener, after_version, from_latest_snapshot, snapshot_kind)
        except (FileNotFoundError, DeltaError, OSError) as exc:
            if attempt == 0:
                # A file vanished under us (vacuum after a long pause): fresh snapshot.
                with table.lock:
                    table.snapshot = None
                continue
            raise GroupStoreError(
                f"cannot read the group log at {table.uri}: {describe_error(exc)}"
            ) from None
        return LogSlice(version, from_arrow(table.uri, rows))
    raise AssertionError("unreachable")  # pragma: no cover


class FileIndex:
    """The live data files of a snapshot with the statistics reads prune on.

    Pruning is done here from the add actions (cheap) rather than by delta-rs'
    ``to_pyarrow_dataset`` (which builds an expression over every column for every file).
    A file without statistics is never pruned.
    """

    def __init__(self, actions: pa.Table) -> None:
        names = set(actions.column_names)

        def col(name: str) -> list[Any]:
            return actions[name].to_pylist() if name in names else [None] * actions.num_rows

        self.paths: list[str] = [unquote(p) for p in actions["path"].to_pylist()]
        self.max_version: list[int | None] = col("max.log_version")
        self.min_kind: list[str | None] = col("min.kind")
        self.max_kind: list[str | None] = col("max.kind")

    def select(self, after: int, kind: str | None = None) -> list[str]:
        out = []
        for path, top, lo, hi in zip(
            self.paths, self.max_version, self.min_kind, self.max_kind, strict=True
        ):
            if top is not None and top <= after:
                continue
            if kind is not None and lo is not None and hi is not None and not lo <= kind <= hi:
                continue
            out.append(path)
        return out


def scan(
    files: FileIndex, opener: TableFiles, after: int, from_snapshot: bool, snapshot_kind: str
) -> pa.Table:
    """Rows of versions ``> after``; with ``from_snapshot``, from the latest row of kind
    ``snapshot_kind`` on (if there is one)."""
    lv = pc.field("log_version")
    flt = lv > after
    if from_snapshot:
        candidates = files.select(after, snapshot_kind)
        if candidates:
            marks = opener.dataset(candidates, SCHEMA).to_table(
                columns=["log_version", "seq"], filter=flt & (pc.field("kind") == snapshot_kind)
            )
            if marks.num_rows:
                last = marks.sort_by([("log_version", "descending"), ("seq", "descending")])
                sv, ss = last["log_version"][0].as_py(), last["seq"][0].as_py()
                after = sv - 1
                flt = (lv > sv) | ((lv == sv) & (pc.field("seq") >= ss))
    paths = files.select(after)
    if not paths:
        return SCHEMA.empty_table()
    return opener.dataset(paths, SCHEMA).to_table(filter=flt)
