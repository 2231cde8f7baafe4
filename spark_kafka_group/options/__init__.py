"""The source's options, parsed once into a typed, validated :class:`SourceOptions`.

Spark hands a Python data source its options lower-cased (``CaseInsensitiveDict``), so every
name is matched case-insensitively and messages quote the documented spelling. Option names
are public API: keep them.

* Each option is declared once, in :mod:`.specs`: its type, default, checks and documentation.
  :func:`parse_options` is a loop over those specs, then the rules that span several options.
* ``kafka.*`` keys pass through to librdkafka (security, fetch tuning, ...) except the keys
  the source must own, which are refused with the option to use instead (:mod:`.kafka`). The
  Java client's security keys are translated to librdkafka's
  (:mod:`spark_kafka_group.kafka.java_settings`).
* ``groupStore.*`` keys pass through to delta-rs as storage options (S3, ADLS, GCS).
* Anything else that is not a known option is an error naming it and the closest valid name.
"""

from __future__ import annotations

from spark_kafka_group.options.kafka import OWNED_KAFKA_KEYS
from spark_kafka_group.options.offsets import (
    EARLIEST,
    LATEST,
    AtTimestamp,
    OffsetLimit,
    OffsetMode,
)
from spark_kafka_group.options.parse import (
    check_batch_options,
    check_stream_options,
    parse_options,
)
from spark_kafka_group.options.properties import read_properties
from spark_kafka_group.options.settings import GroupSettings, SourceOptions
from spark_kafka_group.options.spec import OptionSpec
from spark_kafka_group.options.specs import OPTION_FAMILIES, OPTION_SPECS
from spark_kafka_group.options.store import STORE_OPTION_PREFIX, storage_options_from

__all__ = [
    "EARLIEST",
    "LATEST",
    "OPTION_FAMILIES",
    "OPTION_SPECS",
    "OWNED_KAFKA_KEYS",
    "STORE_OPTION_PREFIX",
    "AtTimestamp",
    "GroupSettings",
    "OffsetLimit",
    "OffsetMode",
    "OptionSpec",
    "SourceOptions",
    "check_batch_options",
    "check_stream_options",
    "parse_options",
    "read_properties",
    "storage_options_from",
]
