"""Reading a Delta table's data files with pyarrow, safely at interpreter exit.

delta-rs's ``DeltaStorageHandler`` is a Python object that pyarrow's ``PyFileSystem`` calls, and
every read returns a Python ``bytes`` object that pyarrow wraps as a buffer. Releasing either
takes the GIL, and pyarrow releases them on its own I/O and CPU threads, sometimes *after* the
scan has returned to Python (the Parquet read cache, the dataset's file sources). When the
interpreter is already finalizing by then (a CLI command or a job that just read the group log
and returns), CPython ends that thread with ``pthread_exit``; the unwind runs into a C++
destructor that may not throw, and the whole process aborts with "terminate called without an
active exception" (exit code 134). gdb shows it on an ``arrow::internal::ThreadPool`` worker:
``PyBuffer::~PyBuffer`` or ``OwnedRefNoGIL::~OwnedRefNoGIL`` (the ``PyFileSystem``) ->
``PyGILState_Ensure`` -> ``PyThread_exit_thread`` -> ``std::terminate``.

So no Python object is ever handed to Arrow here: local files are read with pyarrow's native
local file system; object-store files are fetched whole by the calling Python thread (through
delta-rs's object store) and copied into memory Arrow allocated, and the dataset is built from
those buffers. The data files of a group log are small (one per append, compacted ones a few MB).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
from deltalake import DeltaTable
from deltalake._internal import DeltaFileSystemHandler

from spark_kafka_group.store.paths import is_local_uri, local_path


class TableFiles:
    """Opens data files of one Delta table snapshot as a pyarrow dataset (see above)."""

    #: Object-store files fetched at once by the calling thread's helpers.
    FETCH_THREADS = 8

    def __init__(self, table: DeltaTable, storage_options: Mapping[str, str] | None) -> None:
        uri = table.table_uri
        self._local_root = local_path(uri) if is_local_uri(uri) else None
        self._handler = (
            None
            if self._local_root is not None
            else DeltaFileSystemHandler.from_table(table._table, dict(storage_options or {}))
        )

    def dataset(self, paths: Sequence[str], schema: pa.Schema) -> pads.Dataset:
        """The files at ``paths`` (relative to the table) as one Parquet dataset."""
        fmt = pads.ParquetFileFormat()
        if self._local_root is not None:
            local = pafs.SubTreeFileSystem(self._local_root, pafs.LocalFileSystem())
            return pads.FileSystemDataset.from_paths(
                list(paths), schema=schema, format=fmt, filesystem=local
            )
        if len(paths) > 1:
            with ThreadPoolExecutor(min(self.FETCH_THREADS, len(paths))) as pool:
                buffers = list(pool.map(self._fetch, paths))
        else:
            buffers = [self._fetch(p) for p in paths]
        return pads.FileSystemDataset([fmt.make_fragment(b) for b in buffers], schema, fmt)

    def _fetch(self, path: str) -> pa.Buffer:
        # Only remote tables fetch files (local ones are read in place).
        assert self._handler is not None
        # read() without nbytes reads the whole file; deltalake's stub says nbytes is required.
        data = self._handler.open_input_file(path).read()  # type: ignore[call-arg]  # stub gap
        out = pa.BufferOutputStream()  # a copy in Arrow's memory, released without the GIL
        out.write(data)
        return out.getvalue()


def query_table(table: DeltaTable, sql: str, *, name: str = "t") -> pa.Table:
    """Run ``sql`` over ``table`` (registered as ``name``) inside delta-rs (DataFusion).

    For reading user tables, which can be big: delta-rs reads them with its own object store
    and hands back Arrow data whose release needs no GIL, so nothing outlives the call on an
    Arrow thread (unlike ``DeltaTable.to_pyarrow_dataset``, see above).
    """
    from deltalake import QueryBuilder

    return pa.table(QueryBuilder().register(name, table).execute(sql))
