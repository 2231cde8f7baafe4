"""Where group logs live: the group-id rule, the default store, a group's log URI, listing.

This module is cheap to import (the standard library only; listing an object store loads
delta-rs on first use), so :mod:`spark_kafka_group.options` checks ``groupId`` with the same
rule the store uses to name the group's directory.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from urllib.parse import unquote, urlparse

from spark_kafka_group.errors import GroupStoreError
from spark_kafka_group.store.errors import InvalidGroupIdError, describe_error

#: Environment variable naming the default group store.
GROUP_STORE_ENV = "SPARK_KAFKA_GROUP_STORE"

#: A group id names a directory: portable file-name characters, not starting with '.' or '-'
#: (no hidden directory, nothing a shell or a tool would read as an option), at most 255.
_GROUP_ID_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,254}$")


def is_valid_group_id(group_id: object) -> bool:
    """Whether ``group_id`` can name a group's directory under a group store."""
    return isinstance(group_id, str) and _GROUP_ID_RE.match(group_id) is not None


def validate_group_id(group_id: str) -> str:
    """Return ``group_id`` if it can name a directory, else raise :class:`InvalidGroupIdError`."""
    if not is_valid_group_id(group_id):
        raise InvalidGroupIdError(
            f"Option 'groupId' = {group_id!r} is not valid: the group log lives in a directory "
            "named after the group id, so it must be 1-255 characters of letters, digits, '.', "
            "'_' and '-' (not starting with '.' or '-'); choose another groupId"
        )
    return group_id


def is_local_uri(uri: str) -> bool:
    """A path or ``file://`` URI (read with pyarrow's native local file system)."""
    scheme = urlparse(uri).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def local_path(uri: str) -> str:
    """The file-system path of a local ``uri``."""
    return unquote(urlparse(uri).path) if uri.startswith("file://") else uri


def group_log_uri(store: str, group_id: str) -> str:
    """``"<store>/<group_id>"``: where the log of ``group_id`` lives under ``store``."""
    validate_group_id(group_id)
    if not store or not str(store).strip():
        raise GroupStoreError("groupStore is empty; give a directory or an object-store URI")
    store = str(store)
    if is_local_uri(store):
        store = os.path.expanduser(store)
    return store.rstrip("/") + "/" + group_id


def list_dir(uri: str, storage_options: Mapping[str, str] | None) -> dict[str, float] | None:
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
    from deltalake.exceptions import TableNotFoundError
    from deltalake.fs import DeltaStorageHandler

    try:
        fs = pafs.PyFileSystem(DeltaStorageHandler(uri, dict(storage_options or {})))
        infos = fs.get_file_info(pafs.FileSelector("", allow_not_found=True))
    except (TableNotFoundError, FileNotFoundError):
        return None
    except Exception as exc:
        raise GroupStoreError(f"cannot list {uri}: {describe_error(exc)}") from None
    return {
        i.path.rstrip("/").rsplit("/", 1)[-1]: (i.mtime.timestamp() if i.mtime else 0.0)
        for i in infos
    }


def list_groups(store: str, *, storage_options: Mapping[str, str] | None = None) -> list[str]:
    """Ids of the groups that have a group log (a Delta table) directly under ``store``."""
    entries = list_dir(str(store).rstrip("/") or "/", storage_options)
    if not entries:
        return []
    groups = []
    for name in sorted(entries):
        if not is_valid_group_id(name):
            continue
        sub = list_dir(group_log_uri(store, name), storage_options)
        if sub and "_delta_log" in sub:
            groups.append(name)
    return groups
