"""What the member loop needs from a group log and from the members' leases.

Two small protocols, so that the same member logic runs over the Delta group log
(:class:`~spark_kafka_group.store.log.GroupLog` and
:class:`~spark_kafka_group.store.leases.LeaseFiles`) and over the in-memory log of the
simulation and the property tests (:mod:`spark_kafka_group.store.memory`).

The log is an append-only sequence of versions; each version holds the records of one append.
An append names the version it was decided on (``expected_version``) and lands as the next
one, or raises :class:`~spark_kafka_group.store.log.AppendConflict` when another writer got
there first: the writer reads what it missed and decides again.

Leases carry liveness outside the log: each member overwrites its own lease every heartbeat
interval, without a compare-and-swap, so that staying alive never competes with the writes
that change the group.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from spark_kafka_group.group import GroupRecord
from spark_kafka_group.store.log import LogSlice, MaintenanceReport


class LogStore(Protocol):
    def read_slice(
        self, *, after_version: int = -1, from_latest_snapshot: bool = False
    ) -> LogSlice:
        """The records of the versions after ``after_version`` (or from the latest SNAPSHOT
        record on), and the latest version read."""
        ...

    def append(self, records: Sequence[GroupRecord], *, expected_version: int) -> int:
        """Append as version ``expected_version + 1``; return it, or raise AppendConflict."""
        ...

    def maintain(self, *, now_ms: int | None = None) -> MaintenanceReport:
        """Compact, checkpoint and clean up (best effort; only the group's leader calls it)."""
        ...


class LeaseStore(Protocol):
    def renew(self, member_id: str, number: int) -> None:
        """Record that ``member_id`` is alive, under a renewal ``number`` larger than its last
        (readers only notice that it changed)."""
        ...

    def read(self) -> Mapping[str, int]:
        """The latest renewal number of every member with a lease."""
        ...

    def drop(self, member_id: str) -> None:
        """Forget a member's lease (it left, or was expired)."""
        ...
