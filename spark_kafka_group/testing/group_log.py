"""Reading a group's log as a test or a benchmark checks it."""

from __future__ import annotations

from collections.abc import Mapping

from spark_kafka_group.group import GroupRecord
from spark_kafka_group.store import GroupLog, group_log_uri


def group_records(
    store: str, group: str, *, storage_options: Mapping[str, str] | None = None
) -> list[GroupRecord]:
    """Every record of a group's log, in log order."""
    log = GroupLog.open(group_log_uri(store, group), storage_options=storage_options, create=False)
    return [r for _, r in log.read()]
