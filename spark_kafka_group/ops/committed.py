"""A group's committed offsets with one SQL query over its group log (a Delta table).

The log is append-only and holds only accepted records (every append is decided on the folded
state and lands by compare-and-swap), so a partition's committed offset is its newest COMMIT
row since the group was last deleted, unless an OFFSET_DELETE row of the partition
(``kafka-group delete-offsets``) came after it. The same query runs in Spark SQL where Delta is
available (``FROM delta.`<group log path>```) and locally inside delta-rs
(:func:`committed_offsets_table`); ``docs/offsets.md`` shows both. Commits that members have
recorded but the group has not folded into the log yet (at most about a second old) are not
in the table: ``kafka-group describe`` shows those too.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from spark_kafka_group.group.kinds import RecordKind


def committed_offsets_sql(table: str = "group_log", *, quote: str = '"') -> str:
    """The query over the group log named ``table``: the one definition that docs/offsets.md
    shows and the Databricks notebook runs (a unit test compares them). ``quote`` quotes the
    names ``partition`` and ``offset``: a double quote for delta-rs (DataFusion), a backtick
    for Spark SQL, where a double-quoted name is a string literal. The record kinds are
    spelled as the log stores them."""
    partition, offset = f"{quote}partition{quote}", f"{quote}offset{quote}"
    return f"""
SELECT topic, {partition}, {offset}, member_id, generation, timestamp_ms
FROM (
  SELECT *, ROW_NUMBER() OVER (
    PARTITION BY topic, {partition} ORDER BY log_version DESC, seq DESC) AS newest
  FROM {table}
  WHERE kind IN ('{RecordKind.COMMIT.value}', '{RecordKind.OFFSET_DELETE.value}')
    AND log_version > (SELECT COALESCE(MAX(log_version), -1) FROM {table}
                       WHERE kind = '{RecordKind.DELETE.value}')
) AS commits
WHERE newest = 1 AND kind = '{RecordKind.COMMIT.value}'
ORDER BY topic, {partition}
"""


def committed_offsets_spark_sql(group_log_path: str) -> str:
    """:func:`committed_offsets_sql` for Spark SQL with Delta, over the log at its path."""
    return committed_offsets_sql(f"delta.`{group_log_path}`", quote="`")


#: The query over the group log registered as ``group_log``, for delta-rs.
COMMITTED_OFFSETS_SQL = committed_offsets_sql()


def committed_offsets_table(
    uri: str, *, storage_options: Mapping[str, str] | None = None
) -> pa.Table:
    """Run :data:`COMMITTED_OFFSETS_SQL` over the group log at ``uri`` with delta-rs."""
    from deltalake import DeltaTable

    from spark_kafka_group.store.files import query_table

    table = DeltaTable(uri, storage_options=dict(storage_options or {}))
    return query_table(table, COMMITTED_OFFSETS_SQL, name="group_log")
