"""One numbered file per member beside a group log: ``<directory>/<member id>@<number>``.

Member leases (:mod:`.leases`) and commit objects (:mod:`.commit_objects`) are both kept this
way, in a ``_``-directory of the group log's table (Delta ignores those: vacuum leaves them
alone). A member writes its next file under a larger number, blind (no compare-and-swap, so it
never races another writer), then deletes its previous one; one listing gives every member's
newest number, so a reader learns who has something new without reading every file.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from urllib.parse import quote, unquote

from spark_kafka_group.errors import GroupStoreError


class MemberFiles:
    """The numbered member files in ``directory`` of the group log at ``table_uri``, on any
    store delta-rs can write; ``what`` names them in errors ("lease", "commit object")."""

    def __init__(
        self,
        table_uri: str,
        directory: str,
        what: str,
        *,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        from deltalake._internal import DeltaFileSystemHandler

        self.uri = f"{table_uri.rstrip('/')}/{directory}"
        self._directory = directory
        self._what = what
        try:
            self._fs = DeltaFileSystemHandler(table_uri, dict(storage_options or {}))
        except Exception as exc:
            raise GroupStoreError(f"cannot open the {what}s at {self.uri}: {exc}") from None
        # The name this process last wrote for each member (deleted at its next write).
        self._current: dict[str, str] = {}

    def _name(self, member_id: str, number: int) -> str:
        return f"{self._directory}/{quote(member_id, safe='')}@{number}"

    def write(self, member_id: str, number: int, data: bytes) -> None:
        """Write ``member_id``'s file numbered ``number``, then delete its previous one."""
        name = self._name(member_id, number)
        previous = self._current.get(member_id)
        if name == previous:
            return
        try:
            stream = self._fs.open_output_stream(name, None)
            stream.write(data)
            stream.close()  # type: ignore[attr-defined]  # deltalake's stub omits close()
        except Exception as exc:
            raise GroupStoreError(
                f"cannot write the {self._what} of {member_id} at {self.uri}: {exc}"
            ) from None
        self._current[member_id] = name
        if previous is not None:
            with contextlib.suppress(Exception):  # a leftover only costs a listing entry
                self._fs.delete_file(previous)

    def _names(self) -> list[str]:
        try:
            infos = self._fs.get_file_info_selector(self._directory, True, False)
        except Exception as exc:
            raise GroupStoreError(f"cannot list the {self._what}s at {self.uri}: {exc}") from None
        return [info.path.rsplit("/", 1)[-1] for info in infos]

    def newest(self) -> dict[str, int]:
        """Every member's newest number. Listed twice: a directory listing may miss an entry
        created or deleted while it runs (POSIX leaves it unspecified), and a member's write is
        exactly that (a new name, then the old one deleted); the second listing sees the write
        complete, since a member writes at most once a step."""
        newest: dict[str, int] = {}
        for name in self._names() + self._names():
            member, _, number = name.rpartition("@")
            if not member or not number.isdigit():
                continue  # not one of ours
            member_id = unquote(member)
            newest[member_id] = max(int(number), newest.get(member_id, -1))
        return newest

    def read(self, member_id: str, number: int) -> bytes | None:
        """The content of ``member_id``'s file ``number``; None if it is gone (replaced since
        the listing that named it)."""
        try:
            stream = self._fs.open_input_file(self._name(member_id, number))
            # read() without nbytes reads the whole file; deltalake's stub says it is required.
            return bytes(stream.read())  # type: ignore[call-arg]  # stub gap
        except Exception:
            return None

    def drop(self, *member_ids: str) -> None:
        """Delete every file of ``member_ids`` (it left or was expired), with one listing."""
        prefixes = tuple(f"{quote(m, safe='')}@" for m in member_ids)
        for member_id in member_ids:
            self._current.pop(member_id, None)
        for name in self._names():
            if name.startswith(prefixes):
                with contextlib.suppress(Exception):
                    self._fs.delete_file(f"{self._directory}/{name}")
