"""The exactly-once Delta writer (spark_kafka_group/sink/delta.py) against real delta-rs tables
on disk: one commit per batch with its partitions' transactions, rows already landed dropped,
clear errors, and writers racing on one partition (an old owner resumed after its partitions
moved, a new owner, a table being created) never land an offset twice."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

from spark_kafka_group import ExactlyOnceDeltaWriter
from spark_kafka_group.errors import DeltaSinkError, PartitionMovedError
from spark_kafka_group.fetcher.schema import arrow_schema


def rows(partition: int, first: int, end: int, topic: str = "events") -> pa.Table:
    """Rows as the kafka-group source has them (its schema), offsets [first, end)."""
    n = end - first
    columns = {
        "key": pa.array([None] * n, pa.binary()),
        "value": pa.array([b"v" * 100] * n, pa.binary()),
        "topic": pa.array([topic] * n, pa.string()),
        "partition": pa.array([partition] * n, pa.int32()),
        "offset": pa.array(range(first, end), pa.int64()),
        "timestamp": pa.array([0] * n, pa.timestamp("us", tz="UTC")),
        "timestampType": pa.array([0] * n, pa.int32()),
    }
    return pa.table(columns, schema=arrow_schema(False))


def landed_offsets(uri: str, partition: int, options: dict[str, str] | None = None) -> list[int]:
    table = DeltaTable(uri, storage_options=options).to_pyarrow_table(
        columns=["partition", "offset"]
    )
    mine = table.filter(pc.equal(table["partition"], partition))
    return sorted(mine["offset"].to_pylist())


@pytest.fixture
def uri(tmp_path: Path) -> str:
    return str(tmp_path / "events")


def test_a_batch_lands_with_its_partitions_transactions_in_one_commit(uri: str) -> None:
    writer = ExactlyOnceDeltaWriter(uri, group="ingest")
    writer.write(pa.concat_tables([rows(0, 0, 10), rows(1, 5, 8)]), 0)
    table = DeltaTable(uri)
    assert table.version() == 0
    assert table.transaction_version("kafka-group/ingest/events/0") == 10
    assert table.transaction_version("kafka-group/ingest/events/1") == 8
    assert landed_offsets(uri, 0) == list(range(10)) and landed_offsets(uri, 1) == [5, 6, 7]


def test_a_batch_written_again_lands_nothing_new(uri: str) -> None:
    """A restarted query re-runs its last batch (same offsets): nothing of it is written twice,
    also by a new writer (a new process) that knows the table only from its log."""
    ExactlyOnceDeltaWriter(uri, group="ingest").write(rows(0, 0, 10), 3)
    again = ExactlyOnceDeltaWriter(uri, group="ingest")
    decision = again.write(rows(0, 0, 10), 3)
    assert decision is not None and decision.versions == {}
    assert DeltaTable(uri).version() == 0  # no commit at all
    again.write(rows(0, 5, 15), 4)
    assert landed_offsets(uri, 0) == list(range(15))


def test_rows_dropped_are_logged_with_their_partition_and_range(
    uri: str, caplog: pytest.LogCaptureFixture
) -> None:
    ExactlyOnceDeltaWriter(uri, group="ingest").write(rows(0, 0, 10), 0)
    with caplog.at_level("WARNING", logger="spark_kafka_group.sink.delta"):
        ExactlyOnceDeltaWriter(uri, group="ingest").write(rows(0, 4, 12), 9)
    [message] = [r.getMessage() for r in caplog.records]
    assert "partition events-0 offsets 4 to 9 of batch 9" in message, message


def test_two_groups_record_their_offsets_apart(uri: str) -> None:
    ExactlyOnceDeltaWriter(uri, group="a").write(rows(0, 0, 10), 0)
    ExactlyOnceDeltaWriter(uri, group="b", adopt_table=True).write(rows(0, 0, 4), 0)
    table = DeltaTable(uri)
    assert table.transaction_version("kafka-group/a/events/0") == 10
    assert table.transaction_version("kafka-group/b/events/0") == 4


def test_rows_without_the_source_columns_get_an_error_naming_them(uri: str) -> None:
    writer = ExactlyOnceDeltaWriter(uri, group="ingest")
    with pytest.raises(DeltaSinkError, match=r"no column partition, offset .*transform="):
        writer.write(rows(0, 0, 3).select(["value", "topic"]), 0)
    with pytest.raises(DeltaSinkError, match="null values in offset"):
        writer.write(rows(0, 0, 3).set_column(4, "offset", pa.array([1, None, 2], pa.int64())))
    assert not Path(uri).exists()


def test_a_table_with_rows_it_did_not_write_is_refused_unless_adopted(uri: str) -> None:
    write_deltalake(uri, rows(0, 0, 5))  # e.g. Spark's Delta sink, before the writer
    with pytest.raises(DeltaSinkError, match=r"already has rows .*adopt_table=True"):
        ExactlyOnceDeltaWriter(uri, group="ingest").write(rows(0, 5, 10), 0)
    ExactlyOnceDeltaWriter(uri, group="ingest", adopt_table=True).write(rows(0, 5, 10), 0)
    # adopted once: every later writer of the group sees the group's marker
    ExactlyOnceDeltaWriter(uri, group="ingest").write(rows(0, 5, 12), 1)
    assert landed_offsets(uri, 0) == list(range(12))


def test_an_empty_batch_writes_nothing(uri: str) -> None:
    assert ExactlyOnceDeltaWriter(uri, group="ingest").write(rows(0, 0, 0), 0) is None
    assert not Path(uri).exists()


def test_transform_shapes_the_rows_after_the_drop(uri: str) -> None:
    writer = ExactlyOnceDeltaWriter(
        uri, group="ingest", transform=lambda t: t.select(["partition", "offset", "value"])
    )
    writer.write(rows(0, 0, 5), 0)
    writer.write(rows(0, 3, 8), 1)
    assert DeltaTable(uri).schema().to_arrow().names == ["partition", "offset", "value"]
    assert landed_offsets(uri, 0) == list(range(8))


def test_a_zombie_resumed_after_its_partition_moved_fails_and_lands_nothing(uri: str) -> None:
    """The old owner wrote partition 0 up to 10, was paused; the new owner (another process)
    wrote 10-20; the old owner resumes with the batch it had: its commit conflicts on the
    partition's transaction and the query fails with an error that says so."""
    old = ExactlyOnceDeltaWriter(uri, group="ingest")
    old.write(rows(0, 0, 10), 7)
    ExactlyOnceDeltaWriter(uri, group="ingest").write(rows(0, 10, 20), 0)
    moved = r"events-0: this query's last write ended at offset 10, the table's now ends at 20"
    with pytest.raises(PartitionMovedError, match=moved):
        old.write(rows(0, 10, 16), 8)
    assert landed_offsets(uri, 0) == list(range(20))


def test_a_new_owner_racing_the_old_owners_last_commit_drops_what_it_landed(uri: str) -> None:
    """The old owner's last commit lands between the new owner's read and its commit: the new
    owner's commit conflicts, it reads the table again and writes only what is left."""
    old = ExactlyOnceDeltaWriter(uri, group="ingest")
    old.write(rows(0, 0, 10), 0)
    new = ExactlyOnceDeltaWriter(uri, group="ingest")
    new.write(rows(1, 0, 3), 0)  # its handle now predates the old owner's next commit
    old.write(rows(0, 10, 15), 1)
    decision = new.write(rows(0, 10, 20), 1)
    assert decision is not None and decision.keep_from == {("events", 0): 15}
    assert landed_offsets(uri, 0) == list(range(20))


def test_a_writer_that_found_no_table_reads_the_one_created_meanwhile(uri: str) -> None:
    """Two writers of one partition both find no table: the second's create fails, it reads
    the first's table and writes only what is left, through the table's conflict check."""
    first = ExactlyOnceDeltaWriter(uri, group="ingest")
    second = ExactlyOnceDeltaWriter(uri, group="ingest")
    look = second._load
    looks = []

    def look_then_race() -> DeltaTable | None:
        found = look()
        looks.append(found)
        if len(looks) == 1:  # no table yet; the first writer creates it right after
            first.write(rows(0, 0, 10), 0)
        return found

    second._load = look_then_race  # type: ignore[method-assign]
    decision = second.write(rows(0, 5, 12), 0)
    assert looks[0] is None and looks[1] is not None
    assert decision is not None and decision.keep_from == {("events", 0): 10}
    assert landed_offsets(uri, 0) == list(range(12))


def test_writers_racing_on_one_partition_land_each_offset_once(uri: str) -> None:
    """Threads with their own writer, each writing overlapping ranges of partition 0 at the
    same moments: every offset lands once; a writer that finds its partition written by
    another since its own last commit fails with PartitionMovedError, never lands twice."""
    ExactlyOnceDeltaWriter(uri, group="ingest").write(rows(0, 0, 1), 0)
    race_writers(lambda: ExactlyOnceDeltaWriter(uri, group="ingest"), partition=0, rounds=6)
    end = DeltaTable(uri).transaction_version("kafka-group/ingest/events/0")
    assert landed_offsets(uri, 0) == list(range(end or 0))


def race_writers(
    make_writer: Callable[[], ExactlyOnceDeltaWriter], *, partition: int, rounds: int
) -> None:
    """Three threads, each with its own writer from ``make_writer``, write overlapping ranges
    of ``partition`` at the same moments, round after round; a writer that lost its partition
    is replaced, as a restarted query. At least one must lose it, and nothing else may fail."""
    writers = 3
    barrier = threading.Barrier(writers)
    moved: list[PartitionMovedError] = []
    failures: list[BaseException] = []

    def run(index: int) -> None:
        writer = make_writer()
        for round_ in range(rounds):
            barrier.wait()
            try:
                # the longest range changes hands each round: every writer lands some rounds
                longer = 3 * ((index + round_) % writers)
                writer.write(rows(partition, round_ * 10, round_ * 10 + 10 + longer), round_)
            except PartitionMovedError as exc:
                moved.append(exc)
                writer = make_writer()
            except BaseException as exc:
                failures.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    assert moved, "no writer lost a partition it wrote last: the race did not happen"
