"""The I/O of :mod:`spark_kafka_group.sink.takeover` for queries that write through Spark's own
Delta sink with the ``deltaSinkTable`` option: the reader's plans, the listener's completed
batches, and at a takeover the table's transactions (docs/design.md, "Exactly once into Delta
across the group").
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from spark_kafka_group.group.metadata import TopicPartition, partition_name
from spark_kafka_group.sink.takeover import (
    PLANS_KEPT,
    CompletedBatch,
    Found,
    PlannedBatch,
    Superseded,
    Unresolved,
    landed_ranges,
    spent,
    take_over,
)
from spark_kafka_group.store.paths import group_log_uri
from spark_kafka_group.store.sink_batches import SinkBatchFiles

if TYPE_CHECKING:
    from deltalake import DeltaTable

log = logging.getLogger(__name__)


class SinkBatches:
    """One reader's side: its plans, written before Spark runs each batch, and the positions
    of partitions it takes over, moved past what their previous owners' queries landed."""

    def __init__(
        self,
        table: str,
        *,
        store: str,
        group_id: str,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        self.table = table
        self._storage_options = dict(storage_options or {})
        self._log_uri = group_log_uri(store, group_id)
        self._opened: SinkBatchFiles | None = None
        self._member = ""
        self._plans: deque[PlannedBatch] = deque(maxlen=PLANS_KEPT)
        self._written = 0

    @property
    def _files(self) -> SinkBatchFiles:
        """Opened at first use: the group log's directory exists once the member joined."""
        if self._opened is None:
            self._opened = SinkBatchFiles(self._log_uri, storage_options=self._storage_options)
        return self._opened

    def record(self, plan: PlannedBatch) -> None:
        """Write ``plan`` (with the member's newest earlier ones) before Spark runs it."""
        if plan.end.member != self._member:
            self._member, self._plans = plan.end.member, deque(maxlen=PLANS_KEPT)
        self._plans.append(plan)
        self._written += 1
        self._files.put_plans(self._member, self._written, list(self._plans))

    def found_in_others(self, me: str) -> dict[str, Found]:
        """Per other member with a completed batch: what its query landed past that batch,
        or why that is not known (superseded by a later incarnation, unresolved)."""
        found: dict[str, Found] = {}
        table = None
        others = self._files.read_all(except_member=me)
        # A query restarted on its checkpoint goes on under a new member. Its batches are one
        # chain: read from its newest completed batch, through the plans of every member's
        # files (it first runs again the last batch its previous member planned, which the
        # listener records complete under that member, since the batch's end names it; the
        # plans after it are the new member's).
        plans = [plan for batches in others.values() for plan in batches.plans]
        newest: dict[str, int] = {}
        for batches in others.values():
            if batches.completed is not None:
                query, batch_id = batches.completed.query_id, batches.completed.batch_id
                newest[query] = max(newest.get(query, batch_id), batch_id)
        for member, batches in sorted(others.items()):
            completed = batches.completed
            if completed is None:
                if batches.plans:
                    log.info("member %s: no batch it planned completed yet; its plans count "
                             "only where they continue another member's completed batch",
                             member)  # fmt: skip
                continue
            if completed.batch_id < newest[completed.query_id]:
                found[member] = Superseded(completed.query_id)
                continue
            if table is None:
                table = self._open_table()
            version = None if table is None else table.transaction_version(completed.query_id)
            ranges = landed_ranges(completed, plans, version)
            if isinstance(ranges, Unresolved):
                log.warning("member %s: what its query landed in %s is not known: %s; a "
                            "partition it held starts at the group's committed offset",
                            member, self.table, ranges.reason)  # fmt: skip
            found[member] = ranges
        return found

    def positions(
        self,
        me: str,
        positions: Mapping[TopicPartition, int],
        *,
        committed: Mapping[TopicPartition, int],
        members: Collection[str],
    ) -> dict[TopicPartition, int]:
        """``positions`` of partitions new to member ``me``, moved past what others landed;
        then the files of members gone from the group (``members``) that no later owner needs
        (given the group's ``committed`` offsets) are deleted."""
        if not positions:
            return dict(positions)
        found = self.found_in_others(me)
        moved = take_over(positions, [r for r in found.values() if isinstance(r, Mapping)])
        for tp in sorted(positions):
            if moved[tp] != positions[tp]:
                log.info("%s starts at %d, not %d: its previous owner's query landed [%d, %d) "
                         "in %s", partition_name(*tp), moved[tp], positions[tp], positions[tp],
                         moved[tp], self.table)  # fmt: skip
        gone = sorted(spent(found, committed, members))
        if gone:
            self._files.drop(*gone)
            log.info("deleted the batch files of %d member(s) gone from the group, whose "
                     "landed records the group has committed: %s", len(gone),
                     ", ".join(gone))  # fmt: skip
        return moved

    def _open_table(self) -> DeltaTable | None:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            return DeltaTable(self.table, storage_options=self._storage_options or None)
        except TableNotFoundError:
            return None


def record_completed(
    store: str,
    group_id: str,
    member_id: str,
    completed: CompletedBatch,
    *,
    storage_options: Mapping[str, str] | None,
    files: dict[tuple[str, str], SinkBatchFiles] | None = None,
) -> None:
    """The progress listener's record of a completed batch (``files``: open ones to reuse)."""
    key = (store, group_id)
    cache = files if files is not None else {}
    handle = cache.get(key)
    if handle is None:
        handle = cache[key] = SinkBatchFiles(
            group_log_uri(store, group_id), storage_options=storage_options
        )
    handle.put_completed(member_id, completed)
