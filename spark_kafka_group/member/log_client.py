"""The group as seen through its log: fold the Delta group log, decide, append with CAS.

Every writer of the group log (the members, the StreamingQueryListener committing on a
member's behalf, the CLI) goes through :meth:`GroupLogClient.transact`: fold the log up to
its latest version N, let a pure ``decide`` function produce records from the folded state
(through the handlers of :class:`GroupCoordinator`), append them as version N+1, and on a
compare-and-swap conflict fold what the others wrote and decide again (docs/design.md,
"The group log").

The client also keeps replay cheap: a cold start reads from the latest SNAPSHOT record, and
after :data:`SNAPSHOT_EVERY_RECORDS` records a writer adds a new SNAPSHOT; the Delta table is
maintained (compaction, checkpoint, cleanup) every :data:`MAINTAIN_EVERY_VERSIONS` versions by
the group's leader.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from spark_kafka_group.errors import GroupStoreError
from spark_kafka_group.group import GroupConfig, GroupCoordinator, GroupRecord
from spark_kafka_group.group.timer import Clock, SystemClock
from spark_kafka_group.store import AppendConflict, GroupLog, group_log_uri

log = logging.getLogger(__name__)

T = TypeVar("T")

#: A writer appends a SNAPSHOT once this many records were written since the last one.
SNAPSHOT_EVERY_RECORDS = 2_000
#: A writer runs table maintenance when the version crosses a multiple of this.
MAINTAIN_EVERY_VERSIONS = 200
#: Give up an append after this many lost compare-and-swap races in a row.
MAX_CONFLICTS = 50

Decide = Callable[[GroupCoordinator, int], tuple[list[GroupRecord], T]]


class GroupLogClient:
    """One process's view of one group log (thread-safe through the caller's lock)."""

    def __init__(
        self,
        store: str,
        group_id: str,
        *,
        storage_options: Mapping[str, str] | None = None,
        config: GroupConfig | None = None,
        clock: Clock | None = None,
        create: bool = True,
    ) -> None:
        self.group_id = group_id
        self.uri = group_log_uri(store, group_id)
        self.clock: Clock = clock or SystemClock()
        self._config = config or GroupConfig()
        self._log = GroupLog.open(self.uri, storage_options=storage_options, create=create)
        self.coordinator = GroupCoordinator(group_id, self._config)
        self.version = -1
        self._records_since_snapshot = 0
        self._loaded = False
        self._maintained_version = -1
        #: Only one writer of a group should maintain the table: delta-rs does not notice
        #: when two compactions race. Members set this while they lead the group.
        self.maintainer = False

    def fold(self) -> GroupCoordinator:
        """Bring :attr:`coordinator` up to the log's latest version and return it."""
        if not self._loaded:
            piece = self._log.read_slice(from_latest_snapshot=True)
            self.coordinator.load(record for _, record in piece.records)
            self._records_since_snapshot = len(piece.records)
            self._loaded = True
        else:
            piece = self._log.read_slice(after_version=self.version)
            self.coordinator.apply_all(record for _, record in piece.records)
            self._records_since_snapshot += len(piece.records)
        self.version = piece.version
        return self.coordinator

    def transact(self, decide: Decide[T]) -> T:
        """Fold, decide on a fork of the state, append with CAS; retry on conflict.

        ``decide(coordinator, now_ms)`` must be pure apart from the fork it is given: it is
        called again, on fresher state, after every lost race.
        """
        for attempt in range(MAX_CONFLICTS):
            self.fold()
            work = self.coordinator.fork()
            now = self.clock.now_ms()
            records, result = decide(work, now)
            if not records:
                return result
            try:
                version = self._log.append(records, expected_version=self.version)
            except AppendConflict:
                # Someone else wrote first: fold their records and decide again.
                time.sleep(random.uniform(0, 0.005 * (attempt + 1)))
                continue
            self.coordinator.apply_all(records)
            self.version = version
            self._records_since_snapshot += len(records)
            self._housekeeping(now)
            return result
        raise GroupStoreError(
            f"Could not append to the group log {self.uri} after {MAX_CONFLICTS} "
            "compare-and-swap conflicts in a row: too many writers at once. Retry later."
        )

    def _housekeeping(self, now: int) -> None:
        """Snapshot and table maintenance, best effort (the append itself has landed)."""
        try:
            if self._records_since_snapshot >= SNAPSHOT_EVERY_RECORDS:
                snapshot = self.coordinator.snapshot_record(now)
                self.version = self._log.append([snapshot], expected_version=self.version)
                self._records_since_snapshot = 0
            if self.maintainer and self.version - self._maintained_version >= (
                MAINTAIN_EVERY_VERSIONS
            ):
                self._maintained_version = self.version
                report = self._log.maintain(now_ms=now)
                log.debug("group log %s maintained: %s", self.uri, report)
        except AppendConflict:
            pass  # someone else wrote meanwhile; the next writer snapshots
        except GroupStoreError as exc:
            log.warning("group log %s: maintenance skipped: %s", self.uri, exc)

    @property
    def table(self) -> GroupLog:
        return self._log
