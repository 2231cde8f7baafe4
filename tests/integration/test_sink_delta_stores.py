"""The exactly-once Delta writer on the object stores a group's table lives on in production
(S3 through SeaweedFS, Azure Blob through Azurite): the table is the fence there too. Its
commits conflict through the store's conditional put, so an old owner resumed after its
partition moved fails, and writers racing on one partition land each offset once
(tests/unit/test_sink_delta.py has the same on disk)."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from spark_kafka_group import ExactlyOnceDeltaWriter
from spark_kafka_group.errors import PartitionMovedError
from tests.unit.test_sink_delta import landed_offsets, race_writers, rows


@pytest.mark.parametrize("any_store", ["s3", "az"], indirect=True)
def test_the_writer_fences_a_resumed_owner_and_racing_writers_on_the_store(any_store) -> None:
    root, options = any_store
    uri = f"{root}/events"

    def writer() -> ExactlyOnceDeltaWriter:
        return ExactlyOnceDeltaWriter(uri, group="ingest", storage_options=options)

    old = writer()
    old.write(rows(0, 0, 10), 7)
    writer().write(rows(0, 10, 20), 0)  # the new owner, after the partition moved
    with pytest.raises(PartitionMovedError, match="the table's now ends at 20"):
        old.write(rows(0, 10, 16), 8)
    assert landed_offsets(uri, 0, options) == list(range(20))

    race_writers(writer, partition=1, rounds=4)
    end = DeltaTable(uri, storage_options=options).transaction_version(
        "kafka-group/ingest/events/1"
    )
    assert end is not None
    assert landed_offsets(uri, 1, options) == list(range(end))
