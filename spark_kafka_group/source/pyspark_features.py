"""What the running pyspark offers a Python streaming source: from pyspark 4.2, admission
control (read limits) and Trigger.AvailableNow; on 4.0 / 4.1 neither, and ``latestOffset()``
takes no arguments. A module of its own so that code that only needs the flag (the lag figures
of :mod:`spark_kafka_group.listener.lag`) does not load the reader."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

try:  # pyspark >= 4.2: admission control and Trigger.AvailableNow for Python sources.
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxBytes,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    HAS_ADMISSION_CONTROL = True
except ImportError:  # pyspark 4.0 / 4.1
    HAS_ADMISSION_CONTROL = False
    if not TYPE_CHECKING:  # the type checker sees the newest pyspark, which has them

        class SupportsTriggerAvailableNow:
            """Placeholder so the reader's class statement works on pyspark < 4.2."""

        ReadLimit = Any
        ReadAllAvailable = ReadMaxBytes = ReadMaxRows = None

__all__ = [
    "HAS_ADMISSION_CONTROL",
    "ReadAllAvailable",
    "ReadLimit",
    "ReadMaxBytes",
    "ReadMaxRows",
    "SupportsTriggerAvailableNow",
]
