"""What the member loop needs from a group log and from the members' leases.

Two small protocols, so that the same member logic runs over the Delta group log
(:class:`~spark_kafka_group.store.log.GroupLog` and
:class:`~spark_kafka_group.store.leases.LeaseFiles`) and over the in-memory log of the
simulation and the property tests (:mod:`spark_kafka_group.store.memory`).

The log is an append-only sequence of versions; each version holds the records of one append.
An append names the version it was decided on (``expected_version``) and lands as the next
one, or raises :class:`~spark_kafka_group.store.errors.AppendConflict` when another writer got
there first: the writer reads what it missed and decides again.

Leases carry liveness outside the log: each member overwrites its own lease every heartbeat
interval, without a compare-and-swap, so that staying alive never competes with the writes
that change the group.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from spark_kafka_group.group.records import GroupRecord


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
    #: Retention properties this run set on the table (groupLogRetention changed).
    retention: dict[str, str] = field(default_factory=dict)
    duration_ms: float = 0.0
    now_ms: int = 0


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
