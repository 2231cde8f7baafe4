"""Parsing the user's option map: one loop over the specs, then the rules that span options."""

from __future__ import annotations

import dataclasses
import difflib
import logging
from collections.abc import Mapping
from typing import Any, Literal

from spark_kafka_group.errors import OptionError
from spark_kafka_group.group.metadata import partition_name
from spark_kafka_group.kafka.config import OffsetFetchRetry
from spark_kafka_group.kafka.java_settings import translate_java_settings
from spark_kafka_group.options.group import (
    check_group_store_given,
    check_heartbeat_within_session,
)
from spark_kafka_group.options.kafka import KAFKA_OPTION_PREFIX, kafka_key
from spark_kafka_group.options.offsets import (
    BATCH_STARTING_DEFAULT,
    LATEST,
    STREAM_STARTING_DEFAULT,
    offset_limit,
)
from spark_kafka_group.options.settings import GroupSettings, SourceOptions
from spark_kafka_group.options.specs import OPTION_SPECS, SPECS_BY_KEY
from spark_kafka_group.options.store import STORE_OPTION_PREFIX, storage_options_from
from spark_kafka_group.options.subscription import check_one_subscription

_GROUP_FIELDS = frozenset(f.name for f in dataclasses.fields(GroupSettings))
_ENDING_OPTIONS = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")


def parse_options(
    raw: Mapping[str, str], *, read: Literal["stream", "batch"] = "stream"
) -> SourceOptions:
    """Validate ``raw`` (as given to ``DataSource.__init__``) into :class:`SourceOptions`.

    ``read``: a stream (``spark.readStream``) or a batch read (``spark.read``); they differ
    only in where a read starts without ``startingOffsets``, as in Spark's Kafka source
    (streams at latest, batch reads at earliest)."""
    given: dict[str, str] = {}
    kafka_params: dict[str, str] = {}
    for key, value in raw.items():
        lower = key.lower()
        if lower == "startingoffsets" and not str(value).strip():
            continue  # blank: the default of this kind of read
        if lower in SPECS_BY_KEY:
            given[lower] = str(value)
        elif lower.startswith(STORE_OPTION_PREFIX):
            continue
        elif lower.startswith(KAFKA_OPTION_PREFIX):
            kafka_params[kafka_key(key)] = str(value)
        else:
            raise OptionError(_unknown_option_message(key))

    values: dict[str, Any] = {
        spec.name: spec.value(given.get(spec.name.lower())) for spec in OPTION_SPECS
    }
    check_one_subscription(values)
    check_group_store_given(values)
    check_heartbeat_within_session(values)
    _check_trigger_minimum(values)

    fields = {spec.field: values[spec.name] for spec in OPTION_SPECS if spec.field}
    group = GroupSettings(
        storage_options=storage_options_from(raw),
        **{k: v for k, v in fields.items() if k in _GROUP_FIELDS},
    )
    ending = (
        offset_limit(values, "ending")
        if any(values[name] is not None for name in _ENDING_OPTIONS)
        else None
    )
    return SourceOptions(
        group=group,
        starting_offsets=offset_limit(
            values,
            "starting",
            default_mode=STREAM_STARTING_DEFAULT if read == "stream" else BATCH_STARTING_DEFAULT,
        ),
        ending_offsets=ending,
        kafka_params=translate_java_settings(kafka_params, prefix=KAFKA_OPTION_PREFIX),
        fetch_offset_retry=OffsetFetchRetry(
            num_retries=values["fetchOffset.numRetries"],
            retry_interval_ms=values["fetchOffset.retryIntervalMs"],
            api_timeout_ms=values["kafka.default.api.timeout.ms"],
        ),
        **{k: v for k, v in fields.items() if k not in _GROUP_FIELDS},
    )


def _check_trigger_minimum(values: Mapping[str, Any]) -> None:
    minimum, maximum = values["minOffsetsPerTrigger"], values["maxOffsetsPerTrigger"]
    if minimum is not None and maximum is not None and minimum > maximum:
        raise OptionError(
            f"Option 'minOffsetsPerTrigger' = {minimum} is higher than 'maxOffsetsPerTrigger' = "
            f"{maximum}: a batch could never satisfy both; lower it or raise the maximum."
        )


#: Options of Spark's Kafka source that this source replaces, with what to use and why.
_SPARK_KAFKA_OPTIONS = {
    "groupidprefix": "Spark's Kafka source names a generated consumer group per query with "
    "it; here every query names its group, and queries with the same name share the "
    "partitions: use 'groupId', e.g. .option('groupId', 'orders-ingest')",
}


def _unknown_option_message(key: str) -> str:
    lower = key.lower()
    if lower in ("group.id", "groupid ", "consumer.group.id"):
        return f"Unknown option {key!r}: use 'groupId'."
    if lower in _SPARK_KAFKA_OPTIONS:
        return f"Option {key!r} is not supported: {_SPARK_KAFKA_OPTIONS[lower]}."
    names = [spec.name for spec in OPTION_SPECS]
    by_lower = {name.lower(): name for name in names}
    close = difflib.get_close_matches(lower, list(by_lower), n=1, cutoff=0.6)
    hint = f" Did you mean '{by_lower[close[0]]}'?" if close else ""
    return (
        f"Unknown option {key!r}.{hint} Valid options: {', '.join(names)}; "
        "plus 'kafka.*' (passed to the Kafka consumer) and 'groupStore.*' (storage options)."
    )


def check_stream_options(options: SourceOptions) -> None:
    """What a stream refuses (``spark.readStream``), as Spark's ``validateStreamOptions``."""
    if options.ending_offsets is not None:
        raise OptionError(
            "Options 'endingOffsets', 'endingTimestamp' and 'endingOffsetsByTimestamp' are not "
            "valid in streaming queries: a stream has no end. Remove them, use "
            "Trigger.AvailableNow to stop at the offsets available at start, or read a range "
            "with spark.read.format('kafka-group')."
        )
    if options.starting_offsets.mode == "group":
        raise OptionError(
            "Option 'startingOffsets' = 'group' is for batch reads (spark.read): a stream always "
            "continues from the group's committed offsets, and 'startingOffsets' only says where "
            "partitions without a commit start (earliest, latest, none or JSON)."
        )


def check_batch_options(options: SourceOptions) -> None:
    """What a batch read refuses (``spark.read``), as Spark's ``validateBatchOptions``; the
    trigger options are ignored with a warning, as Spark does."""
    starting = options.starting_offsets
    if starting.timestamp_ms is None and starting.mode in ("latest", "none"):
        raise OptionError(
            f"Option 'startingOffsets' = {starting.mode!r} is not valid for batch reads: use "
            "'earliest' (the default), 'group' (the group's committed offsets), JSON offsets "
            "or a timestamp option."
        )
    latest = sorted(tp for tp, o in starting.per_partition.items() if o == LATEST)
    if starting.mode == "json" and latest:
        raise OptionError(
            f"Option 'startingOffsets': partition {partition_name(*latest[0])} -> -1 (latest) "
            "is not valid for batch reads: give an offset or -2 (earliest)."
        )
    for name, value in (
        ("maxOffsetsPerTrigger", options.max_offsets_per_trigger),
        ("maxBytesPerTrigger", options.max_bytes_per_trigger),
        ("minOffsetsPerTrigger", options.min_offsets_per_trigger),
    ):
        if value is not None:
            logging.getLogger(__name__).warning("Option %r is ignored in batch reads.", name)
