"""jobs/kafka_to_delta.py on the shared Spark session, a real broker and a real Delta table:
every produced record exactly once, also after a crash that makes Spark replay a batch."""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path

import pytest

from spark_kafka_group.sample_data import create_topic, produce_sample

JOBS = Path(__file__).resolve().parents[2] / "jobs"


def _load_job():
    spec = importlib.util.spec_from_file_location("kafka_to_delta", JOBS / "kafka_to_delta.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.broker
@pytest.mark.spark
def test_kafka_to_delta_exactly_once_across_a_crash_and_restart(
    spark, bootstrap_servers: str, topic_name: str, group_store: str, tmp_path, capsys
) -> None:
    job = _load_job()
    create_topic(bootstrap_servers, topic_name, 2)
    produced = produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=60)
    total = sum(produced.values())
    table, checkpoint = str(tmp_path / "table"), str(tmp_path / "checkpoint")
    args = [
        "--bootstrap-servers", bootstrap_servers,
        "--topic", topic_name,
        "--group-id", f"ingest-{uuid.uuid4().hex[:6]}",
        "--group-store", group_store,
        "--table", table,
        "--checkpoint", checkpoint,
        "--max-offsets-per-trigger", "50",
        "--option", "heartbeatIntervalMs=500",
        "--option", "sessionTimeoutMs=6000",
    ]  # fmt: skip

    # Crash right after batch 1 reached the table, before Spark recorded it as done.
    assert job.main([*args, "--fail-after-batch", "1"], spark=spark) == 1
    first = capsys.readouterr().out
    assert "Sink: delta-rs in foreachBatch" in first
    partial = job.table_rows(table).num_rows
    assert 0 < partial < total

    # The restart replays batch 1 (skipped: the table has it), then reads the rest.
    assert job.main(args, spark=spark) == 0
    second = capsys.readouterr().out
    assert "batch 1: already in the table" in second
    rows = job.table_rows(table)
    keys = list(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist(), strict=True))
    assert len(keys) == total
    assert sorted(keys) == sorted((p, o) for p, n in produced.items() for o in range(n))

    # Nothing new: a third run writes nothing.
    assert job.main(args, spark=spark) == 0
    assert job.table_rows(table).num_rows == total
