"""A pyarrow file system for reading a Delta table's files that is safe at interpreter exit.

delta-rs's ``DeltaStorageHandler`` answers every read with a Python ``bytes`` object, which
pyarrow wraps as a buffer whose release must take the GIL. The Parquet reader drops its read
cache (and with it those buffers) on one of Arrow's I/O threads, *after* the scan has returned
to Python. When the interpreter is already finalizing by then (a CLI command or a job that just
read the group log and returns), CPython ends that thread with ``pthread_exit``; the unwind runs
into a C++ destructor that may not throw, and the whole process aborts with
"terminate called without an active exception" (exit code 134). A gdb backtrace shows it:
``PyBuffer::~PyBuffer`` -> ``PyGILState_Ensure`` -> ``PyThread_exit_thread`` ->
``std::terminate`` on an ``arrow::internal::ThreadPool`` worker.

The handler here reads each object whole, inside the Python call that opens it, and copies it
into memory Arrow allocated: no Python object ever reaches an Arrow thread, so nothing there
needs the GIL. The files of a group log are small (one per append, compacted ones a few MB).
Local tables use pyarrow's native local file system, which never involves Python either.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake.fs import DeltaStorageHandler


class ArrowMemoryStorageHandler(DeltaStorageHandler):
    """``DeltaStorageHandler`` whose files are read whole into Arrow-allocated buffers."""

    def open_input_file(self, path: str) -> pa.NativeFile:
        return pa.BufferReader(self._read_whole(path))

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return pa.BufferReader(self._read_whole(path))

    def _read_whole(self, path: str) -> pa.Buffer:
        data = self._handler.open_input_file(path).read()
        out = pa.BufferOutputStream()  # a copy in Arrow's memory pool, released without GIL
        out.write(data)
        return out.getvalue()


def is_local_uri(uri: str) -> bool:
    """A path or ``file://`` URI (read with pyarrow's native local file system)."""
    scheme = urlparse(uri).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def local_path(uri: str) -> str:
    """The file-system path of a local ``uri``."""
    return unquote(urlparse(uri).path) if uri.startswith("file://") else uri


def table_filesystem(
    table: DeltaTable, storage_options: Mapping[str, str] | None = None
) -> pafs.FileSystem:
    """A pyarrow file system rooted at ``table``'s directory, safe to read at exit (see above).

    Pass it as ``filesystem`` to ``DeltaTable.to_pyarrow_dataset`` or to
    ``pyarrow.dataset`` with paths relative to the table.
    """
    uri = table.table_uri
    if is_local_uri(uri):
        return pafs.SubTreeFileSystem(local_path(uri), pafs.LocalFileSystem())
    return pafs.PyFileSystem(
        ArrowMemoryStorageHandler.from_table(table._table, dict(storage_options or {}))
    )
