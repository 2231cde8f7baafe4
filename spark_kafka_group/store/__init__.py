"""The group log store: one append-only Delta table per consumer group (see :mod:`.log`).

Importing this package is cheap: the group-id rule and paths (:mod:`.paths`) need only the
standard library, so :mod:`spark_kafka_group.options` can check a ``groupId`` without loading
delta-rs and pyarrow. Everything else is imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from spark_kafka_group.store.errors import (
    AppendConflict,
    GroupLogNotFoundError,
    InvalidGroupIdError,
)
from spark_kafka_group.store.paths import (
    GROUP_STORE_ENV,
    group_log_uri,
    list_groups,
    validate_group_id,
)

if TYPE_CHECKING:
    from spark_kafka_group.store.log import GroupLog
    from spark_kafka_group.store.log_store import LogSlice, MaintenanceReport
    from spark_kafka_group.store.table import DEFAULT_TABLE_PROPERTIES, LOG_FORMAT_VERSION

#: Names that need delta-rs / pyarrow, and the module each comes from.
_LAZY = {
    "DEFAULT_TABLE_PROPERTIES": "table",
    "LOG_FORMAT_VERSION": "table",
    "GroupLog": "log",
    "LogSlice": "log_store",
    "MaintenanceReport": "log_store",
}

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
    "group_log_uri",
    "list_groups",
    "validate_group_id",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
