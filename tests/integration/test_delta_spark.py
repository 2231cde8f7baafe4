"""The group log read by delta-spark: Spark SQL over the Delta table that the group's members
write with delta-rs, the committed-offsets query of docs/offsets.md as written, and Delta time
travel across the group's maintenance within ``groupLogRetention``. The log is made by real
``format("kafka-group")`` queries on the suite's broker."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from deltalake import DeltaTable

from spark_kafka_group.ops.committed import committed_offsets_table
from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from spark_kafka_group.store import maintenance
from spark_kafka_group.store.codec import REQUIRED_COLUMNS
from spark_kafka_group.store.files import query_table
from spark_kafka_group.store.log import GroupLog
from spark_kafka_group.store.paths import group_log_uri
from spark_kafka_group.testing.waiting import wait_until
from tests.streaming import expected_records, run_available_now, source_options

pytestmark = [pytest.mark.maven_spark, pytest.mark.spark, pytest.mark.broker]

OFFSETS_DOC = Path(__file__).resolve().parents[2] / "docs" / "offsets.md"
#: The log path the documented Spark SQL query names.
DOC_LOG_PATH = "/data/groups/orders"


def documented_spark_sql() -> str:
    """The ```sql block of docs/offsets.md's "In Spark SQL" paragraph, as a user copies it."""
    text = OFFSETS_DOC.read_text(encoding="utf-8")
    start = text.index("**In Spark SQL")
    found = re.compile(r"```sql\n(.*?)```", re.S).search(text, start)
    assert found is not None, f"no ```sql block after 'In Spark SQL' in {OFFSETS_DOC}"
    assert f"delta.`{DOC_LOG_PATH}`" in found.group(1)
    return found.group(1)


def committed_in_log(log: str) -> dict[tuple[str, int], int]:
    """The committed offsets in the log's table, by delta-rs (docs/offsets.md's own engine)."""
    rows = committed_offsets_table(log).to_pylist()
    return {(r["topic"], r["partition"]): r["offset"] for r in rows}


def test_spark_sql_reads_the_group_log_its_committed_offsets_and_time_travels(
    delta_spark, bootstrap_servers: str, topic_name: str, group_store: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    spark = delta_spark
    group = f"g-sql-{uuid.uuid4().hex[:6]}"
    log = group_log_uri(group_store, group)
    create_topic(bootstrap_servers, topic_name, 2)
    first = produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=40)
    options = source_options(
        bootstrap_servers, topic_name, group, group_store, maxOffsetsPerTrigger=30
    )
    checkpoint = str(tmp_path / "checkpoint")
    assert run_available_now(spark, options, checkpoint).records == expected_records(first)
    at_first = {(topic_name, p): n for p, n in first.items()}
    # The table may be a second behind the query (docs/offsets.md, step 3).
    wait_until(lambda: committed_in_log(log) == at_first, 30, f"{at_first} in the table")
    first_version = DeltaTable(log).version()

    # The whole log, read by Spark's Delta reader: delta-rs's table, row for row.
    whole = spark.read.format("delta").load(log)
    assert set(whole.columns) >= REQUIRED_COLUMNS
    rows_by_delta_rs = query_table(DeltaTable(log), "SELECT log_version, seq FROM t")
    assert sorted(tuple(r) for r in whole.select("log_version", "seq").collect()) == sorted(
        zip(*(rows_by_delta_rs[c].to_pylist() for c in ("log_version", "seq")), strict=True)
    )

    # docs/offsets.md's Spark SQL query, as written, with this log's path.
    query = documented_spark_sql().replace(DOC_LOG_PATH, log)
    answer = spark.sql(query).collect()
    assert {(r.topic, r.partition): r.offset for r in answer} == at_first
    assert [r.asDict() for r in answer] == committed_offsets_table(log).to_pylist()

    # More records, a second run: the newest offsets, then the group's maintenance
    # (compaction replaces the files version `first_version` is made of; every small file is
    # compacted here, however few the run left).
    second = produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=25, start=40)
    assert run_available_now(spark, options, checkpoint).records == expected_records(
        second, start=first
    )
    at_second = {(topic_name, p): first[p] + n for p, n in second.items()}
    wait_until(lambda: committed_in_log(log) == at_second, 30, f"{at_second} in the table")
    monkeypatch.setattr(maintenance, "COMPACT_MIN_SMALL_FILES", 2)
    report = GroupLog.open(log, create=False).maintain()
    assert report.files_compacted >= 2 and not report.skipped, report
    assert report.checkpoint_version is not None, report
    assert {(r.topic, r.partition): r.offset for r in spark.sql(query).collect()} == at_second

    # Time travel to the first run's version, through the compaction, checkpoint and log
    # cleanup: the log as it was (its rows are the later log's rows up to that version), and
    # the documented query over it answers the first run's offsets.
    then = spark.read.format("delta").option("versionAsOf", first_version).load(log)
    now = spark.read.format("delta").load(log).where(f"log_version <= {first_version}")
    assert sorted(tuple(r) for r in then.select("log_version", "seq").collect()) == sorted(
        tuple(r) for r in now.select("log_version", "seq").collect()
    )
    as_of = query.replace(f"delta.`{log}`", f"delta.`{log}` VERSION AS OF {first_version}")
    assert {(r.topic, r.partition): r.offset for r in spark.sql(as_of).collect()} == at_first
