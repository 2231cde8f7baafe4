"""The private delta-rs API the group store relies on (``DeltaFileSystemHandler``).

``deltalake._internal.DeltaFileSystemHandler`` is not part of delta-rs's public API, so a
release may change it without notice. These tests make exactly the calls the package makes on
it, on a local temporary directory, and fail with a message naming the installed deltalake when
one of them no longer behaves as relied on:

- ``store/member_files.py`` (leases, commit objects): the constructor on a table URI,
  ``open_output_stream(name, None)`` + ``write`` + ``close`` into a directory that does not
  exist yet, ``get_file_info_selector(directory, True, False)`` (a missing directory lists as
  empty), ``open_input_file(name).read()`` without a size, ``delete_file``;
- ``store/files.py``: ``from_table(DeltaTable._table, options)`` and reading a data file by its
  add-action path;
- ``ops/delete.py``: ``get_file_info_selector(name, True, True)`` (recursive, file types).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from spark_kafka_group.group.kinds import RecordKind

USERS = "spark_kafka_group/store/member_files.py, store/files.py and ops/delete.py"


def broken(call: str, detail: str) -> str:
    return (
        f"deltalake {deltalake.__version__}: DeltaFileSystemHandler {call} {detail}. "
        f"{USERS} rely on it: adapt them, or keep deltalake below this release in pyproject.toml "
        "(and constraints.txt)."
    )


@contextmanager
def contract(call: str) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        pytest.fail(broken(call, f"raised {exc!r}"), pytrace=False)


def handler_class() -> Any:
    with contract("import from deltalake._internal"):
        from deltalake._internal import DeltaFileSystemHandler
    return DeltaFileSystemHandler


def listed(fs: Any, directory: str, recursive: bool) -> dict[str, pafs.FileType]:
    with contract(f"get_file_info_selector({directory!r}, True, {recursive})"):
        infos = fs.get_file_info_selector(directory, True, recursive)
        return {info.path: info.type for info in infos}


def test_member_files_calls(tmp_path: Path) -> None:
    table_uri = str(tmp_path / "group")
    (tmp_path / "group").mkdir()
    with contract("(table_uri, storage_options)"):
        fs = handler_class()(table_uri, {})

    assert listed(fs, "_members", recursive=False) == {}, broken(
        "get_file_info_selector", "lists a missing directory as non-empty"
    )

    name = "_members/member%40host@17"
    with contract("open_output_stream(name, None).write/close"):
        stream = fs.open_output_stream(name, None)
        stream.write(b"renewal 17")
        stream.close()
    files = listed(fs, "_members", recursive=False)
    assert [p.rsplit("/", 1)[-1] for p in files] == ["member%40host@17"], broken(
        "get_file_info_selector", f"lists {sorted(files)} after one write of {name}"
    )
    assert list(files.values()) == [pafs.FileType.File], broken(
        "get_file_info_selector", f"gives file types {list(files.values())}"
    )

    with contract("open_input_file(name).read() without a size"):
        data = bytes(fs.open_input_file(name).read())
    assert data == b"renewal 17", broken("open_input_file().read()", f"returned {data!r}")

    # MemberFiles.read() takes an exception here as "replaced since the listing".
    with pytest.raises(Exception):  # noqa: B017 - whichever error: that it raises is the contract
        fs.open_input_file("_members/member%40host@16").read()

    with contract("delete_file(name)"):
        fs.delete_file(name)
    assert listed(fs, "_members", recursive=False) == {}, broken(
        "delete_file", "left the file listed"
    )


def test_recursive_listing_of_a_group_directory(tmp_path: Path) -> None:
    group = tmp_path / "stores" / "g"
    (group / "_delta_log").mkdir(parents=True)
    (group / "_delta_log" / "00000000000000000000.json").write_text("{}")
    (group / "part-0.parquet").write_bytes(b"x")
    with contract("(parent_uri, storage_options)"):
        fs = handler_class()(str(tmp_path / "stores"), {})

    entries = listed(fs, "g", recursive=True)
    files = sorted(p for p, kind in entries.items() if kind != pafs.FileType.Directory)
    assert files == ["g/_delta_log/00000000000000000000.json", "g/part-0.parquet"], broken(
        "get_file_info_selector(name, True, True)", f"lists {sorted(entries.items())}"
    )
    for path in files:
        with contract("delete_file(path)"):
            fs.delete_file(path)
    left = [p for p, kind in listed(fs, "g", True).items() if kind != pafs.FileType.Directory]
    assert left == [], broken("delete_file", f"left {left}")


def test_from_table_reads_a_data_file_by_its_add_action_path(tmp_path: Path) -> None:
    uri = str(tmp_path / "table")
    rows = pa.table({"kind": [RecordKind.JOIN.value, RecordKind.SYNC.value], "offset": [1, 2]})
    write_deltalake(uri, rows)
    table = DeltaTable(uri)
    with contract("from_table(DeltaTable._table, storage_options)"):
        fs = handler_class().from_table(table._table, {})
    paths = table.get_add_actions(flatten=True)["path"].to_pylist()
    assert len(paths) == 1

    with contract("open_input_file(add-action path).read()"):
        data = fs.open_input_file(paths[0]).read()
    read = pq.read_table(pa.BufferReader(bytes(data)))
    assert read.select(["kind", "offset"]).to_pylist() == rows.to_pylist(), broken(
        "open_input_file().read()", "returned other data than the file holds"
    )
