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

from collections.abc import Mapping

from spark_kafka_group.store.member_files import MemberFiles

LEASE_DIR = "_members"


class LeaseFiles:
    """The leases of one group log (``table_uri``), on any store delta-rs can write."""

    def __init__(self, table_uri: str, *, storage_options: Mapping[str, str] | None = None) -> None:
        self._files = MemberFiles(table_uri, LEASE_DIR, "lease", storage_options=storage_options)
        self.uri = self._files.uri

    def renew(self, member_id: str, number: int) -> None:
        self._files.write(member_id, number, b"\n")

    def read(self) -> Mapping[str, int]:
        """Every member's latest renewal number (a listing that cannot miss a renewal under
        way: :meth:`MemberFiles.newest`)."""
        return self._files.newest()

    def drop(self, member_id: str) -> None:
        self._files.drop(member_id)
