"""Member leases: liveness kept next to the group log, outside its compare-and-swap.

Each member renews its lease every heartbeat interval by writing an empty object named
``_members/<member id>@<renewal number>`` inside the group log's directory, then deleting its
previous one. The number grows at every renewal (it is the writer's clock in ms while that
runs forward, so that members of earlier releases, which read it as a time, still can). A
reader never compares it with a clock: a member is alive when its number changed recently
*as the reader measured it* (:mod:`spark_kafka_group.group.clocks`). One listing gives every
member's latest renewal, so a member checks the whole group's liveness with one request, and a
renewal never conflicts with another writer.
Delta ignores directories whose name starts with ``_``: vacuum leaves the leases alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from urllib.parse import quote, unquote

from deltalake._internal import DeltaFileSystemHandler

from spark_kafka_group.errors import GroupStoreError

LEASE_DIR = "_members"


class LeaseFiles:
    """The leases of one group log (``table_uri``), on any store delta-rs can write."""

    def __init__(self, table_uri: str, *, storage_options: Mapping[str, str] | None = None) -> None:
        self.uri = f"{table_uri.rstrip('/')}/{LEASE_DIR}"
        try:
            self._fs = DeltaFileSystemHandler(table_uri, dict(storage_options or {}))
        except Exception as exc:
            raise GroupStoreError(f"cannot open the member leases at {self.uri}: {exc}") from None
        # The name this process last wrote for each member (deleted at the next renewal).
        self._current: dict[str, str] = {}

    @staticmethod
    def _name(member_id: str, number: int) -> str:
        return f"{LEASE_DIR}/{quote(member_id, safe='')}@{number}"

    def renew(self, member_id: str, number: int) -> None:
        name = self._name(member_id, number)
        previous = self._current.get(member_id)
        if name == previous:
            return
        try:
            stream = self._fs.open_output_stream(name, None)
            stream.write(b"\n")
            stream.close()  # type: ignore[attr-defined]  # deltalake's stub omits close()
        except Exception as exc:
            raise GroupStoreError(
                f"cannot renew the lease of {member_id} at {self.uri}: {exc}"
            ) from None
        self._current[member_id] = name
        if previous is not None:
            with contextlib.suppress(Exception):  # a leftover only costs a listing entry
                self._fs.delete_file(previous)

    def _names(self) -> list[str]:
        try:
            infos = self._fs.get_file_info_selector(LEASE_DIR, True, False)
        except Exception as exc:
            raise GroupStoreError(f"cannot list the member leases at {self.uri}: {exc}") from None
        return [info.path.rsplit("/", 1)[-1] for info in infos]

    def read(self) -> Mapping[str, int]:
        """Every member's latest renewal number. Listed twice: a directory listing may miss an entry
        created or deleted while it runs (POSIX leaves it unspecified), and a renewal is
        exactly that (a new name, then the old one deleted); the second listing sees the
        renewal complete, since a member renews only once a heartbeat interval."""
        latest: dict[str, int] = {}
        for name in self._names() + self._names():
            member, _, ms = name.rpartition("@")
            if not member or not ms.isdigit():
                continue  # not a lease
            member_id = unquote(member)
            latest[member_id] = max(int(ms), latest.get(member_id, 0))
        return latest

    def drop(self, member_id: str) -> None:
        prefix = f"{quote(member_id, safe='')}@"
        self._current.pop(member_id, None)
        for name in self._names():
            if name.startswith(prefix):
                with contextlib.suppress(Exception):
                    self._fs.delete_file(f"{LEASE_DIR}/{name}")
