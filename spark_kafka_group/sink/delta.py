"""Exactly once into a Delta table across a whole group, through ``foreachBatch``.

``ExactlyOnceDeltaWriter(table_uri, group=...)`` is the function to give
``writeStream.foreachBatch``. Each batch's rows and, per Kafka partition, the end offset it
wrote (a Delta application transaction, ``sink/landed.py``) land in one Delta commit, made with
delta-rs through the same ``DeltaTable`` handle the writer read the offsets from. Rows the table
already holds are dropped (logged); two writers racing on one partition conflict in Delta's
commit check, so a member whose partitions moved while it was paused (a zombie) cannot land
what the new owner writes: its commit fails with :class:`PartitionMovedError`. The table is
never scanned: the offsets come from its log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from spark_kafka_group.errors import DeltaSinkError, PartitionMovedError
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.sink.landed import (
    Decision,
    Span,
    app_id,
    decide,
    group_marker,
    moved_away,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

#: The source's columns the writer needs (``format("kafka-group")`` has them).
KEY_COLUMNS = {"topic": pa.string(), "partition": pa.int32(), "offset": pa.int64()}
#: Commit attempts of one batch: a retry follows only a race the writer can resolve by reading
#: the table again (a new owner's first commit racing a previous owner's last).
MAX_ATTEMPTS = 5


class ExactlyOnceDeltaWriter:
    """Write each batch of a ``kafka-group`` query into the Delta table at ``table_uri``,
    every record exactly once across the group's members, restarts and partition moves.

    Use: ``df.writeStream.foreachBatch(ExactlyOnceDeltaWriter(uri, group="ingest")).start()``.

    ``group``: the query's ``groupId``. ``storage_options``: delta-rs storage options of the
    table. ``transform``: applied to each batch's Arrow table after the rows already written
    are dropped (select, rename or add columns; the table's schema is what it returns).
    ``adopt_table``: accept a table that already has rows not written by this writer for this
    group; they are kept, and not recognised as records of the group's partitions.
    """

    def __init__(
        self,
        table_uri: str,
        *,
        group: str,
        storage_options: Mapping[str, str] | None = None,
        transform: Callable[[pa.Table], pa.Table] | None = None,
        adopt_table: bool = False,
    ) -> None:
        if not group:
            raise DeltaSinkError(
                "ExactlyOnceDeltaWriter needs the query's groupId as group=..., e.g. "
                "ExactlyOnceDeltaWriter(uri, group='orders-ingest')."
            )
        self.table_uri = table_uri
        self.group = group
        self._storage_options = dict(storage_options) if storage_options else None
        self._transform = transform
        self._adopt = adopt_table
        self._table: DeltaTable | None = None
        self._marked = False  # the table has the group's marker (it never loses it)
        # The versions of this writer's last commit: the partitions it owns as far as it knows.
        self._mine: dict[TopicPartition, int] = {}

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        """``foreachBatch``'s function: the batch's rows come to the driver as Arrow."""
        self.write(batch_df.toArrow(), batch_id)

    def write(self, rows: pa.Table, batch_id: int | None = None) -> Decision | None:
        """Write what the table does not hold yet of ``rows`` in one commit; the decision made
        (None for no rows)."""
        spans = offset_spans(rows, self.table_uri)
        if not spans:
            return None
        for attempt in range(1, MAX_ATTEMPTS + 1):
            table = self._table if self._table is not None else self._load()
            decision = decide(spans, self._landed(table, spans))
            if not decision.versions:
                self._log_dropped(decision, batch_id)
                return decision
            try:
                self._commit(table, keep(rows, decision), decision)
            except (CommitFailedError, _TableCreatedMeanwhile) as exc:
                log.info(
                    "Delta table %s: batch %s lost a commit race (attempt %d): %s",
                    self.table_uri,
                    batch_id,
                    attempt,
                    exc,
                )
                self._after_conflict(spans, batch_id)
                continue
            self._mine = dict(decision.versions)
            self._marked = True
            self._log_dropped(decision, batch_id)
            return decision
        raise DeltaSinkError(
            f"Batch {batch_id} could not be committed to the Delta table {self.table_uri} in "
            f"{MAX_ATTEMPTS} attempts: other writers committed in between every time. Nothing "
            "of it was written; restarting the query retries it."
        )

    def _load(self) -> DeltaTable | None:
        try:
            table = DeltaTable(self.table_uri, storage_options=self._storage_options)
        except TableNotFoundError:
            return None
        self._table = table
        return table

    def _landed(
        self, table: DeltaTable | None, spans: Mapping[TopicPartition, Span]
    ) -> dict[TopicPartition, int]:
        """The table's end offset per partition of the batch: this writer's own last commit
        where it has one, else the table's log (a version read on a handle older than another
        writer's commit is caught by the commit's conflict check)."""
        landed: dict[TopicPartition, int] = {}
        for tp in spans:
            end = self._mine.get(tp)
            if end is None:
                end = self._table_version(table, tp)
            if end is not None:
                landed[tp] = end
        return landed

    def _commit(self, table: DeltaTable | None, data: pa.Table, decision: Decision) -> None:
        if self._transform is not None:
            data = self._transform(data)
        transactions = [
            Transaction(app_id(self.group, tp), version)
            for tp, version in sorted(decision.versions.items())
        ]
        if not self._marked and (
            table is None or table.transaction_version(group_marker(self.group)) is None
        ):
            self._check_adoptable(table)
            transactions.append(Transaction(group_marker(self.group), 0))
        properties = CommitProperties(app_transactions=transactions)
        if table is not None:
            # Through the handle the versions were read from: Delta checks every commit made
            # since against the partitions' transactions (a table URI would read the latest
            # version and check nothing).
            write_deltalake(table, data, mode="append", commit_properties=properties)
            return
        try:
            # Create only ("error" if it exists): an append by URI to a table another writer
            # created meanwhile would skip the conflict check.
            write_deltalake(
                self.table_uri,
                data,
                mode="error",
                storage_options=self._storage_options,
                commit_properties=properties,
            )
        except DeltaError as exc:
            if self._load() is not None:  # another writer created it first
                raise _TableCreatedMeanwhile(str(exc)) from exc
            raise
        self._load()

    def _check_adoptable(self, table: DeltaTable | None) -> None:
        if table is None or self._adopt or not table.file_uris():
            return
        raise DeltaSinkError(
            f"The Delta table {self.table_uri} already has rows that ExactlyOnceDeltaWriter "
            f"did not write for group {self.group!r}: it cannot tell which records of the "
            "group's partitions they hold, so it would write them again. Write to a new table, "
            "or pass adopt_table=True to keep those rows and start recording the group's "
            "offsets now."
        )

    def _after_conflict(self, spans: Mapping[TopicPartition, Span], batch_id: int | None) -> None:
        """Another writer committed one of the batch's partitions (or created the table):
        read the table again. A partition this writer wrote last that someone else wrote
        since has moved to another member: this writer must not write it."""
        table = self._load()
        mine = {tp: end for tp, end in self._mine.items() if tp in spans}
        now = {tp: self._table_version(table, tp) for tp in mine}
        moved = moved_away(mine, now)
        if moved:
            self._mine = {}
            raise PartitionMovedError(_moved_message(self.table_uri, self.group, batch_id, moved))

    def _table_version(self, table: DeltaTable | None, tp: TopicPartition) -> int | None:
        return None if table is None else table.transaction_version(app_id(self.group, tp))

    def _log_dropped(self, decision: Decision, batch_id: int | None) -> None:
        for tp, span in sorted(decision.dropped.items()):
            log.warning(
                "Delta table %s already holds partition %s offsets %d to %d of batch %s "
                "(written by a previous owner or an earlier run of this batch): not written "
                "again",
                self.table_uri,
                tp,
                span.first,
                span.end - 1,
                batch_id,
            )


class _TableCreatedMeanwhile(Exception):
    """Another writer created the table between this writer's look and its create: read it
    and try again (internal, never leaves the module)."""


def offset_spans(rows: pa.Table, table_uri: str) -> dict[TopicPartition, Span]:
    """Per partition of ``rows``, its lowest offset and one past its highest."""
    missing = [name for name in KEY_COLUMNS if name not in rows.column_names]
    if missing:
        raise DeltaSinkError(
            f"The batch written to {table_uri} has no column {', '.join(missing)} (it has "
            f"{', '.join(rows.column_names) or 'none'}). ExactlyOnceDeltaWriter needs the "
            "kafka-group source's topic, partition and offset columns to know what each "
            "partition has written: keep them in the DataFrame given to foreachBatch, and "
            "select or drop columns with transform=... instead."
        )
    key = rows.select(list(KEY_COLUMNS))
    nulls = [name for name in KEY_COLUMNS if key.column(name).null_count]
    if nulls:
        raise DeltaSinkError(
            f"The batch written to {table_uri} has null values in {', '.join(nulls)}: "
            "ExactlyOnceDeltaWriter needs every row's topic, partition and offset as the "
            "kafka-group source gives them."
        )
    grouped = key.group_by(["topic", "partition"]).aggregate([("offset", "min"), ("offset", "max")])
    return {
        TopicPartition(str(topic), int(partition)): Span(int(low), int(high) + 1)
        for topic, partition, low, high in zip(
            grouped.column("topic").to_pylist(),
            grouped.column("partition").to_pylist(),
            grouped.column("offset_min").to_pylist(),
            grouped.column("offset_max").to_pylist(),
            strict=True,
        )
    }


def keep(rows: pa.Table, decision: Decision) -> pa.Table:
    """The rows at or above the decision's first offset to keep of their partition."""
    if not decision.dropped:
        return rows
    mask = None
    for tp, first in decision.keep_from.items():
        match = pc.and_(
            pc.and_(pc.equal(rows["topic"], tp.topic), pc.equal(rows["partition"], tp.partition)),
            pc.greater_equal(rows["offset"], first),
        )
        mask = match if mask is None else pc.or_(mask, match)
    return rows.filter(mask) if mask is not None else rows.slice(0, 0)


def _moved_message(
    table_uri: str,
    group: str,
    batch_id: int | None,
    moved: Mapping[TopicPartition, tuple[int, int | None]],
) -> str:
    detail = "; ".join(
        f"{tp}: this query's last write ended at offset {mine}, the table's now ends at {now}"
        for tp, (mine, now) in sorted(moved.items())
    )
    return (
        f"Batch {batch_id} was not written to the Delta table {table_uri}: another member of "
        f"group {group!r} wrote partitions this query wrote last ({detail}). They were "
        "reassigned while this query was not heard from (paused or cut off past the session "
        "timeout), and belong to that member now. Restart the query: it rejoins the group and "
        "writes the partitions it is given, without duplicates."
    )
