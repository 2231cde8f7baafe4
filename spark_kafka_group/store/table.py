"""One group log's Delta table: what makes a table a group log, opening it, its snapshot.

:class:`LogTable` is the state the reads (:mod:`.scan`), appends (:mod:`.append`) and
maintenance (:mod:`.maintenance`) of one log share: its URI and storage options, the cached
Delta snapshot and the lock that guards it. Opening refuses anything at the path that is not a
group log of this format, without touching it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import uuid
from collections.abc import Mapping

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from spark_kafka_group.errors import GroupStoreError, IncompatibleGroupStoreError
from spark_kafka_group.store.codec import REQUIRED_COLUMNS
from spark_kafka_group.store.errors import GroupLogNotFoundError, describe_error
from spark_kafka_group.store.leases import LEASE_DIR
from spark_kafka_group.store.paths import is_local_uri, list_dir, local_path
from spark_kafka_group.store.safety import (
    PROBE_PREFIX,
    check_storage_options,
    probe_put_if_absent,
)
from spark_kafka_group.store.table_properties import (
    DEFAULT_LOG_RETENTION_MS,
    retention_properties,
)

log = logging.getLogger(__name__)

#: Version of the table layout (columns, marker, meaning of ``log_version``). Bump on change.
LOG_FORMAT_VERSION = 1

#: Delta ``name`` of every group log: the marker that says "this table is a group log".
#: (delta-rs refuses unknown ``configuration`` keys at table creation, so the marker lives in
#: the table's name and description, which every Delta reader shows.)
LOG_TABLE_NAME = "spark-kafka-group group log"
LOG_TABLE_DESCRIPTION = (
    f"spark-kafka-group group log; format={LOG_FORMAT_VERSION}; append-only records of one "
    "consumer group, written by its members. Do not write to it by hand."
)
_DESCRIPTION_RE = re.compile(r"\bformat=(\d+)\b")

#: Table properties of a new group log (see :mod:`.log` for why these values).
DEFAULT_TABLE_PROPERTIES: Mapping[str, str] = {
    "delta.appendOnly": "true",
    # Opening reads the last checkpoint plus at most this many JSON commits.
    "delta.checkpointInterval": "50",
    # JSON commits older than this (and older than the last checkpoint) are deleted by
    # maintain(), and files compacted away this long after compaction (far longer than any
    # read). Records stay in the data files for ever; only Delta time travel is cut. The
    # groupLogRetention option sets both (retention_properties).
    **retention_properties(DEFAULT_LOG_RETENTION_MS),
    "delta.enableExpiredLogCleanup": "false",  # maintain() does it, not every append
}

_COMMIT_FILE_RE = re.compile(r"^\d{20}\.(json|checkpoint\..*parquet)$")
#: A data file delta-rs writes; on a local disk first under a staging name, ``<name>#<n>``,
#: then renamed (another member creating the log may be between the two).
_DATA_FILE_RE = re.compile(r"^part-[0-9]+-[0-9a-f-]+-c000(\.[a-z0-9]+)?\.parquet(#[0-9]+)?$")
#: A directory holding only data files this young and no commit is a log being created.
_CREATION_GRACE_S = 120.0


def _beside_the_table(name: str) -> bool:
    """Entries members keep in a log's directory next to the Delta table: write probes (see
    :meth:`LogTable.check_writable`) and the member leases (:mod:`.leases`)."""
    return name.startswith(PROBE_PREFIX) or name.rstrip("/") == LEASE_DIR


class LogTable:
    """One group log's table and cached snapshot. Hold :attr:`lock` while using
    :attr:`snapshot`."""

    def __init__(
        self,
        uri: str,
        storage_options: Mapping[str, str] | None,
        snapshot: DeltaTable | None,
        table_properties: Mapping[str, str],
    ) -> None:
        self.uri = uri
        self.storage_options: dict[str, str] | None = (
            dict(storage_options) if storage_options else None
        )
        #: The latest snapshot this process saw (``None``: not loaded, or the log is absent).
        self.snapshot = snapshot
        #: Properties of a log created through this handle.
        self.table_properties = dict(table_properties)
        self.lock = threading.RLock()
        #: The newest version this handle checkpointed.
        self.last_checkpoint: int = -1
        self._commits_checked = False

    @classmethod
    def open(
        cls,
        uri: str,
        *,
        storage_options: Mapping[str, str] | None,
        create: bool,
        table_properties: Mapping[str, str] | None,
    ) -> LogTable:
        """See :meth:`GroupLog.open`."""
        if is_local_uri(uri):
            uri = os.path.abspath(os.path.expanduser(local_path(uri)))
        else:
            check_storage_options(uri, storage_options)
        props = {**DEFAULT_TABLE_PROPERTIES, **(table_properties or {})}
        self = cls(uri, storage_options, None, props)
        if create:
            self.check_commits_are_atomic()
        state = self.inspect()
        if state == "table":
            self.snapshot = self.load()
            self._check_marker(self.snapshot)
        elif not create:
            raise GroupLogNotFoundError(
                f"there is no group log at {uri}: check the groupStore and groupId options "
                "(create=False was given, so it is not created)"
            )
        elif is_local_uri(uri):
            self.check_writable()
        return self

    def check_commits_are_atomic(self) -> None:
        """Refuse an object store that lets a stale commit through (see :mod:`.safety`);
        once per handle, before its first write (and at open when it may create the log)."""
        if not self._commits_checked and not is_local_uri(self.uri):
            probe_put_if_absent(self.uri, self.storage_options)
        self._commits_checked = True

    def inspect(self) -> str:
        """``"table"``, ``"absent"`` (nothing or an empty directory); refuse anything else."""
        try:
            entries = list_dir(self.uri, self.storage_options)
        except OSError as exc:
            raise GroupStoreError(
                f"cannot read the group store path {self.uri}: {describe_error(exc)}; check the "
                "path, its permissions and the groupStore.* storage options"
            ) from None
        if entries is not None:
            entries = {k: v for k, v in entries.items() if not _beside_the_table(k)}
        if not entries:
            return "absent"
        log_entries: dict[str, float] = {}
        if "_delta_log" in entries:
            log_entries = list_dir(self.uri.rstrip("/") + "/_delta_log", self.storage_options) or {}
            if any(_COMMIT_FILE_RE.match(name) for name in log_entries):
                return "table"
        # No commit yet. Another member may be creating the log right now (delta-rs writes
        # the data file, then the commit): accept recent data files and temporary commits.
        # "Recent" by the store's clock, which stamped them: this machine's may be off.
        others = {k: v for k, v in entries.items() if k != "_delta_log"}
        stamps = [*others.values(), *log_entries.values()]
        if all(_DATA_FILE_RE.match(k) for k in others) and (
            not stamps or min(stamps) >= self.store_now() - _CREATION_GRACE_S
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

    def store_now(self) -> float:
        """The store's clock now, in epoch seconds: the modification time it gives a scratch
        object written beside the table (deleted at once). Ages of what others wrote are
        measured on it, never on this machine's wall clock, which may be minutes off."""
        if is_local_uri(self.uri):  # a shared file system stamps with its server's clock
            return self.check_writable()
        from deltalake._internal import DeltaFileSystemHandler

        name = f"{PROBE_PREFIX}{uuid.uuid4().hex}"
        try:
            fs = DeltaFileSystemHandler(self.uri, dict(self.storage_options or {}))
            stream = fs.open_output_stream(name, None)
            stream.write(b"")
            stream.close()  # type: ignore[attr-defined]  # deltalake's stub omits close()
            mtime = fs.get_file_info([name])[0].mtime
        except Exception as exc:  # delta-rs raises its own and OSError types
            raise GroupStoreError(
                f"cannot write to the group log directory {self.uri}: {describe_error(exc)}; "
                "check its permissions and the groupStore.* storage options"
            ) from None
        finally:
            with contextlib.suppress(Exception):
                fs.delete_file(name)
        if mtime is None:
            raise GroupStoreError(
                f"the group store at {self.uri} gives no modification time for what is written "
                "to it, so a log being created cannot be told from a foreign directory; remove "
                "the files in that directory or choose another groupId"
            )
        return mtime.timestamp()

    def check_writable(self) -> float:
        """A local log's directory exists and takes a file; the file system's clock now (the
        scratch file's modification time)."""
        path = local_path(self.uri)
        try:
            os.makedirs(path, exist_ok=True)
            probe = os.path.join(path, f"{PROBE_PREFIX}{uuid.uuid4().hex}")
            with open(probe, "wb"):
                pass
            stamped = os.stat(probe).st_mtime
            os.remove(probe)
            return stamped
        except OSError as exc:
            raise GroupStoreError(
                f"cannot write the group log at {self.uri}: {describe_error(exc)}; give a "
                "writable groupStore"
            ) from None

    def load(self, version: int | None = None) -> DeltaTable:
        """A fresh snapshot (the latest, or ``version``), not cached."""
        try:
            return DeltaTable(self.uri, version=version, storage_options=self.storage_options)
        except TableNotFoundError as exc:
            raise GroupStoreError(
                f"the group log at {self.uri} has a _delta_log directory but no readable table "
                f"in it ({describe_error(exc)}): the log is truncated or corrupted. Restore it "
                "from a backup, or remove the directory to start the group afresh (its "
                "committed offsets are then lost), or choose another groupId"
            ) from None
        except (DeltaError, OSError, ValueError) as exc:
            raise GroupStoreError(
                f"cannot read the group log at {self.uri} ({describe_error(exc)}): its "
                "_delta_log is corrupted or unreadable. Check the storage options and "
                "permissions; if the log is damaged restore it from a backup, or remove the "
                "directory to start the group afresh (its committed offsets are then lost), or "
                "choose another groupId"
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
        missing = REQUIRED_COLUMNS - set(table.schema().to_arrow().names)
        if missing:
            raise IncompatibleGroupStoreError(
                f"the group log at {self.uri} lacks the columns {sorted(missing)}; it was left "
                "untouched. Choose another groupStore or groupId"
            )

    def refresh(self) -> DeltaTable | None:
        """The latest snapshot (``None`` while the log has not been created). Hold the lock."""
        if self.snapshot is None:
            if self.inspect() != "table":
                return None
            table = self.load()
            self._check_marker(table)
            self.snapshot = table
            return table
        try:
            self.snapshot.update_incremental()
        except (DeltaError, OSError) as exc:
            # e.g. the JSON commits after our snapshot were cleaned up: reload from checkpoint.
            log.debug("group log %s: incremental update failed (%s); reloading", self.uri, exc)
            self.snapshot = self.load()
        return self.snapshot

    def latest_version(self) -> int:
        """The log's latest version, ``-1`` if it has not been created yet."""
        with self.lock:
            table = self.refresh()
            return -1 if table is None else table.version()
