"""The group as seen through its log: fold the Delta group log, decide, append with CAS.

Every writer of the group log (the members, the StreamingQueryListener committing on a
member's behalf, the CLI) goes through :meth:`GroupLogClient.transact`: fold the log up to
its latest version N, let a pure ``decide`` function produce records from the folded state
(through the handlers of :class:`GroupCoordinator`), append them as version N+1, and on a
compare-and-swap conflict fold what the others wrote, wait a random backoff and decide again
(docs/design.md, "The group log"). The two halves of a write are public
(:meth:`GroupLogClient.prepare`, :meth:`GroupLogClient.complete`) so that the simulation can
interleave many members' writes with simulated store latency; :meth:`GroupLogClient.transact`
runs them in a loop.

The log is any :class:`~spark_kafka_group.store.log_store.LogStore`: the Delta group log, or
the in-memory log of the simulation and the property tests.

The client also keeps replay cheap: a cold start reads from the latest SNAPSHOT record, and
after :data:`SNAPSHOT_EVERY_RECORDS` records a writer adds a new SNAPSHOT; the Delta table is
maintained (compaction, checkpoint, cleanup) every :data:`MAINTAIN_EVERY_VERSIONS` versions by
the group's leader.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from spark_kafka_group.errors import GroupStoreError
from spark_kafka_group.group import GroupConfig, GroupCoordinator, GroupRecord, RecordKind
from spark_kafka_group.group.clocks import LocalSightings, Watch
from spark_kafka_group.group.timer import Clock, SystemClock
from spark_kafka_group.group.types import CommitObject
from spark_kafka_group.retry import Backoff
from spark_kafka_group.store import AppendConflict, GroupLog, group_log_uri
from spark_kafka_group.store.commit_objects import CommitObjectFiles, CommitObjectStore
from spark_kafka_group.store.leases import LeaseFiles
from spark_kafka_group.store.log_store import LeaseStore, LogStore

log = logging.getLogger(__name__)

T = TypeVar("T")

#: A writer appends a SNAPSHOT once this many records were written since the last one.
SNAPSHOT_EVERY_RECORDS = 2_000
#: A writer runs table maintenance when the version crosses a multiple of this.
MAINTAIN_EVERY_VERSIONS = 200
#: Give up an append after this many lost compare-and-swap races in a row.
MAX_CONFLICTS = 50
#: The backoff after the n-th lost race in a row is uniform in [0, append time * 2**n]:
#: full jitter (writers that collided do not collide again in step), scaled by how long an
#: append takes on this store (a few ms on local disk, tens on an object store).
MAX_BACKOFF_DOUBLINGS = 6
MIN_BACKOFF_BASE_S = 0.005
CONFLICT_BACKOFF = Backoff(
    base_s=MIN_BACKOFF_BASE_S, max_doublings=MAX_BACKOFF_DOUBLINGS, jitter=1.0
)

Decide = Callable[[GroupCoordinator, int], tuple[list[GroupRecord], T]]


@dataclass
class Attempt(Generic[T]):
    """One decision, waiting to be appended on top of ``expected_version``."""

    records: list[GroupRecord]
    result: T
    expected_version: int
    now_ms: int


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
        log: LogStore | None = None,
        leases: LeaseStore | None = None,
        commit_objects: CommitObjectStore | None = None,
        random_seed: int | None = None,
        table_properties: Mapping[str, str] | None = None,
    ) -> None:
        """``log``, ``leases`` and ``commit_objects``: the group log itself, the members'
        leases and their commit objects, instead of the Delta table under ``store`` and the
        files next to it (with ``log`` given, no ``commit_objects`` means commits go to the
        log directly). ``table_properties``: of a log this client creates, and the retention
        its maintenance gives an existing one."""
        self.group_id = group_id
        self.clock: Clock = clock or SystemClock()
        self._config = config or GroupConfig()
        if log is None:
            self.uri = group_log_uri(store, group_id)
            self._log: LogStore = GroupLog.open(
                self.uri,
                storage_options=storage_options,
                create=create,
                table_properties=table_properties,
            )
            leases = LeaseFiles(self.uri, storage_options=storage_options)
            commit_objects = CommitObjectFiles(self.uri, storage_options=storage_options)
        else:
            self.uri = getattr(log, "uri", store)
            self._log = log
        #: The members' leases (None: liveness is in the log's records only).
        self.leases: LeaseStore | None = leases
        #: The members' commit objects (None: members commit to the log directly).
        self.commit_objects: CommitObjectStore | None = commit_objects
        #: A progress listener's newest commit object of each member, as this client wrote
        #: it (the next batch's rewinds are marked against it).
        self.listener_objects: dict[str, CommitObject] = {}
        self._random = random.Random(random_seed)
        #: Seconds one append took lately (the unit of the conflict backoff).
        self.append_s = MIN_BACKOFF_BASE_S
        #: Lost compare-and-swap races (for the benchmarks).
        self.conflicts = 0
        self.appends = 0
        self.coordinator = GroupCoordinator(group_id, self._config)
        #: What this process saw of the group and when, on its monotonic clock: every
        #: decision on time goes through it (see :mod:`spark_kafka_group.group.clocks`).
        self.watch = Watch()
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
            self.coordinator.apply_all(record for _, record in piece.records)
            self._records_since_snapshot = len(piece.records)
            self._loaded = True
        else:
            piece = self._log.read_slice(after_version=self.version)
            # A SNAPSHOT is the state folded up to the version before it (its writer appended
            # it on top of exactly that version), which this fold already holds: parsing it
            # again would cost every member the whole group's size at every snapshot.
            self.coordinator.apply_all(r for _, r in piece.records if r.kind != RecordKind.SNAPSHOT)
            self._records_since_snapshot += len(piece.records)
        self.version = piece.version
        self.watch.saw_log(self.coordinator.group, self.clock.monotonic_ms())
        return self.coordinator

    def read_leases(self) -> Mapping[str, int] | None:
        """Every member's latest lease renewal number (None when the log has no leases),
        noted in :attr:`watch` as seen now."""
        if self.leases is None:
            return None
        numbers = self.leases.read()
        self.watch.saw_leases(numbers, self.clock.monotonic_ms())
        return numbers

    def sightings(self) -> LocalSightings:
        """What this process saw and when, frozen for a decision now (its monotonic clock)."""
        return self.watch.sightings(self.clock.monotonic_ms())

    def prepare(self, decide: Decide[T], *, fold: bool = True) -> Attempt[T]:
        """Fold (unless the caller just did), and let ``decide(coordinator, now_ms)`` decide
        on a fork of the state.

        ``decide`` must be pure apart from the fork it is given: after a lost race it is
        called again, on fresher state.
        """
        if fold:
            self.fold()
        now = self.clock.now_ms()
        records, result = decide(self.coordinator.fork(), now)
        return Attempt(records, result, self.version, now)

    def complete(self, attempt: Attempt[T]) -> bool:
        """Append the attempt's records; False if another writer got that version first."""
        started_ms = self.clock.monotonic_ms()
        try:
            version = self._log.append(attempt.records, expected_version=attempt.expected_version)
        except AppendConflict:
            self.conflicts += 1
            return False
        took_s = max(self.clock.monotonic_ms() - started_ms, 0) / 1000
        self.append_s = 0.8 * self.append_s + 0.2 * took_s
        self.appends += 1
        self.coordinator.apply_all(attempt.records)
        self.version = version
        self.watch.saw_log(self.coordinator.group, self.clock.monotonic_ms())
        self._records_since_snapshot += len(attempt.records)
        self._housekeeping(attempt.now_ms)
        return True

    def backoff_s(self, conflicts_in_a_row: int, *, append_s: float | None = None) -> float:
        """How long to wait before deciding again after ``conflicts_in_a_row`` lost races."""
        base = max(self.append_s if append_s is None else append_s, MIN_BACKOFF_BASE_S)
        return CONFLICT_BACKOFF.with_base(base).delay_s(conflicts_in_a_row, self._random)

    def transact(self, decide: Decide[T]) -> T:
        """Fold, decide on a fork of the state, append with CAS; on a conflict back off and
        decide again on the newer state."""
        return self.retry(lambda: self.prepare(decide), self.complete).result

    def retry(
        self, prepare: Callable[[], Attempt[T]], complete: Callable[[Attempt[T]], bool]
    ) -> Attempt[T]:
        """Prepare and complete an attempt until it lands (or has nothing to write)."""
        for lost in range(MAX_CONFLICTS):
            attempt = prepare()
            if not attempt.records or complete(attempt):
                return attempt
            self.clock.sleep(self.backoff_s(lost + 1))
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
        """The Delta group log (for maintenance and inspection)."""
        if not isinstance(self._log, GroupLog):
            raise TypeError(f"{self.uri} is not a Delta group log")
        return self._log

    @property
    def log(self) -> LogStore:
        return self._log
