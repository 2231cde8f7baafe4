"""What a query reads: ``subscribe``, ``subscribePattern`` or ``assign``, exactly one."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from spark_kafka_group.errors import OptionError
from spark_kafka_group.options.values import ValueType

SUBSCRIPTION_OPTIONS = ("subscribe", "subscribePattern", "assign")


def _topics(name: str, value: str) -> tuple[str, ...]:
    topics = tuple(t.strip() for t in value.split(",") if t.strip())
    if not topics:
        raise OptionError(
            f"Option {name!r} = {value!r} names no topic: give a comma-separated list "
            "such as 'orders,payments'."
        )
    return topics


def _pattern(name: str, value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise OptionError(
            f"Option {name!r} = {value!r} is not a valid regular expression: {exc}."
        ) from None
    if not value.strip():
        raise OptionError(f"Option {name!r} is empty: give a regex such as 'orders-.*'.")
    return value


def _assign(name: str, value: str) -> dict[str, tuple[int, ...]]:
    example = 'e.g. {"orders": [0, 1, 2]}'
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise OptionError(
            f"Option {name!r} = {value!r} is not valid JSON ({exc.msg}); {example}."
        ) from None
    if not isinstance(parsed, dict) or not parsed:
        raise OptionError(
            f"Option {name!r} = {value!r} must be a non-empty JSON object; {example}."
        )
    result: dict[str, tuple[int, ...]] = {}
    for topic, partitions in parsed.items():
        if (
            not isinstance(partitions, list)
            or not partitions
            or not all(
                isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions
            )
        ):
            raise OptionError(
                f"Option {name!r}: topic {topic!r} maps to {partitions!r}; expected a non-empty "
                f"list of partition numbers >= 0, {example}."
            )
        result[topic] = tuple(sorted(set(partitions)))
    return result


TOPICS: ValueType[tuple[str, ...]] = ValueType("comma-separated list", _topics)
PATTERN: ValueType[str] = ValueType("regular expression", _pattern)
ASSIGNMENT_JSON: ValueType[dict[str, tuple[int, ...]]] = ValueType("JSON", _assign)


def check_one_subscription(values: Mapping[str, Any]) -> None:
    given = [name for name in SUBSCRIPTION_OPTIONS if values[name] is not None]
    if len(given) != 1:
        what = "none was given" if not given else f"got {', '.join(repr(g) for g in given)}"
        raise OptionError(
            "Exactly one of the options 'subscribe', 'subscribePattern' or 'assign' is required; "
            f"{what}."
        )
