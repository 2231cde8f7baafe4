"""The group log store: one append-only Delta table per consumer group (see :mod:`.log`)."""

from spark_kafka_group.store.log import (
    DEFAULT_TABLE_PROPERTIES,
    GROUP_STORE_ENV,
    LOG_FORMAT_VERSION,
    AppendConflict,
    GroupLog,
    GroupLogNotFoundError,
    InvalidGroupIdError,
    LogSlice,
    MaintenanceReport,
    default_group_store,
    group_log_uri,
    list_groups,
    validate_group_id,
)

__all__ = [
    "DEFAULT_TABLE_PROPERTIES",
    "GROUP_STORE_ENV",
    "LOG_FORMAT_VERSION",
    "AppendConflict",
    "GroupLog",
    "GroupLogNotFoundError",
    "InvalidGroupIdError",
    "LogSlice",
    "MaintenanceReport",
    "default_group_store",
    "group_log_uri",
    "list_groups",
    "validate_group_id",
]
