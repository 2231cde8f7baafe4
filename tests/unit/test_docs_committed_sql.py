"""The committed-offsets query has one definition (spark_kafka_group.ops.committed): the SQL
that docs/offsets.md shows for delta-rs and for Spark SQL is that definition's text, and the
Databricks notebook runs it rather than a query of its own."""

from __future__ import annotations

from spark_kafka_group.ops.committed import (
    COMMITTED_OFFSETS_SQL,
    committed_offsets_spark_sql,
    committed_offsets_sql,
)
from tests.docs_blocks import ROOT, blocks

OFFSETS_PAGE = ROOT / "docs" / "offsets.md"
NOTEBOOK = ROOT / "jobs" / "databricks_notebook.py"


def test_the_offsets_page_shows_the_code_s_queries() -> None:
    shown = [b.code.strip() for b in blocks(OFFSETS_PAGE) if b.lang == "sql"]
    assert shown == [
        COMMITTED_OFFSETS_SQL.strip(),
        committed_offsets_spark_sql("/data/groups/orders").strip(),
    ]


def test_the_spark_query_quotes_names_with_backticks() -> None:
    spark = committed_offsets_spark_sql("/x")
    assert '"' not in spark and "`partition`" in spark and "FROM delta.`/x`" in spark
    assert committed_offsets_sql("t") == COMMITTED_OFFSETS_SQL.replace("group_log", "t")


def test_the_notebook_runs_the_one_definition() -> None:
    source = NOTEBOOK.read_text(encoding="utf-8")
    assert "committed_offsets_spark_sql(" in source
    assert "WHERE kind = 'COMMIT'" not in source, "a committed-offsets query of its own"
    assert "HEARTBEAT" not in source, "HEARTBEAT records are not written with leases"
