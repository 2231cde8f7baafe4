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
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import (
    CommitProperties,
    DeltaTable,
    PostCommitHookProperties,
    WriterProperties,
    write_deltalake,
)
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from spark_kafka_group.errors import GroupStoreError, IncompatibleGroupStoreError, OptionError
from spark_kafka_group.group.records import RECORD_SCHEMA_VERSION, GroupRecord
from spark_kafka_group.store.files import TableFiles, is_local_uri, local_path
from spark_kafka_group.store.leases import LEASE_DIR
from spark_kafka_group.store.safety import (
    PROBE_PREFIX,
    check_storage_options,
    probe_put_if_absent,
)

log = logging.getLogger(__name__)

#: Version of the table layout (columns, marker, meaning of ``log_version``). Bump on change.
LOG_FORMAT_VERSION = 1

#: Delta ``name`` of every group log: the marker that says "this table is a group log".
#: (delta-rs refuses unknown ``configuration`` keys at table creation, so the marker lives in
#: the table's name and description, which every Delta reader shows.)
LOG_TABLE_NAME = "spark-kafka-group group log"
_DESCRIPTION_RE = re.compile(r"\bformat=(\d+)\b")

#: Environment variable naming the default group store.
GROUP_STORE_ENV = "SPARK_KAFKA_GROUP_STORE"

#: Table properties of a new group log (see the module docstring for why these values).
DEFAULT_TABLE_PROPERTIES: Mapping[str, str] = {
    "delta.appendOnly": "true",
    # Opening reads the last checkpoint plus at most this many JSON commits.
    "delta.checkpointInterval": "50",
    # JSON commits older than this (and older than the last checkpoint) are deleted by
    # maintain(). Records stay in the data files for ever; only Delta time travel is cut.
    "delta.logRetentionDuration": "interval 1 hours",
    # Files compacted away are deleted this long after compaction: far longer than any
    # read, plus clock skew between members.
    "delta.deletedFileRetentionDuration": "interval 1 hours",
    "delta.enableExpiredLogCleanup": "false",  # maintain() does it, not every append
}

#: maintain() compacts when the table has at least this many files smaller than the target.
COMPACT_MIN_SMALL_FILES = 16
#: Target size of compacted files. Files at least this big are never rewritten again.
COMPACT_TARGET_SIZE = 8 * 1024 * 1024
#: Rows per Parquet row group in compacted files.
COMPACT_ROW_GROUP_ROWS = 8192

_COMMIT_FILE_RE = re.compile(r"^\d{20}\.(json|checkpoint\..*parquet)$")
_DATA_FILE_RE = re.compile(r"^part-[0-9]+-[0-9a-f-]+-c000(\.[a-z0-9]+)?\.parquet$")
#: A directory holding only data files this young and no commit is a log being created.
_CREATION_GRACE_S = 120.0
_GROUP_ID_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,254}$")

SCHEMA = pa.schema(
    [
        pa.field("log_version", pa.int64(), nullable=False),
        pa.field("seq", pa.int32(), nullable=False),
        pa.field("schema_version", pa.int32(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("timestamp_ms", pa.int64(), nullable=False),
        pa.field("member_id", pa.string()),
        pa.field("instance_id", pa.string()),
        pa.field("generation", pa.int64()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("payload", pa.string(), nullable=False),
    ]
)
_REQUIRED_COLUMNS = frozenset(SCHEMA.names)


class InvalidGroupIdError(GroupStoreError, OptionError):
    """A group id that cannot name a directory under the group store."""


class GroupLogNotFoundError(GroupStoreError):
    """There is no group log at the path (and the caller asked not to create one)."""


class AppendConflict(GroupStoreError):
    """Another member committed version ``expected_version + 1`` first.

    Read what was written after ``expected_version``, fold it, decide again and retry.
    """

    def __init__(self, uri: str, expected_version: int, latest_version: int | None) -> None:
        self.uri = uri
        self.expected_version = expected_version
        self.latest_version = latest_version
        seen = "" if latest_version is None else f" (log is now at version {latest_version})"
        super().__init__(
            f"group log {uri}: version {expected_version + 1} was written by another member "
            f"first{seen}; read the records after version {expected_version}, fold them and "
            "retry the append"
        )


@dataclass(frozen=True)
class LogSlice:
    """What one read saw: every record of versions ``<= version`` that the read selected."""

    version: int
    records: list[tuple[int, GroupRecord]]


@dataclass
class MaintenanceReport:
    """What :meth:`GroupLog.maintain` did. ``skipped`` names steps that lost a race or failed."""

    version_before: int
    version_after: int
    files_before: int
    files_after: int
    files_compacted: int = 0
    files_written: int = 0
    checkpoint_version: int | None = None
    log_cleanup: bool = False
    files_vacuumed: int = 0
    skipped: list[str] = field(default_factory=list)
    duration_ms: float = 0.0
    now_ms: int = 0


# -- paths -------------------------------------------------------------------------------------


def default_group_store() -> str:
    """Where group logs live when the ``groupStore`` option is not given.

    ``$SPARK_KAFKA_GROUP_STORE`` if set, else ``~/.spark-kafka-group/groups``. The local default
    only works for members on one machine; members on several machines need shared storage
    (``s3://…``, ``abfss://…``, ``gs://…`` or a shared file system).
    """
    env = os.environ.get(GROUP_STORE_ENV, "").strip()
    if env:
        return env
    return os.path.join(os.path.expanduser("~"), ".spark-kafka-group", "groups")


def validate_group_id(group_id: str) -> str:
    """Return ``group_id`` if it can name a directory, else raise :class:`InvalidGroupIdError`."""
    if not isinstance(group_id, str) or not _GROUP_ID_RE.match(group_id) or group_id in {".", ".."}:
        raise InvalidGroupIdError(
            f"groupId {group_id!r} cannot be used: the group log lives in a directory named after "
            "the group id, so it must be 1-255 characters of letters, digits, '.', '_' and '-' "
            "(not starting with '.' or '-'); choose another groupId"
        )
    return group_id


def group_log_uri(store: str, group_id: str) -> str:
    """``"<store>/<group_id>"``: where the log of ``group_id`` lives under ``store``."""
    validate_group_id(group_id)
    if not store or not str(store).strip():
        raise GroupStoreError("groupStore is empty; give a directory or an object-store URI")
    store = str(store)
    if is_local_uri(store):
        store = os.path.expanduser(store)
    return store.rstrip("/") + "/" + group_id


def _list_dir(uri: str, storage_options: Mapping[str, str] | None) -> dict[str, float] | None:
    """Entries directly under ``uri`` with their modification time (epoch seconds, 0 if
    unknown); ``None`` if ``uri`` does not exist."""
    if is_local_uri(uri):
        path = local_path(uri)
        if not os.path.exists(path):
            return None
        if not os.path.isdir(path):
            return {os.path.basename(path): os.path.getmtime(path)}
        out = {}
        with os.scandir(path) as it:
            for entry in it:
                with contextlib.suppress(OSError):  # vanished meanwhile
                    out[entry.name] = entry.stat().st_mtime
        return out
    import pyarrow.fs as pafs
    from deltalake.fs import DeltaStorageHandler

    try:
        fs = pafs.PyFileSystem(DeltaStorageHandler(uri, dict(storage_options or {})))
        infos = fs.get_file_info(pafs.FileSelector("", allow_not_found=True))
    except (TableNotFoundError, FileNotFoundError):
        return None
    except Exception as exc:
        raise GroupStoreError(f"cannot list {uri}: {_describe(exc)}") from None
    return {
        i.path.rstrip("/").rsplit("/", 1)[-1]: (i.mtime.timestamp() if i.mtime else 0.0)
        for i in infos
    }


def list_groups(store: str, *, storage_options: Mapping[str, str] | None = None) -> list[str]:
    """Ids of the groups that have a group log (a Delta table) directly under ``store``."""
    entries = _list_dir(str(store).rstrip("/") or "/", storage_options)
    if not entries:
        return []
    groups = []
    for name in sorted(entries):
        if not _GROUP_ID_RE.match(name):
            continue
        sub = _list_dir(group_log_uri(store, name), storage_options)
        if sub and "_delta_log" in sub:
            groups.append(name)
    return groups


def _describe(exc: BaseException) -> str:
    """The library error's type and first line, for our messages. They are raised ``from
    None``: users see one message naming the path, the cause and the fix, not delta-rs's
    traceback."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:500]


# -- records <-> arrow -------------------------------------------------------------------------


def _to_arrow(records: Sequence[GroupRecord], version: int) -> pa.Table:
    n = len(records)
    return pa.Table.from_arrays(
        [
            pa.array([version] * n, pa.int64()),
            pa.array(range(n), pa.int32()),
            pa.array([RECORD_SCHEMA_VERSION] * n, pa.int32()),
            pa.array([r.kind for r in records], pa.string()),
            pa.array([r.timestamp_ms for r in records], pa.int64()),
            pa.array([r.member_id for r in records], pa.string()),
            pa.array([r.instance_id for r in records], pa.string()),
            pa.array([r.generation for r in records], pa.int64()),
            pa.array([r.topic for r in records], pa.string()),
            pa.array([r.partition for r in records], pa.int32()),
            pa.array([r.offset for r in records], pa.int64()),
            pa.array(
                [json.dumps(r.payload, separators=(",", ":"), sort_keys=True) for r in records],
                pa.string(),
            ),
        ],
        schema=SCHEMA,
    )


def _from_arrow(uri: str, table: pa.Table) -> list[tuple[int, GroupRecord]]:
    if table.num_rows == 0:
        return []
    table = table.sort_by([("log_version", "ascending"), ("seq", "ascending")])
    table = _drop_duplicate_rows(table)
    newest = pc.max(table["schema_version"]).as_py()
    if newest is not None and newest > RECORD_SCHEMA_VERSION:
        raise IncompatibleGroupStoreError(
            f"group log {uri} holds records of schema version {newest}, written by a newer "
            f"spark-kafka-group; this version reads up to {RECORD_SCHEMA_VERSION}. Upgrade "
            "spark-kafka-group on every member of the group"
        )
    cols = {name: table[name].to_pylist() for name in SCHEMA.names if name != "schema_version"}
    decode = _PayloadDecoder()
    return [
        (
            version,
            GroupRecord(
                kind=kind,
                timestamp_ms=ts,
                member_id=member,
                instance_id=instance,
                generation=gen,
                topic=topic,
                partition=part,
                offset=off,
                payload=decode(payload),
            ),
        )
        for version, kind, ts, member, instance, gen, topic, part, off, payload in zip(
            cols["log_version"],
            cols["kind"],
            cols["timestamp_ms"],
            cols["member_id"],
            cols["instance_id"],
            cols["generation"],
            cols["topic"],
            cols["partition"],
            cols["offset"],
            cols["payload"],
            strict=True,
        )
    ]


def _drop_duplicate_rows(table: pa.Table) -> pa.Table:
    """Keep one row per (log_version, seq) of a sorted table.

    A record is identified by its version and position in the append. Two compactions that
    raced (delta-rs rebases an ``optimize`` commit over a concurrent one without noticing that
    both rewrote the same files) leave every record in two live files; reading must still see
    each record once.
    """
    n = table.num_rows
    if n < 2:
        return table
    versions, seqs = table["log_version"], table["seq"]
    repeat = pc.and_(
        pc.equal(versions.slice(1), versions.slice(0, n - 1)),
        pc.equal(seqs.slice(1), seqs.slice(0, n - 1)),
    )
    if not pc.any(repeat).as_py():
        return table
    keep = pa.concat_arrays([pa.array([True]), pc.invert(repeat).combine_chunks()])
    return table.filter(keep)


class _PayloadDecoder:
    """``json.loads`` for payloads, memoised for the flat payloads that repeat (most do).

    A flat dict (scalar values only) is handed out as a fresh shallow copy, so no two records
    share a mutable payload; nested payloads are decoded every time.
    """

    _SCALARS = (str, int, float, bool, type(None))
    _MAX = 4096

    def __init__(self) -> None:
        self._decode = json.JSONDecoder().decode
        self._memo: dict[str, dict[str, Any]] = {}

    def __call__(self, text: str) -> dict[str, Any]:
        flat = self._memo.get(text)
        if flat is not None:
            return dict(flat)
        value = self._decode(text)
        if len(self._memo) < self._MAX and all(
            isinstance(v, self._SCALARS) for v in value.values()
        ):
            self._memo[text] = value
            return dict(value)
        return value


class _FileIndex:
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


def _scan(
    files: _FileIndex, opener: TableFiles, after: int, from_snapshot: bool, snapshot_kind: str
) -> pa.Table:
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


# -- the log -----------------------------------------------------------------------------------


class GroupLog:
    """One group's log. Thread-safe; one instance per process and group is enough."""

    def __init__(
        self,
        uri: str,
        storage_options: Mapping[str, str] | None,
        table: DeltaTable | None,
        table_properties: Mapping[str, str],
    ) -> None:
        self.uri = uri
        self._storage_options: dict[str, str] | None = (
            dict(storage_options) if storage_options else None
        )
        self._table = table
        self._table_properties = dict(table_properties)
        self._lock = threading.RLock()
        self._last_checkpoint: int = -1
        self._commits_checked = False

    # -- opening -----------------------------------------------------------------------------

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
        :data:`DEFAULT_TABLE_PROPERTIES` for a log created through this handle (tests and
        benchmarks use short retentions); they are ignored for an existing log.

        Raises :class:`IncompatibleGroupStoreError` if ``uri`` holds anything else (never
        touching it) and :class:`GroupStoreError` if it cannot be read or written.
        """
        if is_local_uri(uri):
            uri = os.path.abspath(os.path.expanduser(local_path(uri)))
        else:
            check_storage_options(uri, storage_options)
        props = {**DEFAULT_TABLE_PROPERTIES, **(table_properties or {})}
        self = cls(uri, storage_options, None, props)
        if create:
            self._check_commits_are_atomic()
        state = self._inspect()
        if state == "table":
            self._table = self._load()
            self._check_marker(self._table)
        elif not create:
            raise GroupLogNotFoundError(
                f"there is no group log at {uri}: check the groupStore and groupId options "
                "(create=False was given, so it is not created)"
            )
        elif is_local_uri(uri):
            self._check_writable()
        return self

    def _check_commits_are_atomic(self) -> None:
        """Refuse an object store that lets a stale commit through (see :mod:`.safety`);
        once per handle, before its first write (and at open when it may create the log)."""
        if not self._commits_checked and not is_local_uri(self.uri):
            probe_put_if_absent(self.uri, self._storage_options)
        self._commits_checked = True

    def _inspect(self) -> str:
        """``"table"``, ``"absent"`` (nothing or an empty directory); refuse anything else."""
        try:
            entries = _list_dir(self.uri, self._storage_options)
        except OSError as exc:
            raise GroupStoreError(
                f"cannot read the group store path {self.uri}: {_describe(exc)}; check the "
                "path, its permissions and the groupStore.* storage options"
            ) from None
        if entries is not None:  # other members' write probes (see _check_writable) and leases
            entries = {
                k: v
                for k, v in entries.items()
                if not k.startswith(PROBE_PREFIX) and k.rstrip("/") != LEASE_DIR
            }
        if not entries:
            return "absent"
        log_entries: dict[str, float] = {}
        if "_delta_log" in entries:
            log_entries = (
                _list_dir(self.uri.rstrip("/") + "/_delta_log", self._storage_options) or {}
            )
            if any(_COMMIT_FILE_RE.match(name) for name in log_entries):
                return "table"
        # No commit yet. Another member may be creating the log right now (delta-rs writes
        # the data file, then the commit): accept recent data files and temporary commits.
        others = {k: v for k, v in entries.items() if k != "_delta_log"}
        recent = time.time() - _CREATION_GRACE_S
        if all(_DATA_FILE_RE.match(k) and v >= recent for k, v in others.items()) and all(
            v >= recent for v in log_entries.values()
        ):
            return "absent"
        if "_delta_log" in entries:
            raise GroupStoreError(
                f"the group log at {self.uri} has a _delta_log without any commit in it: the "
                "log is truncated or corrupted. Restore it from a backup, or remove the "
                "directory to start the group afresh (its committed offsets are then lost), or "
                "choose another groupId"
            )
        if is_local_uri(self.uri) and not os.path.isdir(local_path(self.uri)):
            found = "a file"
        else:
            names = sorted(entries)
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            found = f"a non-empty directory that is not a Delta table ({shown})"
        raise IncompatibleGroupStoreError(
            f"the group log path {self.uri} holds {found}; it was left untouched. Choose "
            "another groupStore or groupId"
        )

    def _check_writable(self) -> None:
        path = local_path(self.uri)
        try:
            os.makedirs(path, exist_ok=True)
            probe = os.path.join(path, f"{PROBE_PREFIX}{uuid.uuid4().hex}")
            with open(probe, "wb"):
                pass
            os.remove(probe)
        except OSError as exc:
            raise GroupStoreError(
                f"cannot write the group log at {self.uri}: {_describe(exc)}; give a writable "
                "groupStore"
            ) from None

    def _load(self, version: int | None = None) -> DeltaTable:
        try:
            return DeltaTable(self.uri, version=version, storage_options=self._storage_options)
        except TableNotFoundError as exc:
            raise GroupStoreError(
                f"the group log at {self.uri} has a _delta_log directory but no readable table "
                f"in it ({_describe(exc)}): the log is truncated or corrupted. Restore it from "
                "a backup, or remove the directory to start the group afresh (its committed "
                "offsets are then lost), or choose another groupId"
            ) from None
        except (DeltaError, OSError, ValueError) as exc:
            raise GroupStoreError(
                f"cannot read the group log at {self.uri} ({_describe(exc)}): its _delta_log is "
                "corrupted or unreadable. Check the storage options and permissions; if the "
                "log is damaged restore it from a backup, or remove the directory to start the "
                "group afresh (its committed offsets are then lost), or choose another groupId"
            ) from None

    def _check_marker(self, table: DeltaTable) -> None:
        meta = table.metadata()
        if meta.name != LOG_TABLE_NAME:
            raise IncompatibleGroupStoreError(
                f"the group log path {self.uri} holds a Delta table that is not a "
                f"spark-kafka-group group log (its name is {meta.name!r}, not "
                f"{LOG_TABLE_NAME!r}); it was left untouched. Choose another groupStore or groupId"
            )
        match = _DESCRIPTION_RE.search(meta.description or "")
        fmt = int(match.group(1)) if match else None
        if fmt != LOG_FORMAT_VERSION:
            newer = fmt is not None and fmt > LOG_FORMAT_VERSION
            hint = (
                "upgrade spark-kafka-group on this member"
                if newer
                else "choose another groupStore or groupId"
            )
            raise IncompatibleGroupStoreError(
                f"the group log at {self.uri} has format {fmt if fmt is not None else 'unknown'}"
                f", this spark-kafka-group reads format {LOG_FORMAT_VERSION}; it was left "
                f"untouched. {hint[0].upper()}{hint[1:]}"
            )
        missing = _REQUIRED_COLUMNS - set(table.schema().to_arrow().names)
        if missing:
            raise IncompatibleGroupStoreError(
                f"the group log at {self.uri} lacks the columns {sorted(missing)}; it was left "
                "untouched. Choose another groupStore or groupId"
            )

    # -- snapshots ---------------------------------------------------------------------------

    def _refresh(self) -> DeltaTable | None:
        """The latest snapshot (``None`` while the log has not been created). Holds the lock."""
        if self._table is None:
            if self._inspect() != "table":
                return None
            table = self._load()
            self._check_marker(table)
            self._table = table
            return table
        try:
            self._table.update_incremental()
        except (DeltaError, OSError) as exc:
            # e.g. the JSON commits after our snapshot were cleaned up: reload from checkpoint.
            log.debug("group log %s: incremental update failed (%s); reloading", self.uri, exc)
            self._table = self._load()
        return self._table

    def latest_version(self) -> int:
        """The log's latest version, ``-1`` if it has not been created yet."""
        with self._lock:
            table = self._refresh()
            return -1 if table is None else table.version()

    # -- reading -----------------------------------------------------------------------------

    def read(
        self,
        *,
        after_version: int = -1,
        from_latest_snapshot: bool = False,
        snapshot_kind: str = "SNAPSHOT",
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
        snapshot_kind: str = "SNAPSHOT",
    ) -> LogSlice:
        """Like :meth:`read`, plus the version read: all records up to it were selected.

        Use ``slice.version`` (not the last record's version, as maintenance commits carry no
        records) as ``expected_version`` of the next append.
        """
        for attempt in range(2):
            with self._lock:
                table = self._refresh()
                if table is None:
                    return LogSlice(-1, [])
                version = table.version()
                if after_version >= version:
                    return LogSlice(version, [])
                try:
                    files = _FileIndex(table.get_add_actions(flatten=True))
                    opener = TableFiles(table, self._storage_options)
                except (DeltaError, OSError) as exc:
                    raise GroupStoreError(
                        f"cannot read the group log at {self.uri}: {_describe(exc)}"
                    ) from None
            try:
                rows = _scan(files, opener, after_version, from_latest_snapshot, snapshot_kind)
            except (FileNotFoundError, DeltaError, OSError) as exc:
                if attempt == 0:
                    # A file vanished under us (vacuum after a long pause): fresh snapshot.
                    with self._lock:
                        self._table = None
                    continue
                raise GroupStoreError(
                    f"cannot read the group log at {self.uri}: {_describe(exc)}"
                ) from None
            return LogSlice(version, _from_arrow(self.uri, rows))
        raise AssertionError("unreachable")  # pragma: no cover

    # -- appending ---------------------------------------------------------------------------

    def append(self, records: Sequence[GroupRecord], *, expected_version: int) -> int:
        """Commit ``records`` as version ``expected_version + 1``; return that version.

        Raises :class:`AppendConflict` if another writer got that version first (nothing of
        ``records`` is then in the log).
        """
        if not records:
            raise ValueError("append() needs at least one record")
        if expected_version < -1:
            raise ValueError(f"expected_version must be >= -1, not {expected_version}")
        self._check_commits_are_atomic()
        new_version = expected_version + 1
        data = _to_arrow(records, new_version)
        commit = CommitProperties(
            max_commit_retries=0,
            custom_metadata={"spark_kafka_group.records": len(records)},
        )
        with self._lock:
            if expected_version == -1:
                return self._create(data, commit)
            table = self._snapshot_at(expected_version)
            try:
                write_deltalake(
                    table,
                    data,
                    mode="append",
                    commit_properties=commit,
                    post_commithook_properties=PostCommitHookProperties(
                        create_checkpoint=False, cleanup_expired_logs=False
                    ),
                )
            except CommitFailedError as exc:
                raise self._conflict(expected_version, exc) from exc
            except (DeltaError, OSError) as exc:
                self._table = None
                raise GroupStoreError(
                    f"cannot append to the group log at {self.uri}: {_describe(exc)}"
                ) from None
            if table.version() != new_version:  # pragma: no cover - delta-rs contract
                self._table = None
                raise GroupStoreError(
                    f"group log {self.uri}: append committed as version {table.version()}, "
                    f"expected {new_version}"
                )
            self._maybe_checkpoint(table)
            return new_version

    def _snapshot_at(self, version: int) -> DeltaTable:
        table = self._table
        if table is not None and table.version() == version:
            return table
        if table is not None and table.version() > version:
            raise AppendConflict(self.uri, version, table.version())
        table = self._refresh()
        latest = -1 if table is None else table.version()
        if table is None or latest < version:
            raise GroupStoreError(
                f"group log {self.uri}: append expected version {version} but the log is only "
                f"at version {latest}; pass the version last read from this log"
            )
        if latest > version:
            raise AppendConflict(self.uri, version, latest)
        return table

    def _conflict(self, expected_version: int, exc: BaseException) -> GroupStoreError:
        self._table = None
        try:
            latest = self._refresh()
        except GroupStoreError:
            latest = None
        latest_version = None if latest is None else latest.version()
        if latest_version is not None and latest_version <= expected_version:
            return GroupStoreError(
                f"cannot append to the group log at {self.uri}: {_describe(exc)}"
            )
        return AppendConflict(self.uri, expected_version, latest_version)

    def _create(self, data: pa.Table, commit: CommitProperties) -> int:
        if self._table is not None or self._inspect() == "table":
            raise self._conflict(-1, RuntimeError("the log already exists"))
        if is_local_uri(self.uri):
            self._check_writable()
        try:
            write_deltalake(
                self.uri,
                data,
                mode="error",
                name=LOG_TABLE_NAME,
                description=(
                    f"spark-kafka-group group log; format={LOG_FORMAT_VERSION}; append-only "
                    "records of one consumer group, written by its members. Do not write to it "
                    "by hand."
                ),
                configuration=self._table_properties,
                storage_options=self._storage_options,
                commit_properties=commit,
            )
        except (DeltaError, OSError) as exc:
            if self._inspect() == "table":
                raise self._conflict(-1, exc) from exc
            raise GroupStoreError(
                f"cannot create the group log at {self.uri}: {_describe(exc)}; check the path, "
                "its permissions and the groupStore.* storage options"
            ) from None
        # mode="error" and the put-if-absent commit of version 0: ours is version 0 (others may
        # have appended since; the cached snapshot is simply the latest).
        self._table = self._load()
        return 0

    def _maybe_checkpoint(self, table: DeltaTable) -> None:
        interval = int(table.metadata().configuration.get("delta.checkpointInterval", "100"))
        version = table.version()
        if interval > 0 and version > 0 and version % interval == 0:
            try:
                table.create_checkpoint()
                self._last_checkpoint = version
            except (DeltaError, OSError) as exc:  # the append itself has landed
                log.warning("group log %s: checkpoint at %d failed: %s", self.uri, version, exc)

    # -- maintenance -------------------------------------------------------------------------

    def file_count(self) -> int:
        """Number of live data files of the latest snapshot."""
        with self._lock:
            table = self._refresh()
            return 0 if table is None else len(table.file_uris())

    def maintain(self, *, now_ms: int | None = None) -> MaintenanceReport:
        """Compact small files, vacuum old files, checkpoint, delete expired commits.

        Safe to run while others append or maintain: a step that loses a race is skipped and
        named in the report, never retried in a loop. It works on its own snapshot, so appends
        through this handle are not blocked meanwhile. Retention is judged by delta-rs against
        the wall clock; ``now_ms`` is the caller's clock, recorded in the report.
        """
        started = time.perf_counter()
        now = int(time.time() * 1000) if now_ms is None else int(now_ms)
        if self.latest_version() < 0:
            return MaintenanceReport(-1, -1, 0, 0, now_ms=now)
        table = self._load()
        report = MaintenanceReport(
            version_before=table.version(),
            version_after=table.version(),
            files_before=len(table.file_uris()),
            files_after=0,
            now_ms=now,
        )
        table = self._compact(table, report)
        table = self._vacuum(table, report)
        table = self._checkpoint(table, report)
        table = self._step(report, "log cleanup", table, table.cleanup_metadata)
        report.log_cleanup = "log cleanup" not in report.skipped
        table.update_incremental()
        report.version_after = table.version()
        report.files_after = len(table.file_uris())
        report.duration_ms = (time.perf_counter() - started) * 1000
        return report

    def _step(self, report: MaintenanceReport, name: str, table: DeltaTable, fn: Any) -> Any:
        """Run one maintenance step; on failure note it and return a fresh snapshot."""
        try:
            fn()
            table.update_incremental()
            return table
        except (DeltaError, OSError) as exc:
            report.skipped.append(name)
            log.info("group log %s: maintenance step %s skipped: %s", self.uri, name, exc)
            return self._load()

    def _compact(self, table: DeltaTable, report: MaintenanceReport) -> DeltaTable:
        sizes = table.get_add_actions(flatten=True)["size_bytes"].to_pylist()
        if sum(1 for s in sizes if s < COMPACT_TARGET_SIZE) < COMPACT_MIN_SMALL_FILES:
            return table
        metrics: dict[str, Any] = {}

        def compact() -> None:
            metrics.update(
                table.optimize.compact(
                    target_size=COMPACT_TARGET_SIZE,
                    max_concurrent_tasks=2,
                    # small row groups: reads after a version or from the latest snapshot
                    # skip the older row groups of a big compacted file by their statistics
                    writer_properties=WriterProperties(
                        max_row_group_size=COMPACT_ROW_GROUP_ROWS, compression="SNAPPY"
                    ),
                    commit_properties=CommitProperties(
                        max_commit_retries=10,
                        custom_metadata={"spark_kafka_group.maintenance": "compact"},
                    ),
                    post_commithook_properties=PostCommitHookProperties(
                        create_checkpoint=False, cleanup_expired_logs=False
                    ),
                )
            )

        table = self._step(report, "compaction", table, compact)
        report.files_compacted = int(metrics.get("numFilesRemoved", 0))
        report.files_written = int(metrics.get("numFilesAdded", 0))
        return table

    def _vacuum(self, table: DeltaTable, report: MaintenanceReport) -> DeltaTable:
        removed: list[str] = []

        def vacuum() -> None:
            # full: also deletes data files of appends that lost the CAS race (never
            # committed) and files whose tombstones a checkpoint already dropped; both only
            # once older than delta.deletedFileRetentionDuration.
            removed.extend(
                table.vacuum(
                    dry_run=False,
                    full=True,
                    commit_properties=CommitProperties(
                        max_commit_retries=10,
                        custom_metadata={"spark_kafka_group.maintenance": "vacuum"},
                    ),
                    post_commithook_properties=PostCommitHookProperties(
                        create_checkpoint=False, cleanup_expired_logs=False
                    ),
                )
            )

        table = self._step(report, "vacuum", table, vacuum)
        report.files_vacuumed = len(removed)
        return table

    def _checkpoint(self, table: DeltaTable, report: MaintenanceReport) -> DeltaTable:
        version = table.version()
        if version <= self._last_checkpoint:
            return table
        table = self._step(report, "checkpoint", table, table.create_checkpoint)
        if "checkpoint" not in report.skipped:
            self._last_checkpoint = max(self._last_checkpoint, version)
            report.checkpoint_version = version
        return table

    def __repr__(self) -> str:
        return f"GroupLog({self.uri!r})"
