"""An in-memory group log and lease store with injectable latency and conflicts.

They implement :class:`~spark_kafka_group.store.log_store.LogStore` and
:class:`~spark_kafka_group.store.log_store.LeaseStore` for the simulation and the property
tests, which run the production member logic over them. Records go through their JSON form on
the way in, as they do through the Delta table, so that live and replayed states compare equal.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import replace

from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.records import GroupRecord
from spark_kafka_group.group.timer import ManualClock
from spark_kafka_group.store.errors import AppendConflict
from spark_kafka_group.store.log_store import LogSlice, MaintenanceReport


def stored(record: GroupRecord) -> GroupRecord:
    """The record as a store gives it back: its payload went through JSON."""
    return replace(record, payload=json.loads(json.dumps(record.payload, allow_nan=False)))


class InMemoryLog:
    """Versions in a list; an append lands only on the version it was decided on.

    ``latency_ms`` advances a :class:`ManualClock` on every read and append (a synchronous
    caller pays the store's latency in simulated time); ``conflict_rate`` makes that share of
    appends fail as if another writer had won (seeded, so runs repeat).
    """

    def __init__(
        self,
        *,
        uri: str = "memory://group-log",
        clock: ManualClock | None = None,
        latency_ms: int = 0,
        conflict_rate: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.uri = uri
        self._clock = clock
        self._latency_ms = latency_ms
        self._conflict_rate = conflict_rate
        self._random = random.Random(seed)
        self._versions: list[list[GroupRecord]] = []
        self.reads = 0
        self.appends = 0
        self.conflicts = 0

    @property
    def version(self) -> int:
        return len(self._versions) - 1

    @property
    def records(self) -> list[GroupRecord]:
        return [r for version in self._versions for r in version]

    def _wait(self) -> None:
        if self._clock is not None and self._latency_ms:
            self._clock.advance(self._latency_ms)

    def read_slice(
        self, *, after_version: int = -1, from_latest_snapshot: bool = False
    ) -> LogSlice:
        self._wait()
        self.reads += 1
        start, snapshot_at = after_version + 1, None
        if from_latest_snapshot:
            for v in range(self.version, -1, -1):
                if any(r.kind == RecordKind.SNAPSHOT for r in self._versions[v]):
                    start = snapshot_at = v
                    break
        rows: list[tuple[int, GroupRecord]] = []
        for v in range(max(start, 0), len(self._versions)):
            records = self._versions[v]
            if v == snapshot_at:
                kinds = [r.kind for r in records]
                records = records[len(kinds) - 1 - kinds[::-1].index(RecordKind.SNAPSHOT) :]
            rows.extend((v, r) for r in records)
        return LogSlice(self.version, rows)

    def append(self, records: Sequence[GroupRecord], *, expected_version: int) -> int:
        if not records:
            raise ValueError("append() needs at least one record")
        self._wait()
        if expected_version != self.version or (
            self._conflict_rate and self._random.random() < self._conflict_rate
        ):
            self.conflicts += 1
            raise AppendConflict(self.uri, expected_version, self.version)
        self._versions.append([stored(r) for r in records])
        self.appends += 1
        return self.version

    def maintain(self, *, now_ms: int | None = None) -> MaintenanceReport:
        n = len(self._versions)
        return MaintenanceReport(self.version, self.version, n, n, now_ms=now_ms or 0)


class InMemoryLeases:
    """Each member's latest renewal, in a dict."""

    def __init__(self) -> None:
        self._renewed: dict[str, int] = {}
        self.renewals = 0
        self.reads = 0

    def renew(self, member_id: str, number: int) -> None:
        self._renewed[member_id] = max(number, self._renewed.get(member_id, number))
        self.renewals += 1

    def read(self) -> Mapping[str, int]:
        self.reads += 1
        return dict(self._renewed)

    def drop(self, member_id: str) -> None:
        self._renewed.pop(member_id, None)
