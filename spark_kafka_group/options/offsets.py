"""Where a read starts and ends: the ``startingOffsets`` / ``endingOffsets`` families, as
Spark's Kafka source has them (a mode word, JSON per partition, or a timestamp)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from spark_kafka_group.errors import OptionError
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.options.values import ValueType, choice, suggestion

OffsetMode = Literal["earliest", "latest", "none", "group", "json"]

#: Kafka's special ListOffsets timestamps, also used by Spark's per-partition JSON.
EARLIEST = -2
LATEST = -1

#: A mode word and, for ``json``, the offset of each listed partition.
Offsets = tuple[OffsetMode, dict[TopicPartition, int]]

STARTING_WORDS: tuple[OffsetMode, ...] = ("earliest", "latest", "none", "group")
ENDING_WORDS: tuple[OffsetMode, ...] = ("latest",)


@dataclass(frozen=True)
class AtTimestamp:
    """The first offset whose record timestamp is at or after ``ms`` (epoch milliseconds)."""

    ms: int


@dataclass(frozen=True)
class OffsetLimit:
    """One end of an offset range, as Spark's ``KafkaOffsetRangeLimit``: ``startingOffsets`` (where
    a partition the group never committed starts) or ``endingOffsets`` (batch reads).

    ``mode`` is earliest / latest / none / group, or ``json`` with ``per_partition`` holding
    ``{TopicPartition: offset}`` where offset may be :data:`EARLIEST` or :data:`LATEST`.
    Partitions absent from the JSON get ``latest``, as in Spark's Kafka source. The timestamp
    options take precedence, as in Spark: ``timestamp_ms`` (``startingTimestamp``) over
    ``by_timestamp`` (``startingOffsetsByTimestamp``; unlisted partitions follow ``mode``).
    ``no_match_latest``: a timestamp after every record means latest (else an error).
    """

    mode: OffsetMode
    per_partition: Mapping[TopicPartition, int] = field(default_factory=dict)
    by_timestamp: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp_ms: int | None = None
    no_match_latest: bool = False

    def for_partition(self, topic: str, partition: int) -> int | AtTimestamp | None:
        """EARLIEST, LATEST, an exact offset or a timestamp; ``None`` means "no reset policy"
        (``none``) or "the group's committed offset" (``group``)."""
        if self.timestamp_ms is not None:
            return AtTimestamp(self.timestamp_ms)
        tp = TopicPartition(topic, partition)
        if tp in self.by_timestamp:
            return AtTimestamp(self.by_timestamp[tp])
        if self.mode == "earliest":
            return EARLIEST
        if self.mode == "latest":
            return LATEST
        if self.mode in ("none", "group"):
            return None
        return self.per_partition.get(tp, LATEST)


def offsets_type(words: tuple[OffsetMode, ...]) -> ValueType[Offsets]:
    """A mode word (the first when empty), or JSON ``{"topic": {"partition": offset}}``
    (-2 earliest, -1 latest)."""

    def parse(name: str, value: str) -> Offsets:
        text = (value or words[0]).strip()
        for word in words:
            if text.lower() == word:
                return word, {}
        # endingOffsets takes no earliest, so its example must not offer -2
        example = f"{', '.join(words)}, or JSON such as " + (
            '{"orders": {"0": 23, "1": -2}} (-2 = earliest, -1 = latest)'
            if "earliest" in words
            else '{"orders": {"0": 23, "1": -1}} (-1 = latest)'
        )
        if not text.startswith("{"):
            raise OptionError(
                f"Option {name!r} = {value!r} is not valid: use {example}."
                + suggestion(text.lower(), words)
            )
        return "json", _partition_map(name, value, minimum=EARLIEST, example=example)

    return ValueType(f"{' / '.join(f'`{w}`' for w in words)} or JSON", parse)


def _timestamps(name: str, value: str) -> dict[TopicPartition, int]:
    example = 'JSON such as {"orders": {"0": 1700000000000}}'
    return _partition_map(name, value, minimum=0, example=example)


#: ``startingOffsetsByTimestampStrategy``: what a timestamp after every record means.
TIMESTAMP_STRATEGY = choice(
    ("error", "latest"),
    "'error' (fail when no record is at or after the timestamp) or 'latest'",
)

#: JSON ``{"topic": {"partition": epoch ms}}``.
TIMESTAMPS_JSON: ValueType[dict[TopicPartition, int]] = ValueType("JSON", _timestamps)


def no_earliest_end(name: str, text: str, value: Offsets) -> None:
    """An end cannot be -2: nothing would be read."""
    if EARLIEST in value[1].values():
        raise OptionError(
            f"Option {name!r} = {text!r}: an ending offset cannot be -2 (earliest); use an "
            "offset, or -1 for latest."
        )


#: Where a read starts when ``startingOffsets`` is not given: Spark's Kafka source defaults.
STREAM_STARTING_DEFAULT: OffsetMode = "latest"
BATCH_STARTING_DEFAULT: OffsetMode = "earliest"


def offset_limit(
    values: Mapping[str, Any],
    which: Literal["starting", "ending"],
    *,
    default_mode: OffsetMode = "latest",
) -> OffsetLimit:
    """``<which>Offsets`` with ``<which>Timestamp`` and ``<which>OffsetsByTimestamp``, parsed;
    ``default_mode`` when ``<which>Offsets`` is not given (an end given only by timestamps
    ends unlisted partitions at latest)."""
    mode, per_partition = values[f"{which}Offsets"] or (default_mode, {})
    # As Spark: an end after every record is the latest offset.
    no_match_latest = which == "ending" or values["startingOffsetsByTimestampStrategy"] == "latest"
    return OffsetLimit(
        mode=mode,
        per_partition=per_partition,
        by_timestamp=values[f"{which}OffsetsByTimestamp"] or {},
        timestamp_ms=values[f"{which}Timestamp"],
        no_match_latest=no_match_latest,
    )


def _partition_map(
    name: str, value: str, *, minimum: int, example: str
) -> dict[TopicPartition, int]:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise OptionError(
            f"Option {name!r} = {value!r} is not valid JSON ({exc.msg}); use {example}."
        ) from None
    if not isinstance(parsed, dict):
        raise OptionError(f"Option {name!r} = {value!r}: use {example}.")
    result: dict[TopicPartition, int] = {}
    for topic, numbers in parsed.items():
        if not isinstance(numbers, dict):
            raise OptionError(
                f"Option {name!r}: topic {topic!r} maps to {numbers!r}; expected an object of "
                f"partition -> {'offset' if minimum < 0 else 'timestamp'}, {example}."
            )
        for partition, number in numbers.items():
            if (
                not str(partition).isdigit()
                or not isinstance(number, int)
                or isinstance(number, bool)
                or number < minimum
            ):
                allowed = (
                    "offsets are >= 0, -2 (earliest) or -1 (latest)"
                    if minimum < 0
                    else "timestamps are epoch milliseconds >= 0"
                )
                raise OptionError(
                    f"Option {name!r}: {topic!r} partition {partition!r} -> {number!r} is not "
                    f"valid; partitions are numbers >= 0 and {allowed}."
                )
            result[TopicPartition(topic, int(partition))] = number
    return result
